"""A row of msprof's step_trace.csv: the iteration it describes."""

from torch_npu.profiler.analysis.prof_bean._bean_fields import entry
from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []


class StepTraceBean:
    step_id = entry("Iteration ID", Constant.INVALID_VALUE, convert=int,
                    doc="the iteration's id, Constant.INVALID_VALUE when the row has none")

    def __init__(self, data: dict):
        self._data = data
