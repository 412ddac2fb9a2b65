"""A row of msprof's roce.csv (RoCE throughput), copied as it is to the profile's output."""

from torch_npu.profiler.analysis.prof_bean._csv_row_bean import CsvRowBean

__all__ = []


class RoCEBean(CsvRowBean):
    pass
