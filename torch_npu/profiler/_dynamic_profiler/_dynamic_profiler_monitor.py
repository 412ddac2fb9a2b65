"""DynamicProfilerMonitor: a rank's side of Note [One config poller per job]
(__init__.py). The rank that created the job's segment starts the poller
thread ``DynMonitorProc``: it reads profiler_config.json every
``POLL_INTERVAL`` seconds (in dynolog mode: asks dynolog) and publishes each
change in the segment. Every rank's ``shm_to_prof_conf_context()``, called
at each step, returns the new config once, or None.

Threads: the poller writes only the segment and its own log; everything else
here runs on the training thread. The poller holds no reference to its
monitor, so a monitor that is dropped (or still alive at interpreter exit)
stops its poller and releases the segment through its finalizer.
"""

import os
import struct
import threading
import time
import types
import weakref

import torch

from torch_npu.profiler.analysis.prof_common_func._constant import print_warn_msg

from ._dynamic_monitor_proxy import PyDynamicMonitorProxySingleton
from ._dynamic_profiler_config_context import ConfigContext
from ._dynamic_profiler_monitor_shm import DynamicProfilerShareMemory
from ._dynamic_profiler_utils import DynamicProfilerUtils

__all__ = []

_STAMP = struct.Struct("<I")
_JOIN_SECONDS = 5.0  # how long releasing a monitor waits for its poller to notice
_PROXY_LOCK = threading.Lock()  # the poller and the training thread share msmonitor's proxy


class _LoopFlag:
    """Whether the poller goes on (``value``, as real torch_npu's
    multiprocessing.Value); setting it False wakes the poller at once."""

    def __init__(self):
        self._stopped = threading.Event()

    @property
    def value(self):
        return not self._stopped.is_set()

    @value.setter
    def value(self, running):
        if running:
            self._stopped.clear()
        else:
            self._stopped.set()

    def sleep(self, seconds):
        """Waits ``seconds``, or less if stopped meanwhile."""
        self._stopped.wait(seconds)


def _stop_poller(loop_flag, poller, shm_obj):
    loop_flag.value = False
    if poller is not None and poller is not threading.current_thread():
        poller.join(_JOIN_SECONDS)
    shm_obj.clean_resource()


def _name_this_thread():
    torch.multiprocessing._set_thread_name("DynMonitorProc")  # what `ps -eT` shows, as in real torch_npu


def _monitor_log(message, level=DynamicProfilerUtils.LoggerLevelEnum.INFO):
    DynamicProfilerUtils.out_log(message, level, is_monitor_process=True)


