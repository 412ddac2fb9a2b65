"""A row of msprof's step_trace.csv: the iteration it describes."""

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []


class StepTraceBean:
    def __init__(self, data: dict):
        self._data = data

    @property
    def step_id(self) -> int:
        """The iteration's id, Constant.INVALID_VALUE when the row has none."""
        return int(self._data.get("Iteration ID", Constant.INVALID_VALUE))
