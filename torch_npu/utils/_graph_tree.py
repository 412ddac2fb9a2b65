"""The "npugraphs" compile backend and NPU graphs' part of the Inductor setup.

``npugraphs`` is torch's "cudagraphs" backend for npu: AOTAutograd's eager FX
graphs of the forward and the backward, each replayed as an NPU graph
(``NpuGraphRunner``: the first call of an input signature runs normally, the
second records, later ones replay), with no Inductor code generation.
Imported by the backend's entry point at the first compilation
(torch_npu/dynamo/__init__.py), never at ``import torch_npu``.
"""

import torch

from torch_npu.npu._graph_tree_state import npugraph_mark_step_begin

__all__ = []


def npugraphs(dynamo_model, dynamo_inputs):
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    from torch_npu._inductor.npugraph_runner import NpuGraphRunner

    def forward_compiler(fx, inputs):
        return NpuGraphRunner(make_boxed_func(fx), name="graph")

    def backward_compiler(fx, inputs):
        return NpuGraphRunner(make_boxed_func(fx), name="backward graph")

    return aot_autograd(fw_compiler=forward_compiler, bw_compiler=backward_compiler)(dynamo_model, dynamo_inputs)


class NpugraphsBackend:
    """The registered "npugraphs" backend: a graph module and its example
    inputs, nothing else (compile options are not this backend's)."""

    compiler_name = "npugraphs"

    @staticmethod
    def reset():
        from torch_npu.dynamo import _npugraphs_backend_entrypoint

        _npugraphs_backend_entrypoint.reset()

    def __call__(self, model, inputs):
        return npugraphs(model, inputs)


def _apply_npugraph_tree_methods():
    """At the Inductor setup: "npugraphs" is registered (by its entry point
    usually, else here) and the step marker is the graph trees' own."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if "npugraphs" not in _COMPILER_FNS:
        from torch_npu.dynamo import _npugraphs_backend_entrypoint

        register_backend(name="npugraphs", compiler_fn=_npugraphs_backend_entrypoint)
    torch.compiler.npugraph_mark_step_begin = npugraph_mark_step_begin