class DynamicProfilerMonitor:
    def __init__(self):
        self._path = DynamicProfilerUtils.CFG_CONFIG_PATH
        self._rank_id = DynamicProfilerUtils.get_rank_id()
        self._buffer_size = DynamicProfilerUtils.CFG_BUFFER_SIZE
        self.prof_cfg_context = None
        self._shared_loop_flag = _LoopFlag()
        self._step_time = types.SimpleNamespace(value=DynamicProfilerUtils.POLL_INTERVAL)  # the poll interval, s
        self._profiler_status = {
            DynamicProfilerUtils.PROFILER_STATUS: str(DynamicProfilerUtils.ProfilerStatus.IDLE.value),
            DynamicProfilerUtils.CURRENT_STEP: "-1",
            DynamicProfilerUtils.START_STEP: "-1",
            DynamicProfilerUtils.STOP_STEP: "-1",
        }
        self._last_report_time = 0.0
        self._is_dyno = DynamicProfilerUtils.is_dyno_model()
        self._config_path = None
        if not self._is_dyno:
            if self._path is None:
                raise RuntimeError("The dynamic profiler has no config folder: call dynamic_profile.init(path).")
            self._config_path = os.path.join(self._path, "profiler_config.json")
        elif PyDynamicMonitorProxySingleton().get_proxy() is None:
            print_warn_msg("MSMONITOR_USE_DAEMON=1 needs msmonitor's IPCMonitor module, which is not installed: "
                           "dynamic profiling through dynolog stays off.")
        self._shm_obj = DynamicProfilerShareMemory(self._path, self._config_path, self._rank_id)
        # configs published before this rank arrived are not for it
        self._seen_stamp = self._read_stamp() if self._shm_obj.shm is not None else 0
        self._process = None  # the poller (real torch_npu's name: there it is a process)
        self._create_process()
        self._finalizer = weakref.finalize(self, _stop_poller, self._shared_loop_flag, self._process, self._shm_obj)

    def _read_stamp(self):
        return _STAMP.unpack(self._shm_obj.read_bytes(read_time=True))[0]

    def shm_to_prof_conf_context(self):
        """The config published since the last call, if it is valid for this
        rank; else None. Never raises."""
        if self._shm_obj is None:
            DynamicProfilerUtils.out_log(f"Rank {self._rank_id} shared memory is None !",
                                         DynamicProfilerUtils.LoggerLevelEnum.ERROR)
            return None
        if self._shm_obj.shm is None:
            return None  # a launcher's monitor
        try:
            stamp = self._read_stamp()
        except Exception as ex:
            DynamicProfilerUtils.out_log(f"Share memory read error: {ex}",
                                         DynamicProfilerUtils.LoggerLevelEnum.WARNING)
            return None
        if stamp == self._seen_stamp:
            return None
        try:
            stamp, config_bytes = self._shm_obj.read_published()
            self._seen_stamp = stamp
            json_data = ConfigContext.bytes_to_profiler_cfg_json(config_bytes)
        except Exception as ex:
            DynamicProfilerUtils.out_log(f"Share memory bytes to json error: {ex}",
                                         DynamicProfilerUtils.LoggerLevelEnum.ERROR)
            return None
        if isinstance(json_data, dict) and json_data.get("error"):
            print_warn_msg(f"Dynamic profiler config is not valid: {json_data['error']}. The profiler stays off.")
        self.prof_cfg_context = ConfigContext(json_data)
        if not self.prof_cfg_context.valid():
            return None
        if self.prof_cfg_context.is_dyno_monitor():
            self._call_dyno_monitor(json_data)
            return None
        return self.prof_cfg_context

    def clean_resource(self):
        """Stops the poller (if this rank runs it) and releases the segment."""
        self._shared_loop_flag.value = False
        if self._process is not None:
            self._process.join(_JOIN_SECONDS)
        self._finalizer()

    def modify_step_time(self, poll_interval_time: int):
        self._step_time.value = poll_interval_time
        DynamicProfilerUtils.out_log(
            f"Dynamic profiling monitor process poll interval time change to {poll_interval_time}s",
            DynamicProfilerUtils.LoggerLevelEnum.INFO)

    def update_profiler_status(self, status: DynamicProfilerUtils.ProfilerStatus):
        self._profiler_status[DynamicProfilerUtils.PROFILER_STATUS] = str(status.value)

    def update_step_info(self, step: int, flag: str):
        if flag in self._profiler_status:
            self._profiler_status[flag] = str(step)

    def report_profiler_status(self):
        """Tells dynolog (through msmonitor's proxy, if installed) this job's
        profiler status, at most once a REPORT_INTERVAL; only the poller's rank."""
        if not self._shm_obj.is_create_process:
            return
        now = time.time()
        if now - self._last_report_time < DynamicProfilerUtils.REPORT_INTERVAL:
            return
        proxy = PyDynamicMonitorProxySingleton().get_proxy()
        if not proxy or not hasattr(proxy, "update_profiler_status"):
            return
        with _PROXY_LOCK:
            proxy.update_profiler_status(self._profiler_status)
        self._last_report_time = now

    def _create_process(self):
        """The rank that created the segment polls for the job."""
        if not self._shm_obj.is_create_process:
            DynamicProfilerUtils.out_log(f"Rank {self._rank_id} no need to create process.",
                                         DynamicProfilerUtils.LoggerLevelEnum.INFO)
            return
        poller = (_DynologPoller(self._shared_loop_flag, self._step_time, self._shm_obj, self._rank_id)
                  if self._is_dyno else _ConfigFilePoller(self._shared_loop_flag, self._step_time, self._shm_obj))
        self._process = threading.Thread(target=poller.run, name="DynMonitorProc", daemon=True)
        self._process.start()
        DynamicProfilerUtils.out_log(f"Dynamic monitor process has been created by rank {self._rank_id}.",
                                     DynamicProfilerUtils.LoggerLevelEnum.INFO)

    def _call_dyno_monitor(self, json_data: dict):
        """Hands an msmonitor npu-monitor request (NPU_MONITOR_START) to the proxy."""
        json_data = {key: str(value) for key, value in json_data.items()}
        proxy = PyDynamicMonitorProxySingleton().get_proxy()
        if proxy:
            with _PROXY_LOCK:
                proxy.enable_dyno_npu_monitor(json_data)


