"""The graph rewrites behind torch_npu.jit.optimize (see the package doc), in
real torch_npu's module for them."""

import torch

__all__ = ["optimize"]

# (what it fuses, TorchScript IR matched, IR it becomes). The match is
# structural: `gelu` with approximate="none" on any tensor value.
_REWRITES = [
    (
        "fast_gelu",
        """
        graph(%input):
            %approximate = prim::Constant[value='none']()
            %result = aten::gelu(%input, %approximate)
            return (%result)
        """,
        """
        graph(%input):
            %result = npu::fast_gelu(%input)
            return (%result)
        """,
    ),
]


def _graph_of(jit_obj):
    if isinstance(jit_obj, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        return jit_obj.graph
    raise TypeError(
        "torch_npu.jit.optimize expects a ScriptModule or ScriptFunction (from torch.jit.trace or "
        f"torch.jit.script), but got {type(jit_obj).__name__}")


def optimize(jit_mod):
    """Rewrites ``jit_mod``'s graph in place into npu fused ops."""
    graph = _graph_of(jit_mod)
    if isinstance(jit_mod, torch.jit.ScriptModule):
        jit_mod.eval()  # inference rewrites: real torch_npu's optimize sets eval mode too
    for _name, pattern, replacement in _REWRITES:
        torch._C._jit_pass_custom_pattern_based_rewrite_graph(pattern, replacement, graph)
