"""Logs each environment variable the process reads, once, on the
``torch_npu.env`` logger (``TORCH_NPU_LOGS=env`` or ``TORCH_LOGS=env`` shows it):
``os.getenv`` and ``os.environ.get`` are wrapped when torch_npu is imported, as
real torch_npu does. A variable that is unset or empty is not logged."""

import logging
import os

__all__ = []

_env_logger = logging.getLogger("torch_npu.env")
_logged = set()
_original_getenv = os.getenv
_original_environ_get = os.environ.get


def _note(key, value):
    if key in _logged or not isinstance(value, str) or value == "":
        return
    _logged.add(key)
    _env_logger.info("get env %s = %s", key, value)


def _getenv(key, default=None):
    value = _original_getenv(key, default)
    if key in os.environ:
        _note(key, value)
    return value


def _environ_get(key, default=None):
    value = _original_environ_get(key, default)
    if key in os.environ:
        _note(key, value)
    return value


if getattr(os.getenv, "__module__", None) != __name__:  # once, even if reloaded
    os.getenv = _getenv
    os.environ.get = _environ_get
