"""Context parallelism on npu, under real torch_npu's module name.

torch's context parallelism (torch.distributed.tensor.experimental.
_context_parallel) shards attention's sequence dimension over a device mesh
and runs a ring attention: each rank attends its query block to every
rank's key/value block in turn, merging the blocks by their softmax
statistics. Its API is re-exported here unchanged; importing this package
adds the npu attention kernels to its ring (_attention.py).
"""

from torch.distributed.tensor.experimental._context_parallel._attention import (
    _CausalBehavior,
    _context_parallel_shard,
    _ContextParallel,
    _cp_options,
    _disable_context_parallel_dispatcher,
    _enable_context_parallel_dispatcher,
    _is_causal_behavior,
    _RotateMethod,
    context_parallel,
    context_parallel_unshard,
    set_rotate_method,
)
from torch.distributed.tensor.experimental._context_parallel._load_balancer import (
    _HeadTailLoadBalancer,
    _LoadBalancer,
    _PerDocumentHeadTailLoadBalancer,
)

from torch_npu.distributed.tensor.experimental._context_parallel import _attention  # noqa: F401  (the npu ring)

__all__ = [
    "_CausalBehavior",
    "_context_parallel_shard",
    "_ContextParallel",
    "_cp_options",
    "_disable_context_parallel_dispatcher",
    "_enable_context_parallel_dispatcher",
    "_is_causal_behavior",
    "_RotateMethod",
    "context_parallel",
    "context_parallel_unshard",
    "set_rotate_method",
    "_HeadTailLoadBalancer",
    "_LoadBalancer",
    "_PerDocumentHeadTailLoadBalancer",
]
