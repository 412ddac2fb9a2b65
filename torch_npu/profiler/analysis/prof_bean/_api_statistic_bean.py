"""A row of msprof's api_statistic.csv (time per CANN API), copied as it is to the profile's output."""

from torch_npu.profiler.analysis.prof_bean._csv_row_bean import CsvRowBean

__all__ = []


class ApiStatisticBean(CsvRowBean):
    pass
