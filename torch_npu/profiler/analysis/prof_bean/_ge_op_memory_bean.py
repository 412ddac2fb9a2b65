"""A row of msprof's operator memory of GE (one allocation of the graph engine), as a row of the
profile's operator_memory.csv: named "cann::<name>", its release time computed from its allocation
time and duration, sizes in MB (GE reports no active memory and no stream)."""

from torch_npu.profiler.analysis.prof_bean._bean_fields import entry, kb_to_mb
from torch_npu.profiler.analysis.prof_common_func._constant import convert_ns2us_str, convert_us2ns

__all__ = []


class GeOpMemoryBean:
    name = entry("Name", "", convert=lambda name: "cann::" + name)
    size = entry("Size(KB)")
    allocation_time = entry("Allocation Time(us)")
    dur = entry("Duration(us)")
    allocation_total_allocated = entry("Allocation Total Allocated(KB)", 0, convert=kb_to_mb)
    allocation_total_reserved = entry("Allocation Total Reserved(KB)", 0, convert=kb_to_mb)
    release_total_allocated = entry("Release Total Allocated(KB)", 0, convert=kb_to_mb)
    release_total_reserved = entry("Release Total Reserved(KB)", 0, convert=kb_to_mb)
    device = entry("Device", "")

    def __init__(self, data: dict):
        self._data = data

    @property
    def release_time(self) -> str:
        """Allocation time + duration, in the trace's spelling of us (exact, tab-terminated)."""
        return convert_ns2us_str(convert_us2ns(self.allocation_time) + convert_us2ns(self.dur), "\t")

    @property
    def row(self) -> list:
        # operator_memory.csv's columns; what GE does not report (active times and sizes, the stream)
        # is None
        unknown = None
        return [self.name, self.size, self.allocation_time, self.release_time, unknown, self.dur, unknown,
                self.allocation_total_allocated, self.allocation_total_reserved, unknown,
                self.release_total_allocated, self.release_total_reserved, unknown, unknown, self.device]
