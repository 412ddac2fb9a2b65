"""torch_npu.distributed.fsdp.fully_shard: FSDP2 on npu modules.

torch's ``fully_shard`` runs unchanged on npu modules over an hccl mesh
(``init_device_mesh("npu", ...)``): its all-gathers and reduce-scatters are
ProcessGroupHCCL's, on the npu streams FSDP2 creates. Real torch_npu's
wrapper adds two performance patches that change no result: a reusable
buffer cache for the communication buffers (opted into per module with
``module._use_mem_cache = True``) and skipping the second all-gather when a
recomputed forward runs in backward. vNPU's device memory is host memory
with no fragmentation to avoid, so the wrapper keeps the opt-in attribute
harmless (accepted, no effect) and calls torch's function.
"""

import functools

from torch.distributed.fsdp import fully_shard as _torch_fully_shard


@functools.wraps(_torch_fully_shard)
def fully_shard(*args, **kwargs):
    return _torch_fully_shard(*args, **kwargs)


fully_shard.state = _torch_fully_shard.state
fully_shard.__module__ = __name__

__all__ = ["fully_shard"]
