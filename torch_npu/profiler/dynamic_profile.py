"""torch_npu.profiler.dynamic_profile: turn the profiler on in a job that is
already training, by editing a JSON file; no restart.

    from torch_npu.profiler import dynamic_profile as dp
    dp.init("./dyn_cfg")          # writes ./dyn_cfg/profiler_config.json if missing
    for batch in loader:
        train_step(batch)
        dp.step()

How an edit becomes a profile:
- The job's ranks on one node share one poller (Note [One config poller per
  job] in _dynamic_profiler/__init__.py). It looks at the file every 2 s at
  first; once step 10 has been timed, every step's duration (1 to 50 s).
- At its next ``step()`` a rank takes the new config. From step
  ``start_step`` (-1: the very next step) it profiles ``warmup`` + ``active``
  steps into ``prof_dir``, laid out as ``tensorboard_trace_handler`` does.
  A ``start_step`` the job has already passed is reported and dropped.
- With ``is_rank`` set, only the ranks in ``rank_list`` profile.
- A wrong value is replaced by its default, with a warning; a file that is
  not JSON leaves the profiler off, with a warning.
Each rank logs what it did to ``<folder>/log/``. Nothing here raises into the
training loop: failures are printed.

Also: ``dp.start(path)`` profiles right away with a config file's settings;
``dp.set_state({"cur_step": N})`` carries the step count over a restart from
a checkpoint. With ``PROF_CONFIG_PATH=<folder>`` the job needs no code at all:
``import torch_npu`` arranges ``dp.init`` and a ``dp.step`` per optimizer step
(torch_npu/profiler/_non_intrusive_profile.py).
"""

import atexit
import contextlib
import json
import os
import threading
import time

from torch_npu.npu import current_stream, mstx
from torch_npu.profiler.analysis.prof_common_func._constant import print_error_msg, print_warn_msg
from torch_npu.profiler.profiler import profile, tensorboard_trace_handler
from torch_npu.profiler.scheduler import Schedule as schedule
from torch_npu.utils._path_manager import PathManager

from ._dynamic_profiler._dynamic_monitor_proxy import PyDynamicMonitorProxySingleton
from ._dynamic_profiler._dynamic_profiler_config_context import ConfigContext
from ._dynamic_profiler._dynamic_profiler_monitor import DynamicProfilerMonitor
from ._dynamic_profiler._dynamic_profiler_utils import DynamicProfilerUtils

__all__ = ["init", "step", "start", "set_state"]

_INFO = DynamicProfilerUtils.LoggerLevelEnum.INFO
_WARNING = DynamicProfilerUtils.LoggerLevelEnum.WARNING
_ERROR = DynamicProfilerUtils.LoggerLevelEnum.ERROR
_Status = DynamicProfilerUtils.ProfilerStatus

# Bounds of the poll interval that the timed step sets: a poll a second at most
# (a fast job gains nothing from more), and at least one every 50 s.
_SHORTEST_POLL_S = 1
_LONGEST_POLL_S = 50

# the profile() arguments that a config sets as they are, by the same names
_PROFILE_SWITCHES = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")

_singleton_lock = threading.Lock()


def _console(message, level):
    # looked up at each call: tests swap DynamicProfilerUtils.stdout_log
    DynamicProfilerUtils.stdout_log(message, level)


def _log(message, level=_INFO):
    DynamicProfilerUtils.out_log(message, level)


# -- what a config decides ---------------------------------------------------------------------------------------

_NOW, _LATER, _MISSED = "now", "later", "missed"


def _when_to_start(ctx, cur_step):
    """Whether a config received at ``cur_step`` starts its profile now, at a
    later step, or never (its start_step is behind us)."""
    if ctx.start() or ctx.start_step() == cur_step:
        return _NOW
    return _MISSED if cur_step > ctx.start_step() else _LATER


def _profiled_steps(ctx):
    return ctx.warmup() + ctx.active()


def _build_profile(ctx, first_step):
    """A torch_npu profile with the config's settings, recording its warmup
    and active steps once. Its ProfilerStep#N are the job's step numbers from
    ``first_step`` on (the schedule itself still counts from 0), so a trace
    says which training steps it holds."""
    once = schedule(wait=0, warmup=ctx.warmup(), active=ctx.active(), repeat=1, skip_first=0)
    writer = tensorboard_trace_handler(ctx.prof_path, analyse_flag=ctx.analyse(), async_mode=ctx.async_mode())
    switches = {name: getattr(ctx, name) for name in _PROFILE_SWITCHES}
    prof = profile(activities=ctx.activities(), schedule=once, on_trace_ready=writer,
                   experimental_config=ctx.experimental_config, **switches)
    zero_based = prof.schedule
    prof.schedule = lambda job_step: zero_based(job_step - first_step)
    prof.step_num = first_step
    return prof


def _stop_reporting_errors(prof, when):
    try:
        prof.stop()
    except Exception as err:  # a trace that cannot be written must not end the job
        print_error_msg(f"Dynamic profiler failed to stop {when}: {err}")


# -- the config file start() reads -------------------------------------------------------------------------------

