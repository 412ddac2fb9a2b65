"""torch_npu.distributed.nn: autograd-aware collectives for the hccl backend.

Importing it (torch_npu.distributed.nn.functional) lets
torch.distributed.nn.functional's collectives differentiate on hccl groups.
"""

from torch_npu.distributed.nn import functional

__all__ = []
