"""The common shape of one analysis step: built from a name and a dict of parameters, ``run(deps)``
returns ``(status, result)`` where status is Constant.SUCCESS or Constant.FAIL."""

import logging

from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger

__all__ = []


def step_logger():
    """The analysis's log when it has been opened, else a plain module logger (so steps can be built
    and tried without a profile)."""
    try:
        return ProfilerLogger.get_instance()
    except Exception:  # the log was never opened
        return logging.getLogger(ProfilerLogger.LOGGER_NAME)


class BaseParser:
    """Keeps the step's name and parameters; profiler_path and output_path are read out of them."""

    def __init__(self, name: str, param_dict: dict):
        self._name, self._param_dict = name, param_dict
        self._profiler_path = param_dict.get("profiler_path")
        self._output_path = param_dict.get("output_path")
        self.logger = step_logger()

    def run(self, deps_data: dict):
        """Subclasses do their work here; the default does nothing and succeeds."""
        return Constant.SUCCESS, None
