"""torch_npu.jit: rewrites of TorchScript graphs into npu fused ops.

``torch_npu.jit.optimize(traced_or_scripted)`` rewrites, in place, the graph
of a traced or scripted function or module so that patterns an npu fused op
computes in one kernel call that op instead (today: ``gelu`` with
approximate='none' to the cheaper ``npu::fast_gelu``, as real torch_npu
does; results differ by fast_gelu's approximation error). A module is put in eval mode
first, as real torch_npu's optimize does by way of
``torch.jit.optimize_for_inference``. The rewritten graph saves and loads
with ``torch.jit.save``/``load`` like any other.

As in real torch_npu, a function that already ran keeps running the graph
it was first optimized from: TorchScript caches that copy per function, and
``torch.jit.trace`` runs the function once to check the trace (unless
``check_trace=False``). Save and load the optimized module, or trace with
``check_trace=False``, to run the rewritten graph.
"""

__all__ = ["optimize"]

from torch_npu.jit.register_fusion_pattern import optimize
