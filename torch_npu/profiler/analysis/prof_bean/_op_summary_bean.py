"""A row of msprof's op_summary_*.csv (one device task). The class attribute ``headers`` picks the
columns ``row`` gives, for all rows at once (kernel_details.csv's); while it is empty, ``row`` is the
whole row."""

from torch_npu.profiler.analysis.prof_bean._bean_fields import entry
from torch_npu.profiler.analysis.prof_common_func._csv_headers import CsvHeaders

__all__ = []


class OpSummaryBean:
    headers = []
    ts = entry(CsvHeaders.TASK_START_TIME, "0", doc="the task's start, as the file spells it (us)")

    def __init__(self, data: dict):
        self._data = data

    @property
    def all_headers(self):
        return self._data.keys()

    @property
    def row(self) -> list:
        columns = self.headers or self._data.keys()
        return [self._data.get(column, "") for column in columns]
