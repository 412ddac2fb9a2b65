"""A row of msprof's npu_mem.csv (the device's memory over time). Only the application's own
totals ("APP") go to memory_record.csv; the row of any other component is empty."""

from torch_npu.profiler.analysis.prof_bean._bean_fields import entry, kb_to_mb
from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []


class NpuMemoryBean:
    component = entry("event")
    timestamp = entry("timestamp(us)")
    allocated = entry("allocated(KB)")
    reserved_mb = entry("memory(KB)", 0, convert=kb_to_mb)
    device_id = entry("Device_id")

    def __init__(self, data: dict):
        self._data = data

    @property
    def row(self) -> list:
        if self.component != Constant.APP:
            return []
        return [self.component, self.timestamp, self.allocated, self.reserved_mb, "", "", self.device_id]
