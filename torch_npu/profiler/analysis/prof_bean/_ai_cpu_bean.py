"""A row of msprof's aicpu.csv (AI CPU operators), copied as it is to the profile's output."""

from torch_npu.profiler.analysis.prof_bean._csv_row_bean import CsvRowBean

__all__ = []


class AiCpuBean(CsvRowBean):
    pass
