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

from torch_npu.profiler.analysis.prof_bean._bean_fields import PackedRecord, entry
from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_NPU_DEVICE_TYPE = 20  # c10::DeviceType::PrivateUse1, the NPU's


def _in_kb(size):
    return size / Constant.B_TO_KB


def _in_mb(size):
    return size / Constant.B_TO_MB


class MemoryUseBean(PackedRecord):
    LAYOUT = "<7q2b3B2Q"
    FIELDS = ("ptr", "time_ns", "alloc_size", "total_allocated", "total_reserved", "total_active",
              "stream_ptr", "device_type", "device_index", "component_type", "data_type", "allocator_type",
              "tid", "pid")

    ptr = entry("ptr")
    time_ns = entry("time_ns")
    stream_ptr = entry("stream_ptr")
    device_type = entry("device_type")
    device_index = entry("device_index")
    component_type = entry("component_type")
    data_type = entry("data_type")
    allocator_type = entry("allocator_type")
    tid = entry("tid")
    pid = entry("pid")

    # sizes as recorded (bytes) ...
    alloc_size_for_db = entry("alloc_size")
    total_allocated_for_db = entry("total_allocated")
    total_reserved_for_db = entry("total_reserved")
    total_active_for_db = entry("total_active")
    # ... and as the CSV files show them
    alloc_size = entry("alloc_size", convert=_in_kb)
    total_allocated = entry("total_allocated", convert=_in_mb)
    total_reserved = entry("total_reserved", convert=_in_mb)
    total_active = entry("total_active", convert=_in_mb)

    def __init__(self, data: dict):
        self._unpack_tagged(data)

    def is_npu(self) -> bool:
        return self.device_type == _NPU_DEVICE_TYPE
