"""A row of msprof's npu_mem.csv (the device's memory over time). Only the application's own
totals ("APP") go to memory_record.csv; the row of any other component is empty."""

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []


class NpuMemoryBean:
    def __init__(self, data: dict):
        self._data = data

    @property
    def row(self) -> list:
        if self._data.get("event") != Constant.APP:
            return []
        reserved_mb = float(self._data.get("memory(KB)", 0)) / Constant.KB_TO_MB
        return [Constant.APP, self._data.get("timestamp(us)"), self._data.get("allocated(KB)"), reserved_mb,
                "", "", self._data.get("Device_id")]
