"""torch.npu.npugraph_ex: the API of the "npugraph_ex" compile backend
(``torch.compile(model, backend="npugraph_ex", options={...})``): Inductor's
graphs, each replayed as an NPU graph (torch_npu/_inductor/npugraph_runner.py).

- ``compile_fx(gm, example_inputs, options)``: the backend's compiler for an
  ATen-level FX graph, for custom backends built on AOTAutograd
  (``aot_module_simplified(gm, inputs, fw_compiler=...)``);
- ``register_replacement(search_fn, replace_fn, example_inputs, ...)``: a
  pattern replacement (Inductor's pattern matcher) that every later
  "npugraph_ex" compilation applies to its forward graphs;
- ``inference.cache_compile``, ``scope.limit_core_num`` / ``scope.deterministic``.
"""

from torch_npu.npu.npugraph_ex import inference, scope
from torch_npu.npu.npugraph_ex._patterns import register_replacement

__all__ = ["compile_fx", "register_replacement"]

from torch_npu._public_names import report_public_module  # noqa: E402

report_public_module(__name__)  # register_replacement


def compile_fx(gm, example_inputs=None, options=None):
    """Compiles an ATen-level FX graph (AOTAutograd's forward or backward) with
    Inductor and replays it as an NPU graph from the second call on."""
    import npugraph_ex
    return npugraph_ex.compile_fx(gm, example_inputs, options)
