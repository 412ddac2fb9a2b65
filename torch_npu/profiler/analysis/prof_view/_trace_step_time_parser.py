"""step_trace_time.csv: per step, how the device time splits into computing, communication (and
how much of it computing hides), free time, and the host-side preparation before the step."""

from collections import defaultdict

from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []

# The columns of one step's record, in the order of the CSV.
_TIME_KINDS = ("compute", "comunNotOverlp", "Overlp", "comun", "free", "stage", "bubble",
               "comunNotOverLpRec", "prepare")


def default_time() -> dict:
    """A step's times, all zero."""
    return dict.fromkeys(_TIME_KINDS, 0)


def step_time_dict() -> defaultdict:
    """{step id: its times}, a step's record appearing on first use."""
    return defaultdict(default_time)


class TraceStepTimeParser(BaseParser):
    # A step's row in step_list: [id, host start, host end, device start, device end, fwk start, fwk end]
    _HOST_START, _HOST_END, _DEVICE_START, _DEVICE_END = 1, 2, 3, 4

    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        self.step_range = []

    @staticmethod
    def is_float_num(text) -> bool:
        try:
            float(text)
        except (TypeError, ValueError):
            return False
        return True

    @classmethod
    def _step_row(cls, step, step_list):
        return next((row for row in step_list if row[0] == step), None)

    @classmethod
    def get_e2e_time(cls, step, step_list) -> float:
        """The step's span on the device (end of its last task - start of its first)."""
        row = cls._step_row(step, step_list)
        if row is None:
            return 0
        return row[cls._DEVICE_END] - row[cls._DEVICE_START]

    def get_prepare_time(self, step, step_list) -> float:
        """From the step's host start to its first device task."""
        row = self._step_row(step, step_list)
        if row is None:
            return 0
        return row[self._DEVICE_START] - row[self._HOST_START]

    def run(self, deps_data: dict):
        raise NotImplementedError(
            "TraceStepTimeParser.run is not supported on vNPU: vNPU's own exporter (torch_npu.profiler.analysis, "
            "docs/profiler.md) writes step_trace_time.csv; this step of real torch_npu's msprof-based pipeline is "
            "here for its helpers only.")
