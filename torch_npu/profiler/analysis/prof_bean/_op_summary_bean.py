"""A row of msprof's op_summary_*.csv (one device task). ``OpSummaryBean.headers`` picks the columns
``row`` gives, for all rows at once; when it is empty, ``row`` is the whole row."""

from torch_npu.profiler.analysis.prof_common_func._csv_headers import CsvHeaders

__all__ = []


class OpSummaryBean:
    headers = []  # the columns kept in kernel_details.csv, set by whoever writes it

    def __init__(self, data: dict):
        self._data = data

    @property
    def row(self) -> list:
        if not self.headers:
            return list(self._data.values())
        return [self._data.get(column, "") for column in self.headers]

    @property
    def ts(self) -> str:
        """The task's start, as the file spells it (us)."""
        return self._data.get(CsvHeaders.TASK_START_TIME, "0")

    @property
    def all_headers(self):
        return self._data.keys()
