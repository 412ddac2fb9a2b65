"""A row of msprof's memory record of GE (the graph engine's totals over time), as a row of the
profile's memory_record.csv (sizes in MB; GE reports no active memory and no stream)."""

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, convert_us2ns

__all__ = []


class GeMemoryRecordBean:
    def __init__(self, data: dict):
        self._data = data

    @property
    def row(self) -> list:
        return [self.component, self._data.get("Timestamp(us)"), self.total_allocated, self.total_reserved,
                None, None, self.device_tag]

    @property
    def component(self) -> str:
        return self._data.get("Component", "")

    @property
    def time_ns(self) -> int:
        return convert_us2ns(self._data.get("Timestamp(us)", 0))

    @property
    def total_allocated(self) -> float:
        return float(self._data.get("Total Allocated(KB)", 0)) / Constant.KB_TO_MB

    @property
    def total_reserved(self) -> float:
        return float(self._data.get("Total Reserved(KB)", 0)) / Constant.KB_TO_MB

    @property
    def device_tag(self) -> str:
        return self._data.get("Device", "")
