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


def restart_device(device_id: int, rebuild_all_resources: bool = False, disable_tensor_unsafe_check: bool = False):
    """Brings a device back after a fault; the virtual NPU never stops, so only the resources are rebuilt.

    With ``rebuild_all_resources`` the streams' pending errors are dropped and, unless
    ``disable_tensor_unsafe_check``, all data alive on the device is marked unsafe and the check switched on.
    """
    from torch_npu.npu.recovery import _checked   # recovery.py imports this module: import at call time
    device = _checked(device_id)
    logger.info("restart device start, device_id=%s, rebuild_all_resources=%s, disable_tensor_unsafe_check=%s",
                device, rebuild_all_resources, disable_tensor_unsafe_check)
    if rebuild_all_resources:
        distrust_live_data = not disable_tensor_unsafe_check
        if distrust_live_data:
            mark_all_npu_tensor_unsafe(device)
            set_npu_tensor_unsafe_check_flag(True)
        _discard_stream_errors(device)
    logger.info("restart device end, device_id=%s", device)


# A stream reports the error of a failed task once, to the next synchronisation; with several streams in error,
# each synchronize() raises one of them. This bounds the passes (no process makes that many streams).
_MAX_STREAM_ERRORS = 1024


def _discard_stream_errors(device) -> None:
    """Synchronizes the device until no stream has an error left to report, logging each one dropped."""
    for _ in range(_MAX_STREAM_ERRORS):
        try:
            torch.npu.synchronize(device)
        except RuntimeError as error:
            first_line = str(error).splitlines()[0]
            logger.info("restart device %s: dropped the stream error %s", device, first_line)
        else:
            break


def stop_device(device_id):
    """torch.npu.stop_device (it raises: the virtual NPU's runtime has no device to stop)."""
    from torch_npu.npu import recovery
    return recovery.stop_device(device_id)


def mark_all_npu_tensor_unsafe(device: int) -> None:
    _C._mark_all_npu_data_ptr_unsafe(device)


def get_npu_tensor_unsafe_check_flag() -> bool:
    return _C._get_npu_data_unsafe_flag()


def set_npu_tensor_unsafe_check_flag(flag: bool) -> None:
    _C._set_npu_data_unsafe_flag(bool(flag))


def check_npu_tensor_is_safe(tensor_obj) -> bool:
    return _is_safe(_npu_address_of_tensor(tensor_obj))


def check_npu_storage_is_safe(storage_obj) -> bool:
    return _is_safe(_npu_address_of_storage(storage_obj))


def update_npu_tensor_to_safe(tensor_obj) -> None:
    _make_safe(_npu_address_of_tensor(tensor_obj))


def update_npu_storage_to_safe(storage_obj) -> None:
    _make_safe(_npu_address_of_storage(storage_obj))


# The safe/unsafe marks live in the caching allocator, keyed by the address of each block (csrc/core/npu_recovery.h).
# The helpers below turn the object they are given into such an address, or into None for host memory, which no
# fault touches: host data always counts as safe, and marking it safe does nothing.

def _npu_address_of_storage(storage_obj):
    if isinstance(storage_obj, (torch.storage.UntypedStorage, torch.storage.TypedStorage)):
        return storage_obj.data_ptr() if storage_obj.device.type == "npu" else None
    raise RuntimeError(f"param type should be TypedStorage or UntypedStorage, could not be {type(storage_obj)}" +
                       pta_error(ErrCode.TYPE))


def _npu_address_of_tensor(tensor_obj):
    if isinstance(tensor_obj, torch.Tensor):
        return _npu_address_of_storage(tensor_obj.untyped_storage())
    raise RuntimeError(f"param type should be Tensor, could not be {type(tensor_obj)}" + pta_error(ErrCode.TYPE))


def _is_safe(address) -> bool:
    return address is None or _C._npu_data_ptr_is_safe(address)


def _make_safe(address) -> None:
    if address is not None:
        _C._update_npu_data_ptr_to_safe(address)
