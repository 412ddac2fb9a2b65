"""BaseParser: what every step of the analysis has in common.

A step (a parser or a view) is built from its name and a dict of parameters
the analysis hands to all steps; it reads the two paths every step needs
out of that dict and the rest as it likes. The task manager calls
``run(deps_data)`` with the results of the steps it depends on, and keeps
what it returns: ``(status, result)``, status being Constant.SUCCESS or
Constant.FAIL.
"""

import logging

from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger

__all__ = []

class BaseParser:
    def __init__(self, name: str, param_dict: dict):
        self._name = name
        self._param_dict = param_dict
        self._profiler_path = param_dict.get("profiler_path")
        self._output_path = param_dict.get("output_path")
        self.logger = _analysis_log()

    def run(self, deps_data: dict):
        """A step does its work here; this default does nothing and succeeds."""
        return Constant.SUCCESS, None


def _analysis_log() -> logging.Logger:
    """The analysis's log once it has been opened (ProfilerLogger.init); before that, which is when
    a step is built and tried on its own, the plain logger of the same name. Both are the one
    logging.Logger of that name, so a step logs through ``self.logger`` whenever the log is opened."""
    try:
        return ProfilerLogger.get_instance()
    except RuntimeError:
        return logging.getLogger(ProfilerLogger.LOGGER_NAME)
