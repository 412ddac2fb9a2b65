"""What this process's virtual NPUs are doing, published for ``npu-smi``.

A real npu-smi asks the driver about every process on the card. vNPU's
devices live inside each process, so each process that used one publishes a
small JSON file once a second under ``status_dir()``: its pid, its command,
and per device used the bytes of device memory it holds and the share of the
last second its streams were busy (AI Core %). ``npu-smi``
(torch_npu/tools/npu_smi.py) reads the files of live processes. A process
that never used a device writes nothing.
"""
import atexit
import json
import os
import sys
import threading
import time

from torch_npu import _C

INTERVAL_S = 1.0


def status_dir() -> str:
    # npu-smi owns the folder it reads (its file imports only the standard
    # library, so it runs without torch); imported here when first needed.
    from torch_npu.tools.npu_smi import status_dir as smi_status_dir
    return smi_status_dir()


class _Publisher:
    def __init__(self):
        self._path = None  # set at the first write: most processes never use a device
        self._busy = {}  # device -> (time_ns, busy_ns) at the previous write
        self._lock = threading.Lock()  # publish vs remove (at exit, the thread still runs)
        self._written = False
        self._closed = False

    def snapshot(self) -> dict:
        devices = {}
        now = time.monotonic_ns()
        for d in range(_C._device_count()):
            if not _C._device_was_used(d):
                continue
            free, total = _C._mem_get_info(d)
            busy = _C._device_busy_ns(d)
            then, busy_then = self._busy.get(d, (now, busy))
            window = now - then
            self._busy[d] = (now, busy)
            percent = 0 if window <= 0 else max(0, min(100, round(100 * (busy - busy_then) / window)))
            devices[str(d)] = {"memory_bytes": total - free, "aicore_percent": percent}
        return {"pid": os.getpid(), "name": os.path.basename(sys.argv[0] or sys.executable) or "python",
                "devices": devices}

    def publish(self):
        status = self.snapshot()
        if not status["devices"]:
            return
        with self._lock:
            if self._closed:
                return
            if self._path is None:
                self._path = os.path.join(status_dir(), f"{os.getpid()}.json")
            os.makedirs(os.path.dirname(self._path), exist_ok=True)
            tmp = self._path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(status, f)
            os.replace(tmp, self._path)
            self._written = True

    def remove(self):
        """Stops publishing for good and removes the file."""
        with self._lock:
            self._closed = True
            if self._written:
                try:
                    os.remove(self._path)
                except OSError:
                    pass


_publisher = None


def _run(publisher):
    while not publisher._closed:
        time.sleep(INTERVAL_S)
        try:
            publisher.publish()
        except Exception:  # noqa: BLE001 (a status file must never break training)
            pass


def start():
    """Starts publishing (idempotent; again in a forked child)."""
    global _publisher
    if _publisher is not None:
        return
    _publisher = _Publisher()
    atexit.register(_publisher.remove)
    threading.Thread(target=_run, args=(_publisher,), name="vnpu-smi-status", daemon=True).start()


def stop():
    """This process publishes nothing (npu-smi itself)."""
    if _publisher is not None:
        _publisher.remove()


def _after_fork_in_child():
    global _publisher
    _publisher = None
    start()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