def _checked_start_file(config_path):
    """``config_path`` if it names a readable file, else "" (reported)."""
    try:
        PathManager.check_input_file_path(config_path)
        PathManager.check_directory_path_readable(config_path)
    except Exception as err:
        _console(f"The provided config_path is invalid: {config_path}. Details: {err}", _ERROR)
        return ""
    return config_path


def _load_json(path):
    """The file's JSON, or None (reported) when it cannot be read or holds nothing."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        _console(f"Failed to read config from : {path}. Please check the config file. ", _ERROR)
        return None
    if not data:
        _console(f"The config data is empty from: {path}. Please check the config file. ", _ERROR)
        return None
    return data


class _DynamicProfile:
    """The process's one dynamic profile (``_DynamicProfile()`` always gives
    the same object). Driven by ``step()``: it counts the job's steps, takes
    what the monitor publishes, and runs at most one profile at a time; a
    config that arrives meanwhile waits for it to end."""

    RECORD_TIME_STEP = 10  # this step and the next are timed to set the poll interval
    _instance = None

    def __new__(cls):
        with _singleton_lock:
            if cls._instance is None:
                created = super().__new__(cls)
                created._clear()
                cls._instance = created
        return cls._instance

    def _clear(self):
        self.cur_step = 0  # the job's step count: step() calls, or set_state's
        self.prof = None  # the running profile
        self.step_num = 0  # steps the running profile still records
        self.cfg_ctx = None  # a config not applied yet
        self.repeat_init = False  # init() has run
        self._dynamic_monitor = None  # set by init(); None: steps are only counted
        self._step_record_time = None
        self._step_time = 0
        self._step_mstx_range_id = 0  # the open "step N" mstx range, 0 for none

    # -- setup and teardown ----------------------------------------------------------------------------------------

    def init(self):
        if self.repeat_init:
            _console("Init dynamic profiling repeatedly", _WARNING)
            return
        self._dynamic_monitor = DynamicProfilerMonitor()
        self.repeat_init = True
        atexit.register(self._clean_resource)
        atexit.register(self._finalize_dynolog)

    def _clean_resource(self):
        """At exit: a profile still running is stopped (its trace kept), then
        the monitor lets go of the poller and the shared segment."""
        running, self.prof = self.prof, None
        if running is not None:
            _console("Profiler stop when process exit, check cfg json active whether over all step!", _WARNING)
            _stop_reporting_errors(running, "at exit")
        if self._dynamic_monitor is not None:
            self._dynamic_monitor.clean_resource()

    def _finalize_dynolog(self):
        proxy = PyDynamicMonitorProxySingleton().get_proxy()
        if proxy:
            proxy.finalize_dyno()

    def set_state(self, state_step: dict):
        """``{"cur_step": N}``: the job resumed at step N (from a checkpoint),
        so that start_step keeps meaning a training step."""
        if not isinstance(state_step, dict):
            _console("Dynamic profiler state_step must be dict.", _ERROR)
            return
        resumed_at = state_step.get("cur_step", 0)
        is_count = isinstance(resumed_at, int) and not isinstance(resumed_at, bool)
        if not is_count or resumed_at < 0:
            _console("Dynamic profiler cur_step must be a non-negative integer.", _ERROR)
            return
        self.cur_step = resumed_at

    # -- once per training step ----------------------------------------------------------------------------------

    def step(self):
        self.cur_step += 1
        self._collect_published_config()
        self._time_one_step()
        if self._step_mstx_range_id:
            self._open_step_range()
        if self.prof is not None:
            self._step_running_profile()
        elif self.cfg_ctx is not None:
            self._apply_pending_config()
        self._send_status()
        if not self._step_mstx_range_id:
            self._open_step_range()

    def _collect_published_config(self):
        if self._dynamic_monitor is None:
            return
        published = self._dynamic_monitor.shm_to_prof_conf_context()
        if published is not None:
            self.cfg_ctx = published  # replaces one still waiting

    def _time_one_step(self):
        """The poller need not look at the file much more often than a step
        takes: once step RECORD_TIME_STEP + 1 is reached, the duration of the
        step before it becomes the poll interval."""
        if self.cur_step == self.RECORD_TIME_STEP:
            self._step_record_time = time.time()
            return
        if self.cur_step != self.RECORD_TIME_STEP + 1 or self._step_record_time is None:
            return
        seconds = int(time.time() - self._step_record_time)
        self._step_time = min(_LONGEST_POLL_S, max(_SHORTEST_POLL_S, seconds))
        if self._dynamic_monitor is not None:
            self._dynamic_monitor.modify_step_time(self._step_time)

    def _open_step_range(self):
        """Closes the open "step N" mstx range, if any, and opens the next."""
        if self._step_mstx_range_id:
            mstx.range_end(self._step_mstx_range_id)
        self._step_mstx_range_id = mstx.range_start(f"step {self.cur_step}", current_stream())

    def _step_running_profile(self):
        finished = True
        try:
            self.prof.step()
            self.step_num -= 1
            finished = self.step_num <= 0
        except Exception as err:  # e.g. a trace that cannot be written: this profile ends
            print_error_msg(f"Dynamic profiler failed at step {self.cur_step}, it stops: {err}")
        if finished:
            self._end_running_profile()

    def _end_running_profile(self):
        done, self.prof = self.prof, None
        self._set_status(_Status.IDLE)
        _stop_reporting_errors(done, f"at step {self.cur_step}")
        _log(f"Stop Dynamic Profiler at {self.cur_step} step.")

    def _apply_pending_config(self):
        ctx = self.cfg_ctx
        length = _profiled_steps(ctx)
        decision = _when_to_start(ctx, self.cur_step)
        if decision == _LATER:
            self._set_window(ctx.start_step(), ctx.start_step() + length)
            self._set_status(_Status.READY)
        elif decision == _MISSED:
            print_warn_msg(f"Dynamic Profiler config is not effective. The start_step={ctx.start_step()}, "
                           f"current_step={self.cur_step}")
            self.cfg_ctx = None
            self._set_status(_Status.IDLE)
        else:
            self.step_num = length
            self._set_window(self.cur_step, self.cur_step + length)
            self._set_status(_Status.RUNNING)
            self.enable_prof()

    # -- what the monitor reports to dynolog ----------------------------------------------------------------------

    def _set_status(self, status):
        if self._dynamic_monitor is not None:
            self._dynamic_monitor.update_profiler_status(status)

    def _set_window(self, first_step, end_step):
        if self._dynamic_monitor is not None:
            self._dynamic_monitor.update_step_info(first_step, DynamicProfilerUtils.START_STEP)
            self._dynamic_monitor.update_step_info(end_step, DynamicProfilerUtils.STOP_STEP)

    def _send_status(self):
        if self._dynamic_monitor is not None:
            self._dynamic_monitor.update_step_info(self.cur_step, DynamicProfilerUtils.CURRENT_STEP)
            self._dynamic_monitor.report_profiler_status()

    # -- starting a profile ----------------------------------------------------------------------------------------

    def start(self, config_path: str):
        """Profiles from this step on, once, with the settings of
        ``config_path`` (or, without a usable one, of the file init() watches)."""
        if self.prof:
            _console("Profiler already started. Cannot call start interface while the profiler is active. ",
                     _ERROR)
            return
        path = _checked_start_file(config_path) if config_path else ""
        if not path and self._dynamic_monitor is not None:
            path = self._dynamic_monitor._config_path
        if not path:
            _console("No config to start the profiler with: pass a profiler_config.json "
                     "to start(), or call init(path) first.", _ERROR)
            return
        _console(f"The start interface profiler enable config path is set to {path}", _INFO)
        data = _load_json(path)
        if data is None:
            return
        self.cfg_ctx = ConfigContext(data)
        self.step_num = _profiled_steps(self.cfg_ctx)
        self.enable_prof()
        self._open_step_range()

    def enable_prof(self):
        """Starts the profile of the pending config (``cfg_ctx``, which this
        consumes) at the current step. One that cannot start (a prof_dir that
        cannot be written, another profiler running) is reported, and the
        profiler stays off."""
        ctx, self.cfg_ctx = self.cfg_ctx, None
        for problem in ctx.problems:
            print_warn_msg(f"Dynamic profiler config: {problem}")
        try:
            prof = _build_profile(ctx, self.cur_step)
            prof.start()
        except Exception as err:
            print_error_msg(f"Dynamic profiler failed to start at step {self.cur_step}: {err}")
            self.step_num = 0
            self._set_status(_Status.IDLE)
            return
        self.prof = prof
        for key, value in ctx.meta_data().items():
            prof.add_metadata_json(str(key), json.dumps(value))
        _log(f"Start Dynamic Profiler at {self.cur_step} step.")


# -- the public functions ----------------------------------------------------------------------------------------

@contextlib.contextmanager
def _reported(api_name):
    """They run inside the training loop: an error is printed, not raised."""
    try:
        yield
    except Exception as err:
        print_error_msg(f"Dynamic profiler {api_name}() failed: {err}")


def _usable_config_folder(path):
    """``path`` made absolute, or None (reported) when it cannot hold the config."""
    try:
        PathManager.check_input_directory_path(path)
    except RuntimeError:
        _console(f"The path '{path}' is invalid, and profiler will not be enabled.", _ERROR)
        return None
    return os.path.abspath(path)


def init(path: str):
    """Watches ``path``/profiler_config.json (the folder and a default file
    are made when missing). In dynolog mode ``path`` is not used."""
    with _reported("init"):
        if not DynamicProfilerUtils.is_dyno_model():
            if _DynamicProfile().repeat_init:
                _console("Init dynamic profiling repeatedly", _WARNING)
                return
            folder = _usable_config_folder(path)
            if folder is None:
                return
            DynamicProfilerUtils.CFG_CONFIG_PATH = folder
            DynamicProfilerUtils.init_logger(log_path=folder)
        _DynamicProfile().init()


def step():
    """Call once after each training step."""
    with _reported("step"):
        _DynamicProfile().step()


def start(config_path: str = None):
    with _reported("start"):
        _DynamicProfile().start(config_path)


def set_state(state_step: dict):
    with _reported("set_state"):
        _DynamicProfile().set_state(state_step)
