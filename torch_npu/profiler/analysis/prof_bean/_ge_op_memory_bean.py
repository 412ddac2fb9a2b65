"""A row of msprof's operator memory of GE (one allocation of the graph engine), as a row of the
profile's operator_memory.csv: named "cann::<name>", its release time computed from its allocation
time and duration, sizes in MB (GE reports no active memory and no stream)."""

from torch_npu.profiler.analysis.prof_common_func._constant import (
    Constant, convert_ns2us_str, convert_us2ns,
)

__all__ = []

_PREFIX = "cann::"


def _mb(value_kb) -> float:
    return float(value_kb) / Constant.KB_TO_MB


class GeOpMemoryBean:
    def __init__(self, data: dict):
        self._data = data

    @property
    def row(self) -> list:
        return [self.name, self.size, self.allocation_time, self.release_time, None, self.dur, None,
                self.allocation_total_allocated, self.allocation_total_reserved, None,
                self.release_total_allocated, self.release_total_reserved, None, None, self.device]

    @property
    def name(self) -> str:
        return _PREFIX + self._data.get("Name", "")

    @property
    def size(self):
        return self._data.get("Size(KB)")

    @property
    def allocation_time(self):
        return self._data.get("Allocation Time(us)")

    @property
    def dur(self):
        return self._data.get("Duration(us)")

    @property
    def release_time(self) -> str:
        """Allocation time + duration, in the trace's spelling of us (exact, tab-terminated)."""
        end_ns = convert_us2ns(self.allocation_time) + convert_us2ns(self.dur)
        return convert_ns2us_str(end_ns, "\t")

    @property
    def allocation_total_allocated(self) -> float:
        return _mb(self._data.get("Allocation Total Allocated(KB)", 0))

    @property
    def allocation_total_reserved(self) -> float:
        return _mb(self._data.get("Allocation Total Reserved(KB)", 0))

    @property
    def release_total_allocated(self) -> float:
        return _mb(self._data.get("Release Total Allocated(KB)", 0))

    @property
    def release_total_reserved(self) -> float:
        return _mb(self._data.get("Release Total Reserved(KB)", 0))

    @property
    def device(self) -> str:
        return self._data.get("Device", "")
