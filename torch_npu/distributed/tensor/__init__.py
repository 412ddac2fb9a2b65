"""torch_npu.distributed.tensor: DTensor on npu.

torch.distributed.tensor (DTensor, distribute_tensor, DeviceMesh on "npu")
runs on vNPU with torch's own sharding rules. Real torch_npu also registers
sharding strategies for its npu_* fused ops and an npu ring attention for
context parallelism; the latter is not on vNPU (see
torch_npu.distributed.tensor.experimental).
"""

from torch_npu.distributed.tensor import experimental  # noqa: F401
from torch_npu.distributed.tensor.experimental import context_parallel

__all__ = ["context_parallel"]
