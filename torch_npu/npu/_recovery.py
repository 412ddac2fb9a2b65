"""Fault recovery of tensor data: real torch_npu's torch_npu.npu._recovery.

After a device fault (an uncorrectable memory error, a device restart) the
data of the tensors alive at that moment cannot be trusted. ``restart_device
(device, rebuild_all_resources=True)`` marks every allocated block of the
device unsafe and turns the check on: an operator given an unsafe tensor
raises "There is unsafe data in the input tensor.", until a copy of safe data
into it (``tensor.copy_(...)``, as a checkpoint reload does) makes it safe;
memory freed and allocated again is safe (csrc/core/npu_recovery.h).

The virtual NPU itself never faults (see torch_npu/npu/recovery.py): the
check serves recovery code (MindSpeed's checkpoint-free recovery) and its
tests, which mark data unsafe as a real fault would.
"""

import logging

import torch

from torch_npu import _C
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = ["check_npu_storage_is_safe", "check_npu_tensor_is_safe", "mark_all_npu_tensor_unsafe",
           "update_npu_storage_to_safe", "update_npu_tensor_to_safe", "set_npu_tensor_unsafe_check_flag",
           "get_npu_tensor_unsafe_check_flag", "restart_device", "stop_device"]

logger = logging.getLogger("torch_npu.recovery")

_STORAGES = (torch.storage.TypedStorage, torch.storage.UntypedStorage)


def _storage_data(storage_obj):
    if not isinstance(storage_obj, _STORAGES):
        raise RuntimeError(f"param type should be TypedStorage or UntypedStorage, could not be {type(storage_obj)}" +
                           pta_error(ErrCode.TYPE))
    if storage_obj.device.type != "npu":
        return None  # host data is never marked
    return storage_obj.data_ptr()


def _tensor_storage(tensor_obj):
    if not isinstance(tensor_obj, torch.Tensor):
        raise RuntimeError(f"param type should be Tensor, could not be {type(tensor_obj)}" + pta_error(ErrCode.TYPE))
    return tensor_obj.untyped_storage()


def check_npu_storage_is_safe(storage_obj) -> bool:
    data = _storage_data(storage_obj)
    return data is None or _C._npu_data_ptr_is_safe(data)


def check_npu_tensor_is_safe(tensor_obj) -> bool:
    return check_npu_storage_is_safe(_tensor_storage(tensor_obj))


def mark_all_npu_tensor_unsafe(device: int) -> None:
    _C._mark_all_npu_data_ptr_unsafe(device)


def update_npu_storage_to_safe(storage_obj) -> None:
    data = _storage_data(storage_obj)
    if data is not None:
        _C._update_npu_data_ptr_to_safe(data)


def update_npu_tensor_to_safe(tensor_obj) -> None:
    update_npu_storage_to_safe(_tensor_storage(tensor_obj))


def set_npu_tensor_unsafe_check_flag(flag: bool) -> None:
    _C._set_npu_data_unsafe_flag(bool(flag))


def get_npu_tensor_unsafe_check_flag() -> bool:
    return _C._get_npu_data_unsafe_flag()


def _recover_streams(device):
    """Takes the errors the device's streams hold (each is reported once),
    so work after the restart starts clean."""
    for _ in range(1024):  # more streams than a process makes; each pass takes one error
        try:
            torch.npu.synchronize(device)
            return
        except RuntimeError as error:
            logger.info("restart device %s: dropped the stream error %s", device, str(error).splitlines()[0])


def restart_device(device_id: int, rebuild_all_resources: bool = False, disable_tensor_unsafe_check: bool = False):
    """Brings a device back after a fault. With ``rebuild_all_resources``, the
    data of the tensors alive now is marked unsafe and checked (unless
    ``disable_tensor_unsafe_check``), and the errors its streams hold are
    dropped."""
    from torch_npu.npu.recovery import _checked
    device = _checked(device_id)
    logger.info("restart device start, device_id=%s, rebuild_all_resources=%s, disable_tensor_unsafe_check=%s",
                device, rebuild_all_resources, disable_tensor_unsafe_check)
    if rebuild_all_resources:
        if not disable_tensor_unsafe_check:
            mark_all_npu_tensor_unsafe(device)
            set_npu_tensor_unsafe_check_flag(True)
        _recover_streams(device)
    logger.info("restart device end, device_id=%s", device)


def stop_device(device_id):
    from torch_npu.npu.recovery import stop_device as _stop
    return _stop(device_id)
