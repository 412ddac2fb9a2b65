"""A row of msprof's npu_module_mem.csv (memory each CANN component holds), its size shown in MB."""

from torch_npu.profiler.analysis.prof_bean._bean_fields import kb_to_mb
from torch_npu.profiler.analysis.prof_bean._csv_row_bean import CsvRowBean

__all__ = []

# the one column converted: name in the file -> (name shown, conversion)
_CONVERTED = {"Total Reserved(KB)": ("Total Reserved(MB)", lambda kb: str(kb_to_mb(kb)))}


class NpuModuleMemoryBean(CsvRowBean):
    @property
    def headers(self) -> list:
        return [_CONVERTED[key][0] if key in _CONVERTED else key for key in super().headers]

    @property
    def row(self) -> list:
        return [_CONVERTED[key][1](value) if key in _CONVERTED else value for key, value in self._data.items()]
