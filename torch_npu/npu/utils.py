"""torch_npu.npu.utils: version and capability queries."""

from torch_npu import _C
from torch_npu.npu.device import _lazy_init, get_soc_version  # noqa: F401

# The CANN release whose behaviour the virtual NPU follows.
_CANN_VERSION = "8.0.0"


def get_cann_version(module="CANN") -> str:
    return _CANN_VERSION


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 is supported except on 310P chips (VNPU_CHIP=Ascend310P3)."""
    if _C._device_count() == 0:
        return False
    return bool(_C._device_properties(-1)["supports_bf16"])


def is_support_inf_nan() -> bool:
    """The 910B family computes with IEEE inf/nan (no saturation mode)."""
    return True
