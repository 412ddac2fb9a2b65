"""Context parallelism with npu attention (not on vNPU: it raises).

Real torch_npu's context_parallel swaps DTensor's scaled-dot-product-attention
dispatch for a ring attention built on npu_fusion_attention_v3 and its grad,
merging the per-block softmax statistics with npu_ring_attention_update and
rotating key/value blocks between ranks. vNPU does not emulate that ring
dispatcher, so context_parallel, context_parallel_unshard and
set_rotate_method raise RuntimeError rather than run torch's CUDA-oriented
path on npu buffers.
"""

_REASON = ("the npu ring-attention dispatcher (npu_fusion_attention_v3 blocks merged by npu_ring_attention_update, "
           "key/value rotation between ranks) that replaces DTensor's attention dispatch is not emulated")


def _unsupported(name):
    return RuntimeError(f"{name} is not supported on vNPU: {_REASON}")


def context_parallel(*args, **kwargs):
    raise _unsupported("context_parallel")


def context_parallel_unshard(*args, **kwargs):
    raise _unsupported("context_parallel_unshard")


def set_rotate_method(*args, **kwargs):
    raise _unsupported("set_rotate_method")


context_parallel.__module__ = "torch_npu.distributed.tensor"

__all__ = ["context_parallel", "context_parallel_unshard", "set_rotate_method"]
