"""Device management: torch.npu.device_count, set_device, properties, ..."""

import functools
import os
import re
import uuid
import warnings

import torch

from torch_npu import _C


def is_available() -> bool:
    """True when at least one virtual NPU is visible. Never raises."""
    return device_count() > 0


def device_count() -> int:
    """Number of visible NPUs (VNPU_DEVICE_COUNT filtered by
    ASCEND_RT_VISIBLE_DEVICES). Never raises: 0 when misconfigured."""
    return _C._device_count()


def is_initialized() -> bool:
    return _C._is_initialized()


def _lazy_init():
    if device_count() == 0:
        error = _C._init_error()
        raise RuntimeError(
            "The virtual NPU could not be initialised: " + error if error else
            "No NPU device is available (VNPU_DEVICE_COUNT=0 or ASCEND_RT_VISIBLE_DEVICES is empty).")
    _C._lazy_init()


def init():
    """Initialises the NPU state (a no-op once done)."""
    _lazy_init()


# Set by torch_npu.contrib.transfer_to_npu: torch.cuda.* is torch.npu.* then,
# and the "cuda" devices an unchanged CUDA script passes name npus.
_cuda_is_npu = False


def _is_npu_type(device_type: str) -> bool:
    return device_type == "npu" or (_cuda_is_npu and device_type == "cuda")


def _index(device) -> int:
    """Device index from an int, str, torch.device or None (current)."""
    if device is None:
        return -1
    if isinstance(device, bool):
        raise TypeError("Invalid device, expected int, str or torch.device but got bool")
    if isinstance(device, int):
        if device < -1:
            raise ValueError(f"Invalid device ID {device}: device IDs are non-negative (or -1 for the current device)")
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if not _is_npu_type(device.type):
            raise ValueError(f"Expected a npu device, but got: {device}")
        return -1 if device.index is None else device.index
    raise TypeError(f"Invalid device, expected int, str or torch.device but got {type(device).__name__}")


def _get_device_index(device, optional: bool = False, allow_cpu: bool = False) -> int:
    """torch.cuda._get_device_index for npu (real torch_npu's torch_npu.npu._get_device_index):
    an int is returned as is; an npu device (or its string) gives its index,
    or with ``optional`` the current device when it has none (as does
    ``None``); ``allow_cpu`` accepts a cpu device as -1."""
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if allow_cpu and device.type == "cpu":
            return -1
        if not _is_npu_type(device.type):
            expected = "a npu or cpu device" if allow_cpu else "a npu device"
            raise ValueError(f"Expected {expected}, but got: {device}")
        if device.index is not None:
            return device.index
        device = None
    if isinstance(device, _DeviceContext):
        return device.idx
    if device is None and optional:
        return current_device()
    raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")


def current_device() -> int:
    _lazy_init()
    return _C._current_device()


def set_device(device) -> None:
    index = _index(device)
    if index >= 0:
        _C._set_device(index)


class device:
    """Context manager that changes the current NPU device."""

    def __init__(self, device):
        self.idx = _index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = _C._current_device()
            if self.prev_idx != self.idx:
                _C._set_device(self.idx)
        return self

    def __exit__(self, *args):
        if self.idx >= 0 and self.prev_idx != self.idx:
            _C._set_device(self.prev_idx)
        return False


_DeviceContext = device  # for functions whose parameter is named `device`


class device_of(device):
    """Sets the current device to the one of the given tensor (no-op for CPU tensors)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "npu" else -1)


def synchronize(device=None) -> None:
    """Waits for all kernels on all streams of the device to finish; raises
    a pending asynchronous kernel error."""
    _lazy_init()
    _C._synchronize(_index(device) if device is not None else _C._current_device())


class _NPUDeviceProperties:
    """What torch_npu's get_device_properties returns."""

    def __init__(self, props: dict):
        self.name = props["name"]
        self.total_memory = props["total_memory"]
        self.cube_core_num = props["cube_core_num"]
        self.vector_core_num = props["vector_core_num"]
        self.L2_cache_size = props["L2_cache_size"]
        # A UUID as CUDA's and torch_npu's (36 characters, 16 bytes), stable per
        # card: "VNPU" in hex, the SoC version, then the physical card id.
        self.uuid = uuid.UUID(f"564e5055-{props['soc_version']:04x}-0000-0000-{props['physical_id']:012x}")
        # CUDA's and ROCm's fields, None on npu as in torch_npu: code written
        # for CUDA reads them (Inductor's cache key reads gcnArchName when
        # torch.version.cuda is None, as on a CPU build under transfer_to_npu).
        self.major = None
        self.minor = None
        self.is_multi_gpu_board = None
        self.is_integrated = None
        self.multi_processor_count = None
        self.max_threads_per_multi_processor = None
        self.warp_size = None
        self.regs_per_multiprocessor = None
        self.gcnArchName = None

    def __repr__(self):
        return (f"_NPUDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"cube_core_num={self.cube_core_num}, vector_core_num={self.vector_core_num}, "
                f"uuid={self.uuid}, L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)")


