"""DynamicProfilerMonitor: what one rank does in Note [One config poller per
job] (__init__.py).

Two roles, decided by the shared segment:
- every rank *reads*: at each step, ``shm_to_prof_conf_context()`` looks at
  the segment's change stamp and, when it moved, returns the new config
  (once), or None;
- the rank that created the segment also *polls*: a thread, ``DynMonitorProc``,
  looks at profiler_config.json (in dynolog mode: asks dynolog through
  msmonitor's proxy) and publishes what changed into the segment.

Threads: the poller touches only the segment, its log and the proxy (under
``_PROXY_LOCK``); the rest runs on the training thread. The poller keeps no
reference to its monitor, so a monitor that is garbage collected, or still
alive at interpreter exit, stops the poller and lets go of the segment
through a finalizer.
"""

import json
import os
import struct
import threading
import time
import weakref

import torch

from torch_npu.profiler.analysis.prof_common_func._constant import print_warn_msg

from ._dynamic_monitor_proxy import PyDynamicMonitorProxySingleton
from ._dynamic_profiler_config_context import ConfigContext
from ._dynamic_profiler_monitor_shm import DynamicProfilerShareMemory
from ._dynamic_profiler_utils import DynamicProfilerUtils

__all__ = []

_INFO = DynamicProfilerUtils.LoggerLevelEnum.INFO
_WARNING = DynamicProfilerUtils.LoggerLevelEnum.WARNING
_ERROR = DynamicProfilerUtils.LoggerLevelEnum.ERROR

_THREAD_NAME = "DynMonitorProc"  # as real torch_npu's poller process shows in `ps -eT`
_STAMP_FORMAT = struct.Struct("<I")  # the segment's first field: how many configs were published
_STOP_WAIT_S = 5.0  # how long stopping a poller waits for it to notice
_PROXY_LOCK = threading.Lock()  # msmonitor's proxy is used by the poller and the training thread


def _log(message, level=_INFO):
    DynamicProfilerUtils.out_log(message, level)


def _poller_log(message, level=_INFO):
    DynamicProfilerUtils.out_log(message, level, is_monitor_process=True)


def _status_fields(status):
    """What a rank reports to dynolog, with no step known yet."""
    fields = {DynamicProfilerUtils.PROFILER_STATUS: str(status.value)}
    for key in (DynamicProfilerUtils.CURRENT_STEP, DynamicProfilerUtils.START_STEP, DynamicProfilerUtils.STOP_STEP):
        fields[key] = "-1"
    return fields


class _PollerControl:
    """Shared by a monitor and its poller: whether the poller goes on
    (``value``: real torch_npu's tests set it, there a multiprocessing.Value)
    and how long it waits between two polls. Clearing ``value`` wakes a
    waiting poller at once, so that a monitor stops without a poll's delay."""

    def __init__(self, interval):
        self.interval = interval
        self._stopped = threading.Event()

    @property
    def value(self):
        return not self._stopped.is_set()

    @value.setter
    def value(self, keep_running):
        if keep_running:
            self._stopped.clear()
        else:
            self._stopped.set()

    def wait(self):
        self._stopped.wait(self.interval)


def _shut_down(control, poller_thread, shm_obj):
    """The finalizer: runs once, from clean_resource, garbage collection or exit."""
    control.value = False
    if poller_thread is not None and poller_thread is not threading.current_thread():
        poller_thread.join(_STOP_WAIT_S)
    shm_obj.clean_resource()


