"""Dynamo's view of npu (torch._dynamo.device_interface.DeviceInterface), at
real torch_npu's module path (torch_npu.utils._dynamo_device); the Dynamo
setup registers it for the npu device (torch_npu/utils/_dynamo.py).

Its Worker answers for Inductor's compile workers, which must not touch the
device: set_device only records the index, and current_device and the device
properties come from that record and a cache filled once, as for CUDA. The
module-level names they use (current_device, device_count,
get_device_properties_npu) are looked up at call time, so they can be replaced.
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


class _KernelDeviceProperties:
    """The npu's properties, plus what Inductor's heuristics ask of a device
    that runs its kernels: the kernels run on the host's cores."""

    def __init__(self, props):
        self._props = props
        self.multi_processor_count = os.cpu_count() or 1

    def __getattr__(self, name):
        return getattr(self._props, name)


def get_device_properties_npu(device):
    """The npu's properties as Inductor's heuristics read them."""
    return _KernelDeviceProperties(torch.npu.get_device_properties(device))


class NpuInterface(DeviceInterface):
    device = torch.npu.device
    Event = torch.npu.Event
    Stream = torch.npu.Stream

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices["npu"] = device

        @staticmethod
        def current_device() -> int:
            if "npu" in caching_worker_current_devices:
                return caching_worker_current_devices["npu"]
            return current_device()

        @staticmethod
        def get_device_properties(device=None):
            if isinstance(device, str):
                device = torch.device(device)
                if device.type != "npu":
                    raise AssertionError(f"NpuInterface.Worker.get_device_properties: expected an npu device, "
                                         f"got {device}")
            if isinstance(device, torch.device):
                device = device.index
            if device is None:
                device = NpuInterface.Worker.current_device()
            if "npu" not in caching_worker_device_properties:
                caching_worker_device_properties["npu"] = [get_device_properties_npu(i) for i in range(device_count())]
            return caching_worker_device_properties["npu"][device]

    current_device = staticmethod(torch.npu.current_device)
    set_device = staticmethod(torch.npu.set_device)
    device_count = staticmethod(torch.npu.device_count)
    is_available = staticmethod(torch.npu.is_available)
    stream = staticmethod(torch.npu.stream)
    current_stream = staticmethod(torch.npu.current_stream)
    set_stream = staticmethod(torch.npu.set_stream)
    synchronize = staticmethod(torch.npu.synchronize)
    @staticmethod
    def get_device_properties(device=None):
        return get_device_properties_npu(device if device is not None else current_device())

    memory_allocated = staticmethod(torch.npu.memory_allocated)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        previous = torch.npu.current_device()
        if device >= 0 and device != previous:
            torch.npu.set_device(device)
        return previous

    exchange_device = maybe_exchange_device

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.npu.set_stream(torch.npu.Stream(stream_id=stream_id, device_index=device_index,
                                              device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        # The aclrtStream handle, as torch.cuda's is the cudaStream_t.
        return torch.npu.current_stream(device_idx).npu_stream

    @staticmethod
    def get_compute_capability(device=None) -> str:
        return ""  # no triton: the C++ backend makes npu's kernels

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return torch.npu.is_bf16_supported()

    @staticmethod
    def is_triton_capable(device=None) -> bool:
        return False

    @staticmethod
    def raise_if_triton_unavailable(device=None) -> None:
        raise RuntimeError("npu kernels are made by Inductor's C++ backend, not triton")
