"""A record of the caching allocator (FRAMEWORK/torch.memory_usage): one block allocated or freed,
with the allocator's totals after it.

Its fixed part, little-endian::

    i64 ptr, time_ns, alloc_size, total_allocated, total_reserved, total_active, stream_ptr
    i8  device_type, device_index
    u8  component_type, data_type, allocator_type
    u64 thread_id, process_id

Sizes are bytes; the ``*_for_db`` properties give them as recorded, the others in KB (the block) or
MB (the totals), as memory_record.csv shows them.
"""

import struct

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_FIXED = struct.Struct("<7q2b3B2Q")
_FIELDS = ("ptr", "time_ns", "alloc_size", "total_allocated", "total_reserved", "total_active", "stream_ptr",
           "device_type", "device_index", "component_type", "data_type", "allocator_type", "tid", "pid")
_NPU_DEVICE_TYPE = 20  # c10::DeviceType::PrivateUse1, the NPU's


class MemoryUseBean:
    CONSTANT_STRUCT_SIZE = _FIXED.size

    def __init__(self, data: dict):
        self._fields = dict(zip(_FIELDS, _FIXED.unpack(data.get(Constant.CONSTANT_BYTES))))

    def is_npu(self) -> bool:
        return self.device_type == _NPU_DEVICE_TYPE

    @property
    def ptr(self) -> int:
        return self._fields["ptr"]

    @property
    def time_ns(self) -> int:
        return self._fields["time_ns"]

    @property
    def stream_ptr(self) -> int:
        return self._fields["stream_ptr"]

    @property
    def device_type(self) -> int:
        return self._fields["device_type"]

    @property
    def device_index(self) -> int:
        return self._fields["device_index"]

    @property
    def component_type(self) -> int:
        return self._fields["component_type"]

    @property
    def data_type(self) -> int:
        return self._fields["data_type"]

    @property
    def allocator_type(self) -> int:
        return self._fields["allocator_type"]

    @property
    def tid(self) -> int:
        return self._fields["tid"]

    @property
    def pid(self) -> int:
        return self._fields["pid"]

    # sizes: as recorded (bytes) ...
    @property
    def alloc_size_for_db(self) -> int:
        return self._fields["alloc_size"]

    @property
    def total_allocated_for_db(self) -> int:
        return self._fields["total_allocated"]

    @property
    def total_reserved_for_db(self) -> int:
        return self._fields["total_reserved"]

    @property
    def total_active_for_db(self) -> int:
        return self._fields["total_active"]

    # ... and as the CSV files show them
    @property
    def alloc_size(self) -> float:
        return self._fields["alloc_size"] / Constant.B_TO_KB

    @property
    def total_allocated(self) -> float:
        return self._fields["total_allocated"] / Constant.B_TO_MB

    @property
    def total_reserved(self) -> float:
        return self._fields["total_reserved"] / Constant.B_TO_MB

    @property
    def total_active(self) -> float:
        return self._fields["total_active"] / Constant.B_TO_MB