class DynamicProfilerMonitor:
    def __init__(self):
        self._rank_id = DynamicProfilerUtils.get_rank_id()
        self._is_dyno = DynamicProfilerUtils.is_dyno_model()
        folder = DynamicProfilerUtils.CFG_CONFIG_PATH
        self._config_path = self._watched_file(folder)
        self._shared_loop_flag = _PollerControl(DynamicProfilerUtils.POLL_INTERVAL)
        self._status = _status_fields(DynamicProfilerUtils.ProfilerStatus.IDLE)
        self._last_report_time = 0.0
        self._shm_obj = DynamicProfilerShareMemory(folder, self._config_path, self._rank_id)
        # a config published before this rank came is not for it
        self._seen_stamp = self._published_stamp() if self._shm_obj.shm is not None else 0
        self._process = self._start_poller() if self._shm_obj.is_create_process else None
        if self._process is None:
            _log(f"Rank {self._rank_id} no need to create process.")
        self._finalizer = weakref.finalize(self, _shut_down, self._shared_loop_flag, self._process, self._shm_obj)

    def _watched_file(self, folder):
        """profiler_config.json in ``folder``; None in dynolog mode, which has no file."""
        if self._is_dyno:
            if PyDynamicMonitorProxySingleton().get_proxy() is None:
                print_warn_msg("MSMONITOR_USE_DAEMON=1 needs msmonitor's IPCMonitor module, which is not installed: "
                               "dynamic profiling through dynolog stays off.")
            return None
        if folder is None:
            raise RuntimeError("The dynamic profiler has no config folder: call dynamic_profile.init(path).")
        return os.path.join(folder, "profiler_config.json")

    def _start_poller(self):
        if self._is_dyno:
            poller = _DynologPoller(self._shared_loop_flag, self._shm_obj, self._rank_id)
        else:
            poller = _ConfigFilePoller(self._shared_loop_flag, self._shm_obj)
        thread = threading.Thread(target=poller.run, name=_THREAD_NAME, daemon=True)
        thread.start()
        _log(f"Dynamic monitor process has been created by rank {self._rank_id}.")
        return thread

    def clean_resource(self):
        """Stops this rank's poller, if it has one, and lets go of the segment."""
        self._shared_loop_flag.value = False
        if self._process is not None:
            self._process.join(_STOP_WAIT_S)
        self._finalizer()

    # -- reading what the poller published -----------------------------------------------------------------------

    def _published_stamp(self):
        return _STAMP_FORMAT.unpack(self._shm_obj.read_bytes(read_time=True))[0]

    def shm_to_prof_conf_context(self):
        """The config published since the last call, when it applies to this
        rank; else None. Never raises: it runs at every training step."""
        if self._shm_obj is None:
            _log(f"Rank {self._rank_id} shared memory is None !", _ERROR)
            return None
        if self._shm_obj.shm is None:  # no segment: this process does not take part
            return None
        try:
            moved = self._published_stamp() != self._seen_stamp
        except Exception as ex:
            _log(f"Share memory read error: {ex}", _WARNING)
            return None
        if not moved:
            return None
        config = self._take_published()
        if config is None:
            return None
        if isinstance(config, dict) and config.get("error"):
            print_warn_msg(f"Dynamic profiler config is not valid: {config['error']}. The profiler stays off.")
        ctx = ConfigContext(config)
        if not ctx.valid():
            return None
        if ctx.is_dyno_monitor():  # a request for msmonitor's npu monitor, not for the profiler
            self._call_dyno_monitor(config)
            return None
        return ctx

    def _take_published(self):
        """The published config, parsed; None (logged) when it cannot be."""
        try:
            self._seen_stamp, raw = self._shm_obj.read_published()
            return ConfigContext.bytes_to_profiler_cfg_json(raw)
        except Exception as ex:
            _log(f"Share memory bytes to json error: {ex}", _ERROR)
            return None

    def _call_dyno_monitor(self, json_data: dict):
        """Passes an npu-monitor request (NPU_MONITOR_START) on to msmonitor, as strings."""
        proxy = PyDynamicMonitorProxySingleton().get_proxy()
        if not proxy:
            return
        request = {key: str(value) for key, value in json_data.items()}
        with _PROXY_LOCK:
            proxy.enable_dyno_npu_monitor(request)

    # -- what the training thread tells the monitor --------------------------------------------------------------

    def modify_step_time(self, poll_interval_time: int):
        self._shared_loop_flag.interval = poll_interval_time
        _log(f"Dynamic profiling monitor process poll interval time change to {poll_interval_time}s")

    def update_profiler_status(self, status: DynamicProfilerUtils.ProfilerStatus):
        self._status[DynamicProfilerUtils.PROFILER_STATUS] = str(status.value)

    def update_step_info(self, step: int, flag: str):
        if flag in self._status:
            self._status[flag] = str(step)

    def report_profiler_status(self):
        """Sends the status to dynolog through msmonitor's proxy, if there is
        one: from the polling rank only, and at most once a REPORT_INTERVAL
        (this runs at every step)."""
        if not self._shm_obj.is_create_process:
            return
        now = time.time()
        if now - self._last_report_time < DynamicProfilerUtils.REPORT_INTERVAL:
            return
        proxy = PyDynamicMonitorProxySingleton().get_proxy()
        if not proxy or not hasattr(proxy, "update_profiler_status"):
            return
        with _PROXY_LOCK:
            proxy.update_profiler_status(self._status)
        self._last_report_time = now


# -- the pollers -------------------------------------------------------------------------------------------------

def _share(shm_obj, config: dict):
    """Publishes ``config``. One too big for the segment is replaced by an
    invalid config that says so: the ranks then tell the user why nothing
    happens."""
    try:
        shm_obj.publish(ConfigContext.profiler_cfg_json_to_bytes(config))
        return
    except ValueError as ex:
        _poller_log(f"Load json failed, {ex}", _WARNING)
        replacement = {"is_valid": False, "error": str(ex)}
    except Exception as ex:
        _poller_log(f"Dynamic profiler cfg bytes write failed, {ex} has occur!", _ERROR)
        return
    shm_obj.publish(ConfigContext.profiler_cfg_json_to_bytes(replacement))


