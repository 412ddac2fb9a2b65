"""Dynamo's view of npu (torch._dynamo.device_interface.DeviceInterface), at
real torch_npu's module path (torch_npu.utils._dynamo_device); the Dynamo
setup registers it for the npu device (torch_npu/utils/_dynamo.py).

Most of the interface is torch.npu under the names Dynamo asks for. Two parts
are more than that:

* the Worker, which answers for Inductor's compile workers. A worker must not
  touch the device, so set_device only records an index, and the device
  properties are read once for every npu and kept (torch's
  caching_worker_* dicts, as CUDA's Worker does);
* the properties Inductor's heuristics see: vNPU's kernels are C++ loops on
  the host, so the "multiprocessor count" they size work by is the host's
  core count.

The module-level names the Worker calls (current_device, device_count,
get_device_properties_npu) are looked up when it runs, so tests can replace them.
"""

import os

import torch
from torch._dynamo.device_interface import (
    DeviceInterface,
    caching_worker_current_devices,
    caching_worker_device_properties,
)

from torch_npu.npu import current_device, device_count

__all__ = []

_NPU = "npu"  # the key of npu's entries in torch's caching_worker_* dicts


class _HostKernelProperties:
    """An npu's properties, with what Inductor sizes its kernels by made the
    host's: vNPU's kernels run on the host's cores."""

    def __init__(self, npu_properties):
        self._npu_properties = npu_properties
        self.multi_processor_count = os.cpu_count() or 1

    def __getattr__(self, name):
        return getattr(self._npu_properties, name)


def get_device_properties_npu(device):
    """The properties of npu ``device`` as Inductor's heuristics read them."""
    return _HostKernelProperties(torch.npu.get_device_properties(device))


def _worker_device_index(device):
    """The npu index a Worker call names: an int, "npu:i" or torch.device, None (or "npu") for the current one."""
    if device is not None and not isinstance(device, int):
        device = torch.device(device)
        if device.type != _NPU:
            raise AssertionError(f"NpuInterface.Worker.get_device_properties: expected an npu device, got {device}")
        device = device.index
    return NpuInterface.Worker.current_device() if device is None else device


def _worker_properties_of_every_npu():
    if _NPU not in caching_worker_device_properties:
        caching_worker_device_properties[_NPU] = [get_device_properties_npu(i) for i in range(device_count())]
    return caching_worker_device_properties[_NPU]


class NpuInterface(DeviceInterface):
    device = torch.npu.device
    Event = torch.npu.Event
    Stream = torch.npu.Stream

    class Worker:
        """Inductor's compile workers' view: recorded and cached, never the device itself."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices[_NPU] = device

        @staticmethod
        def current_device() -> int:
            recorded = caching_worker_current_devices.get(_NPU)
            return current_device() if recorded is None else recorded

        @staticmethod
        def get_device_properties(device=None):
            return _worker_properties_of_every_npu()[_worker_device_index(device)]

    # ---- devices and streams: torch.npu's own functions
    current_device = staticmethod(torch.npu.current_device)
    set_device = staticmethod(torch.npu.set_device)
    device_count = staticmethod(torch.npu.device_count)
    is_available = staticmethod(torch.npu.is_available)
    synchronize = staticmethod(torch.npu.synchronize)
    stream = staticmethod(torch.npu.stream)
    current_stream = staticmethod(torch.npu.current_stream)
    set_stream = staticmethod(torch.npu.set_stream)
    memory_allocated = staticmethod(torch.npu.memory_allocated)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        """Makes ``device`` current (a negative index: leaves it) and returns the one it replaced."""
        replaced = torch.npu.current_device()
        if 0 <= device != replaced:
            torch.npu.set_device(device)
        return replaced

    exchange_device = maybe_exchange_device

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.npu.set_stream(torch.npu.Stream(stream_id=stream_id, device_index=device_index,
                                              device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        # The aclrtStream handle, as torch.cuda's is the cudaStream_t.
        return torch.npu.current_stream(device_idx).npu_stream

    # ---- what Inductor asks before it generates code
    @staticmethod
    def get_device_properties(device=None):
        return get_device_properties_npu(torch.npu.current_device() if device is None else device)

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return torch.npu.is_bf16_supported()

    # Inductor's C++ backend makes npu's kernels, so there is no compute
    # capability to report and triton is never the way (is_triton_capable:
    # DeviceInterface's False).
    @staticmethod
    def get_compute_capability(device=None) -> str:
        return ""

    @staticmethod
    def raise_if_triton_unavailable(device=None) -> None:
        raise RuntimeError("npu kernels are made by Inductor's C++ backend, not triton")