# The parameter is named device_name, as in real torch_npu (keyword callers
# write get_device_name(device_name=0)); it takes a device like torch.cuda's.
def get_device_properties(device_name=None) -> _NPUDeviceProperties:
    _lazy_init()
    return _NPUDeviceProperties(_C._device_properties(_index(device_name)))


def get_device_name(device_name=None) -> str:
    return get_device_properties(device_name).name


def _is_pre_910b(chip_name: str) -> bool:
    """910A and the 310P: the chips whose torch_npu defaults are the older
    ones (jit compile on, ACL_PRECISION_MODE allow_fp32_to_fp16, saturation
    mode)."""
    return chip_name.lower().startswith(("ascend910a", "ascend310"))


@functools.lru_cache(maxsize=None)
def _device_is_pre_910b() -> bool:
    """_is_pre_910b for this process's chip (VNPU_CHIP, fixed at start)."""
    return is_available() and _is_pre_910b(get_device_name())


_CAPABILITY_NOTE = ("The return value of get_device_capability is only for compatibility with PyTorch "
                    "and does not represent the actual capability of the NPU device.")


def get_device_capability(device=None):
    """(major, minor) from TORCH_NPU_DEVICE_CAPABILITY ("8.0"), else None, as in
    real torch_npu: an NPU has no CUDA compute capability, so the value is
    only what the user configures for code that asks (``device`` is unused)."""
    value = os.getenv("TORCH_NPU_DEVICE_CAPABILITY")
    if not value:
        warnings.warn("You can set the device capability via the environment variable "
                      f"TORCH_NPU_DEVICE_CAPABILITY. {_CAPABILITY_NOTE}")
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)", value)
    if match is None:
        warnings.warn(f"torch.npu.get_device_capability can't parse TORCH_NPU_DEVICE_CAPABILITY environment "
                      f"variable: {value}. Expected format is 'major.minor' where major and minor are non-negative "
                      "integers (e.g., '8.0').")
        return None
    warnings.warn(_CAPABILITY_NOTE)
    return int(match.group(1)), int(match.group(2))


def get_soc_version() -> int:
    """SoC version number of the current device's chip (e.g. 221 for Ascend910B2)."""
    _lazy_init()
    return _C._device_properties(-1)["soc_version"]


def mem_get_info(device=None):
    """(free, total) bytes of the device."""
    _lazy_init()
    return _C._mem_get_info(_index(device))


def utilization(device=None) -> int:
    """Percent of the time since the previous call for this device (the
    first call: since the device started) during which any of its streams
    ran work, like NVML's utilization that torch.cuda.utilization reads."""
    _lazy_init()
    index = _index(device) if device is not None else _C._current_device()
    _C._check_device(index)
    return _C._utilization(index)


def can_device_access_peer(device_id, peer_device_id) -> bool:
    """Whether ``device_id`` can map ``peer_device_id``'s memory. Every pair of
    distinct virtual NPUs can (they share host memory); a device and itself
    is not a peer pair, and is False as in torch_npu (aclrtDeviceCanAccessPeer)."""
    count = device_count()
    device_id, peer_device_id = _index(device_id), _index(peer_device_id)
    if not 0 <= device_id < count:
        raise AssertionError(f"Invalid device id {device_id}: there are {count} NPU devices.")
    if not 0 <= peer_device_id < count:
        raise AssertionError(f"Invalid peer device id {peer_device_id}: there are {count} NPU devices.")
    _lazy_init()
    return device_id != peer_device_id