class _Poller:
    """A poller thread's life: prepare, then poll every ``control.interval``
    seconds until ``control.value`` is cleared, then finish. A poll that
    raises is logged and the next one goes on: a poller that died would end
    dynamic profiling without a word."""

    WAIT_FIRST = False  # whether the first poll waits an interval
    POLL_FAILED = ""  # how the log names a failed poll

    def __init__(self, control, shm_obj):
        self._control = control
        self._shm_obj = shm_obj

    def run(self):
        torch.multiprocessing._set_thread_name(_THREAD_NAME)
        if not self._prepare():
            return
        try:
            if self.WAIT_FIRST:
                self._control.wait()
            while self._control.value:
                try:
                    self._poll()
                except Exception as ex:
                    self._log(f"{self.POLL_FAILED}, {ex} has occur!", _ERROR)
                self._control.wait()
        finally:
            self._finish()

    def _prepare(self) -> bool:
        return True

    def _poll(self):
        raise NotImplementedError

    def _finish(self):
        pass

    def _log(self, message, level=_INFO):
        _poller_log(message, level)


class _ConfigFilePoller(_Poller):
    """Publishes each edit of profiler_config.json. An edit is told by the
    file's mtime, size and inode (size and inode catch an edit within the
    mtime's clock tick, and a file replaced by a rename). A file that does not
    parse is read once more at the next poll before it is published as
    invalid: the poll may have come between an editor's truncate and write."""

    POLL_FAILED = "Dynamic profiler poll failed"

    def __init__(self, control, shm_obj):
        super().__init__(control, shm_obj)
        self._path = shm_obj.config_path
        try:
            self._published_version = self._version()  # only edits made from now on count
        except OSError:  # not readable now: the polls report it
            self._published_version = None
        self._unparsable_version = None
        self._reported_missing = False

    def _version(self):
        try:
            info = os.stat(self._path)
        except FileNotFoundError:
            return None
        return info.st_mtime_ns, info.st_size, info.st_ino

    def _prepare(self):
        try:
            DynamicProfilerUtils.init_logger(is_monitor_process=True, log_path=os.path.dirname(self._path))
        except Exception:  # without its log file the poller still does its work
            pass
        return True

    def _finish(self):
        self._log("Dynamic profiler process done")

    def _poll(self):
        version = self._version()
        if version is None:
            if not self._reported_missing:
                self._log("Dynamic profiler cfg json not exists", _ERROR)
                self._reported_missing = True
            return
        self._reported_missing = False
        if version == self._published_version:
            return
        try:
            config = self._load()
        except (OSError, ValueError) as ex:
            if self._unparsable_version != version:
                self._unparsable_version = version  # maybe half written: once more at the next poll
                return
            self._log(f"Dynamic profiler process load json failed, {ex} has occur!", _ERROR)
            config = {"is_valid": False, "error": f"{self._path}: {ex}"}
        else:
            config["is_valid"] = True
            self._log("Dynamic profiler process load json success")
        self._published_version = version
        _share(self._shm_obj, config)

    def _load(self) -> dict:
        if not os.path.isfile(self._path):
            raise ValueError("it is not a regular file")
        limit = DynamicProfilerUtils.CFG_BUFFER_SIZE
        size = os.path.getsize(self._path)
        if size > limit:
            raise ValueError(f"it has {size} bytes, over the {limit} allowed")
        with open(self._path, encoding="utf-8") as f:
            config = json.load(f)
        if not isinstance(config, dict):
            raise ValueError("the config must be a JSON object")
        return config


class _DynologPoller(_Poller):
    """Publishes each config dynolog sends, asked through msmonitor's proxy.
    dynolog is first asked an interval after this rank registered with it.
    When the poller ends, dynolog is told this job's profiler is gone."""

    WAIT_FIRST = True
    POLL_FAILED = "Dynolog poll failed"

    def __init__(self, control, shm_obj, rank_id):
        super().__init__(control, shm_obj)
        self._rank_id = rank_id
        self._proxy = None

    def _log(self, message, level=_INFO):
        _log(message, level)

    def _prepare(self):
        self._proxy = PyDynamicMonitorProxySingleton().get_proxy()
        if not self._proxy:
            return False
        with _PROXY_LOCK:
            registered = self._proxy.init_dyno(self._rank_id)
        if not registered:
            self._log("Init dynolog failed !", _WARNING)
            return False
        self._log("Init dynolog success !")
        return True

    def _poll(self):
        with _PROXY_LOCK:
            reply = self._proxy.poll_dyno()
        config = DynamicProfilerUtils.dyno_str_to_json(reply)
        if not config:
            return
        config["is_valid"] = True
        self._log("Dynolog profiler process load json success")
        _share(self._shm_obj, config)

    def _finish(self):
        if hasattr(self._proxy, "update_profiler_status"):
            gone = _status_fields(DynamicProfilerUtils.ProfilerStatus.UNINITIALIZED)
            with _PROXY_LOCK:
                self._proxy.update_profiler_status(gone)
        self._log("Dynolog profiler process done")
