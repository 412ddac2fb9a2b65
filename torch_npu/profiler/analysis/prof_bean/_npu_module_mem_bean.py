"""A row of msprof's npu_module_mem.csv (memory each CANN component holds), with its size in MB."""

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_SIZE_KB = "Total Reserved(KB)"
_SIZE_MB = "Total Reserved(MB)"


class NpuModuleMemoryBean:
    def __init__(self, data: dict):
        self._data = data

    @property
    def headers(self) -> list:
        return [_SIZE_MB if key == _SIZE_KB else key for key in self._data]

    @property
    def row(self) -> list:
        return [str(float(value) / Constant.KB_TO_MB) if key == _SIZE_KB else value
                for key, value in self._data.items()]
