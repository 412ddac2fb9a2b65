"""A row of msprof's l2_cache.csv (L2 hit rates per task), copied as it is to the profile's output."""

from torch_npu.profiler.analysis.prof_bean._csv_row_bean import CsvRowBean

__all__ = []


class L2CacheBean(CsvRowBean):
    pass
