"""A row of msprof's memory record of GE (the graph engine's totals over time), as a row of the
profile's memory_record.csv (sizes in MB; GE reports no active memory and no stream)."""

from torch_npu.profiler.analysis.prof_bean._bean_fields import entry, kb_to_mb
from torch_npu.profiler.analysis.prof_common_func._constant import convert_us2ns

__all__ = []


class GeMemoryRecordBean:
    component = entry("Component", "")
    timestamp = entry("Timestamp(us)", "0", doc="as the file spells it (us)")
    time_ns = entry("Timestamp(us)", "0", convert=convert_us2ns)
    total_allocated = entry("Total Allocated(KB)", 0, convert=kb_to_mb)
    total_reserved = entry("Total Reserved(KB)", 0, convert=kb_to_mb)
    device_tag = entry("Device", "")

    def __init__(self, data: dict):
        self._data = data

    @property
    def row(self) -> list:
        # memory_record.csv's columns: ..., Total Active(MB) and Stream Ptr unknown
        return [self.component, self.timestamp, self.total_allocated, self.total_reserved, None, None,
                self.device_tag]
