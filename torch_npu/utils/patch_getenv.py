"""Logs each environment variable the process reads, once, on the
``torch_npu.env`` logger (``TORCH_NPU_LOGS=env`` or ``TORCH_LOGS=env`` shows it).

Importing this module (torch_npu does, as real torch_npu does) replaces
``os.getenv`` and ``os.environ.get`` with ``_patched_getenv`` and
``_patched_environ_get`` (the names real torch_npu's tests look for), which
report what they return. Only variables that are set to something non-empty
are reported: a default handed back for a missing variable says nothing about
the environment.
"""

import logging
import os

__all__ = []


class _EnvReadLog:
    """Logs the environment variables the process reads, each at its first read."""

    def __init__(self, logger):
        self._logger = logger
        self._seen = set()

    def note(self, name, value):
        if name not in self._seen and isinstance(value, str) and value:
            self._seen.add(name)
            self._logger.info("get env %s = %s", name, value)

    def wrap(self, lookup):
        """``lookup``, a ``(key, default=None)`` read of the environment, noting what it finds set."""

        def noting_lookup(key, default=None):
            found = lookup(key, default)
            if key in os.environ:
                self.note(key, found)
            return found

        noting_lookup.__name__, noting_lookup.__doc__ = lookup.__name__, lookup.__doc__
        noting_lookup.env_read_log = self
        return noting_lookup


# On a reload of this module the lookups are already wrapped: wrapping them
# again would note every read through two layers.
if hasattr(os.getenv, "env_read_log"):
    _patched_getenv, _patched_environ_get = os.getenv, os.environ.get
else:
    _reads = _EnvReadLog(logging.getLogger("torch_npu.env"))
    _patched_getenv, _patched_environ_get = _reads.wrap(os.getenv), _reads.wrap(os.environ.get)
    os.getenv, os.environ.get = _patched_getenv, _patched_environ_get
