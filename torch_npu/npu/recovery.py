"""Fault handling: torch.npu.stop_device / restart_device (the
fault-recovery pair MindSpeed's checkpoint-free recovery calls),
check_uce_in_memory / _get_uce_addr (uncorrectable memory errors) and
stress_detect (an on-chip hardware self test).

UCE (uncorrectable ECC errors in HBM) cannot happen on the virtual NPU: its
device memory is host RAM, whose errors the host kernel handles and never
reports to the process. So check_uce_in_memory truthfully reports 0 ("no
UCE error") and _get_uce_addr an empty list. Stopping a device, and a
hardware stress test, would need the runtime (csrc, runtime/) to abort the
tasks on its streams, which it does not do: those raise a RuntimeError that
says so. restart_device marks the device's live data unsafe for recovery
code (torch_npu/npu/_recovery.py).
"""

from torch_npu import _C
from torch_npu.npu.device import _index, _lazy_init


def _checked(device_id):
    _lazy_init()
    index = _index(device_id)
    if index < 0:
        index = _C._current_device()
    _C._check_device(index)
    return index


def _not_supported(fn, why):
    raise RuntimeError(f"torch.npu.{fn} is not supported on vNPU: {why}")


def check_uce_in_memory(device_id):
    """0: no uncorrectable memory error (the virtual NPU's memory is host RAM; see the module docstring).
    Real torch_npu returns 1, 2 or 3 when a UCE hit memory; vNPU never does."""
    _checked(device_id)
    return 0


def _get_uce_addr():
    """The device addresses hit by uncorrectable errors: none on the virtual NPU."""
    _lazy_init()
    return []


def stop_device(device_id):
    _checked(device_id)
    _not_supported("stop_device", "the virtual NPU's runtime cannot abort the tasks queued on its streams "
                   "(there is no device to stop); let the queued work finish with torch.npu.synchronize().")


def restart_device(device_id, rebuild_all_resources=False, disable_tensor_unsafe_check=False):
    """See torch_npu.npu._recovery.restart_device: marks the device's live data
    unsafe and drops its streams' errors (the virtual NPU never stops)."""
    from torch_npu.npu import _recovery
    _recovery.restart_device(device_id, rebuild_all_resources, disable_tensor_unsafe_check)


def stress_detect(detect_type="aic"):
    _lazy_init()
    _not_supported("stress_detect", f"it runs a hardware self test (detect_type={detect_type!r}: 'aic' tests the AI "
                   "cores and HBM, 'hccs' the links between chips), which the virtual NPU (host threads and host "
                   "memory) does not have.")
