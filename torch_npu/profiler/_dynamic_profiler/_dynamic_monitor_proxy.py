"""PyDynamicMonitorProxySingleton: the process's handle on msmonitor's IPC
proxy to the dynolog daemon (``IPCMonitor.PyDynamicMonitorProxy``).

msmonitor is a separate package. The proxy is imported on first use; without
msmonitor ``get_proxy()`` returns None, dynolog mode does nothing (the monitor
says so once), and the import is not tried again.
"""

import threading

__all__ = []


class PyDynamicMonitorProxySingleton:
    """One per process: calling the class returns the same object each time.

    ``_proxy`` is msmonitor's proxy once imported; ``_load_success`` turns
    False after a failed import, which makes every later ``get_proxy()`` a
    cheap None (the monitor asks at each poll).
    """

    _instance = None
    _creation = threading.Lock()

    def __new__(cls):
        # Ranks' threads (the poller, the training loop) may ask at once; the lock keeps it one object.
        with cls._creation:
            if cls._instance is None:
                cls._instance = cls._unloaded()
            return cls._instance

    @classmethod
    def _unloaded(cls):
        handle = object.__new__(cls)
        handle._proxy, handle._load_success = None, True
        return handle

    def get_proxy(self):
        """msmonitor's proxy, or None without msmonitor."""
        if self._proxy is None and self._load_success:
            self._load_proxy()
        return self._proxy

    def _load_proxy(self):
        try:
            from IPCMonitor import PyDynamicMonitorProxy
            self._proxy = PyDynamicMonitorProxy()
        except Exception:  # not installed, or its proxy would not start: remembered, never retried
            self._load_success = False
