"""torch_npu.npu.utils: version and capability queries.

Note [The CANN version vNPU reports]: the virtual NPU follows CANN 8.0.0, the
version in torch_npu/_cann (the stand-in toolkit folder) and in
torch.version.cann. Every CANN component (runtime, compiler, HCCL, ...)
reports it; the driver has no version, there being no driver.
"""

import re

from torch_npu import _C
from torch_npu.npu.device import _lazy_init, get_soc_version  # noqa: F401

# The CANN release whose behaviour the virtual NPU follows.
_CANN_VERSION = "8.0.0"

_CANN_MODULES = ("CANN", "RUNTIME", "COMPILER", "HCCL", "TOOLKIT", "OPP", "OPP_KERNEL", "DRIVER")

# _is_gte_cann_version compares only against versions from this one on, as in
# real torch_npu (older CANN releases cannot report their version to it).
_FIRST_COMPARABLE = "8.1.RC1"

# "8.1.RC1", "8.0.0", "8.2.T5", "8.1.RC1.alpha002", "8.0.0.alpha1"
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(?:(RC)(\d+)|(T)(\d+)|(\d+))(?:\.alpha(\d+))?$")


def _check_module(module, fn):
    if module not in _CANN_MODULES:
        raise RuntimeError(f"{fn}: module should be one of {list(_CANN_MODULES)}, but got '{module}'.")


def get_cann_version(module="CANN") -> str:
    """The version of a CANN component; "" for DRIVER (vNPU has no driver)."""
    _check_module(module, "get_cann_version")
    return "" if module == "DRIVER" else _CANN_VERSION


def _version_key(version, fn):
    """A sortable key: within major.minor, T (test) builds < RCs < releases, and
    an alpha build < its version without the suffix."""
    match = _VERSION.match(version)
    if match is None:
        raise RuntimeError(f"{fn}: '{version}' is not a CANN version such as 8.1.RC1, 8.0.0 or 8.2.T5.")
    major, minor, _, rc, _, test, release, alpha = match.groups()
    if release is not None:
        level = (2, int(release))
    elif rc is not None:
        level = (1, int(rc))
    else:
        level = (0, int(test))
    return int(major), int(minor), level, int(alpha) if alpha is not None else float("inf")


def _is_gte_cann_version(version, module="CANN") -> bool:
    """True when the component's version is at least ``version``."""
    _check_module(module, "_is_gte_cann_version")
    if module == "DRIVER":
        raise RuntimeError("_is_gte_cann_version: When the module is DRIVER, this function is not supported.")
    fn = "_is_gte_cann_version"
    if _version_key(version, fn) < _version_key(_FIRST_COMPARABLE, fn):
        raise RuntimeError(f"_is_gte_cann_version: When the version is less than \"{_FIRST_COMPARABLE}\", "
                           "this function is not supported.")
    return _version_key(get_cann_version(module), fn) >= _version_key(version, fn)


def is_bf16_supported(including_emulation: bool = False) -> bool:
    """bfloat16 is supported except on 310P chips (VNPU_CHIP=Ascend310P3).
    ``including_emulation`` is accepted and, as in real torch_npu, does not
    change the answer: it is the chip's."""
    if _C._device_count() == 0:
        return False
    return bool(_C._device_properties(-1)["supports_bf16"])


def is_support_inf_nan() -> bool:
    """Whether the devices compute with IEEE inf/nan (True) or in saturation
    mode, where overflows set the float status (False): as torch_npu decides
    it from the chip and INF_NAN_MODE_ENABLE / INF_NAN_MODE_FORCE_DISABLE
    (the 950 always True; the 910B / 910_93 profiles True unless forced off;
    the 910A and 310P False). Read when the devices are made, as real
    torch_npu reads it at device init."""
    return bool(_C._npu_is_support_inf_nan())


def _dump_not_supported(fn):
    raise RuntimeError(f"torch.npu.{fn} is not supported on vNPU: operator dumps are written by the Ascend "
                       "runtime (ACL dump), which the virtual NPU does not have. Use torch.utils hooks or "
                       "the profiler (torch_npu.profiler) instead.")


def init_dump() -> None:
    _dump_not_supported("init_dump")


def set_dump(cfg_file) -> None:
    _dump_not_supported("set_dump")


def finalize_dump() -> None:
    _dump_not_supported("finalize_dump")


# Names real torch_npu's torch_npu.npu.utils also defines (the device,
# stream and fault functions of torch.npu), looked up in torch.npu on first
# use: torch.npu imports this module while it is being built.
_FROM_TORCH_NPU = ("obfuscation_initialize", "obfuscation_finalize", "obfuscation_calculate", "synchronize",
                   "set_device", "current_device", "device", "device_of", "StreamContext", "stream", "set_stream",
                   "current_stream", "default_stream", "set_sync_debug_mode", "get_sync_debug_mode",
                   "get_npu_overflow_flag", "clear_npu_overflow_flag", "current_blas_handle", "check_uce_in_memory",
                   "stress_detect", "ipc_collect", "set_op_timeout_ms")


def npu_check_overflow(grad):
    """True when ``grad`` (a tensor, or a float) holds an inf or a NaN: what
    real torch_npu's overflow check on a gradient answers."""
    import math

    import torch
    if isinstance(grad, torch.Tensor):
        return bool(grad.numel()) and not bool(torch.isfinite(grad).all())
    if isinstance(grad, (int, float)):
        return not math.isfinite(grad)
    raise TypeError(f"npu_check_overflow expects a tensor or a float, got {type(grad).__name__}")


def __getattr__(name):
    if name in _FROM_TORCH_NPU:
        import torch_npu.npu
        return getattr(torch_npu.npu, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

