"""PyDynamicMonitorProxySingleton: msmonitor's IPC proxy to the dynolog
daemon (``IPCMonitor.PyDynamicMonitorProxy``), loaded on first use. msmonitor
is a separate package; without it ``get_proxy()`` returns None and dynolog
mode does nothing (the monitor says so once)."""

import threading

__all__ = []


class PyDynamicMonitorProxySingleton:
    _instance = None
    _lock = threading.Lock()

    def __new__(cls):
        with cls._lock:
            if cls._instance is None:
                instance = super().__new__(cls)
                instance._proxy = None
                instance._load_success = True
                cls._instance = instance
        return cls._instance

    def _load_proxy(self):
        if self._proxy or not self._load_success:
            return
        try:
            from IPCMonitor import PyDynamicMonitorProxy
            self._proxy = PyDynamicMonitorProxy()
        except Exception:
            self._load_success = False  # not installed: not tried again

    def get_proxy(self):
        self._load_proxy()
        return self._proxy