class _ConfigFilePoller:
    """Publishes each change of profiler_config.json. A file that does not
    parse is read once more at the next poll before it is published as
    invalid: an editor may have been caught between truncating and writing it."""

    def __init__(self, loop_flag, poll_interval, shm_obj):
        self._loop_flag = loop_flag
        self._poll_interval = poll_interval
        self._shm_obj = shm_obj
        self._cfg_path = shm_obj.config_path
        try:
            self._seen = self._signature()  # changes made from now on are published
        except OSError:
            self._seen = None
        self._failed = None
        self._missing = False

    def _signature(self):
        """What tells an edit: the mtime, and the size and inode (an edit in
        the mtime's clock tick, or one that replaces the file)."""
        stat = os.stat(self._cfg_path)
        return stat.st_mtime_ns, stat.st_size, stat.st_ino

    def run(self):
        _name_this_thread()
        try:
            DynamicProfilerUtils.init_logger(is_monitor_process=True, log_path=os.path.dirname(self._cfg_path))
        except Exception:  # no log file: the poller still polls
            pass
        while self._loop_flag.value:
            try:
                self.poll()
            except Exception as ex:  # a poller that died would end dynamic profiling silently
                _monitor_log(f"Dynamic profiler poll failed, {ex} has occur!",
                             DynamicProfilerUtils.LoggerLevelEnum.ERROR)
            self._loop_flag.sleep(self._poll_interval.value)
        _monitor_log("Dynamic profiler process done")

    def poll(self):
        try:
            signature = self._signature()
        except FileNotFoundError:
            if not self._missing:
                _monitor_log("Dynamic profiler cfg json not exists", DynamicProfilerUtils.LoggerLevelEnum.ERROR)
            self._missing = True
            return
        self._missing = False
        if signature == self._seen:
            return
        try:
            data = self._read()
            data["is_valid"] = True
            _monitor_log("Dynamic profiler process load json success")
        except (OSError, ValueError) as ex:
            if self._failed != signature:
                self._failed = signature
                return
            _monitor_log(f"Dynamic profiler process load json failed, {ex} has occur!",
                         DynamicProfilerUtils.LoggerLevelEnum.ERROR)
            data = {"is_valid": False, "error": f"{self._cfg_path}: {ex}"}
        self._seen = signature
        _publish(self._shm_obj, data)

    def _read(self) -> dict:
        if not os.path.isfile(self._cfg_path):
            raise ValueError("it is not a regular file")
        size = os.path.getsize(self._cfg_path)
        if size > DynamicProfilerUtils.CFG_BUFFER_SIZE:
            raise ValueError(f"it has {size} bytes, over the {DynamicProfilerUtils.CFG_BUFFER_SIZE} allowed")
        with open(self._cfg_path, encoding="utf-8") as f:
            data = ConfigContext.bytes_to_profiler_cfg_json(f.read().encode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("the config must be a JSON object")
        return data


class _DynologPoller:
    """Publishes each config dynolog sends (through msmonitor's proxy)."""

    def __init__(self, loop_flag, poll_interval, shm_obj, rank_id):
        self._loop_flag = loop_flag
        self._poll_interval = poll_interval
        self._shm_obj = shm_obj
        self._rank_id = rank_id

    def run(self):
        _name_this_thread()
        proxy = PyDynamicMonitorProxySingleton().get_proxy()
        if not proxy:
            return
        with _PROXY_LOCK:
            ready = proxy.init_dyno(self._rank_id)
        if not ready:
            DynamicProfilerUtils.out_log("Init dynolog failed !", DynamicProfilerUtils.LoggerLevelEnum.WARNING)
            return
        DynamicProfilerUtils.out_log("Init dynolog success !", DynamicProfilerUtils.LoggerLevelEnum.INFO)
        try:
            while self._loop_flag.value:
                self._loop_flag.sleep(self._poll_interval.value)
                if not self._loop_flag.value:
                    break
                try:
                    with _PROXY_LOCK:
                        reply = proxy.poll_dyno()
                    data = DynamicProfilerUtils.dyno_str_to_json(reply)
                except Exception as ex:
                    DynamicProfilerUtils.out_log(f"Dynolog poll failed, {ex} has occur!",
                                                 DynamicProfilerUtils.LoggerLevelEnum.ERROR)
                    continue
                if data:
                    data["is_valid"] = True
                    DynamicProfilerUtils.out_log("Dynolog profiler process load json success",
                                                 DynamicProfilerUtils.LoggerLevelEnum.INFO)
                    _publish(self._shm_obj, data)
        finally:
            if hasattr(proxy, "update_profiler_status"):
                status = {DynamicProfilerUtils.PROFILER_STATUS:
                          str(DynamicProfilerUtils.ProfilerStatus.UNINITIALIZED.value),
                          DynamicProfilerUtils.CURRENT_STEP: "-1", DynamicProfilerUtils.START_STEP: "-1",
                          DynamicProfilerUtils.STOP_STEP: "-1"}
                with _PROXY_LOCK:
                    proxy.update_profiler_status(status)
            DynamicProfilerUtils.out_log("Dynolog profiler process done", DynamicProfilerUtils.LoggerLevelEnum.INFO)


def _publish(shm_obj, data: dict):
    try:
        shm_obj.publish(ConfigContext.profiler_cfg_json_to_bytes(data))
    except ValueError as ex:  # too big for the segment: the ranks learn why nothing happens
        _monitor_log(f"Load json failed, {ex}", DynamicProfilerUtils.LoggerLevelEnum.WARNING)
        shm_obj.publish(ConfigContext.profiler_cfg_json_to_bytes({"is_valid": False, "error": str(ex)}))
    except Exception as ex:
        _monitor_log(f"Dynamic profiler cfg bytes write failed, {ex} has occur!",
                     DynamicProfilerUtils.LoggerLevelEnum.ERROR)
