"""DTensor's sharding-rule registration helpers, wherever the installed
torch keeps them (torch_npu's custom sharding strategies import them here)."""

from torch.distributed.tensor._ops._matrix_ops import _mm_like_strategy
from torch.distributed.tensor._ops.utils import register_op_strategy, register_prop_rule

__all__ = ["register_op_strategy", "register_prop_rule", "_mm_like_strategy"]
