"""A row of msprof's op_statistic.csv (time per operator type), copied as it is to the profile's output."""

from torch_npu.profiler.analysis.prof_bean._csv_row_bean import CsvRowBean

__all__ = []


class OpStatisticBean(CsvRowBean):
    pass
