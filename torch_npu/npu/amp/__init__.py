"""torch.npu.amp: automatic mixed precision on npu (torch_npu's API)."""

from torch_npu.npu.amp.autocast_mode import autocast, custom_bwd, custom_fwd  # noqa: F401
from torch_npu.npu.amp.grad_scaler import GradScaler  # noqa: F401
from torch_npu.npu.amp.common import get_amp_supported_dtype  # noqa: F401

__all__ = ["autocast", "custom_fwd", "custom_bwd", "GradScaler", "get_amp_supported_dtype"]
