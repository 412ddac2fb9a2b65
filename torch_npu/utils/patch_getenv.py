"""Logs each environment variable the process reads, once, on the
``torch_npu.env`` logger (``TORCH_NPU_LOGS=env`` or ``TORCH_LOGS=env`` shows it).

Importing this module (torch_npu does, as real torch_npu does) replaces
``os.getenv`` and ``os.environ.get`` with versions that report what they
return. Only variables that are set to something non-empty are reported: a
default handed back for a missing variable says nothing about the
environment.
"""

import logging
import os

__all__ = []


class _EnvReadReport:
    """The variables reported so far, and the lookups that report to it."""

    def __init__(self, logger):
        self._logger = logger
        self._reported = set()

    def _record(self, name, value):
        if name in self._reported or not isinstance(value, str) or not value:
            return
        self._reported.add(name)
        self._logger.info("get env %s = %s", name, value)

    def reporting(self, read):
        """``read`` (a ``(key, default=None)`` lookup), reporting variables that are set."""

        def read_and_report(key, default=None):
            value = read(key, default)
            if key in os.environ:
                self._record(key, value)
            return value

        read_and_report.__name__ = read.__name__
        read_and_report.__doc__ = read.__doc__
        read_and_report.env_report = self
        return read_and_report


# Wrapping twice (a reload of this module) would report through two layers.
if not hasattr(os.getenv, "env_report"):
    _report = _EnvReadReport(logging.getLogger("torch_npu.env"))
    os.getenv = _report.reporting(os.getenv)
    os.environ.get = _report.reporting(os.environ.get)
