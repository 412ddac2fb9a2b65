"""torch_npu.profiler.dynamic_profile: profile a running job by editing a
JSON file, without restarting it.

    from torch_npu.profiler import dynamic_profile as dp
    dp.init("./dyn_cfg")          # writes ./dyn_cfg/profiler_config.json if missing
    for batch in loader:
        train_step(batch)
        dp.step()

Edit ``profiler_config.json`` while the job runs: within a poll interval (2 s,
then one step's duration, at least 1 s) the ranks pick the change up, and
from step ``start_step`` (-1: the next step) they profile ``warmup`` +
``active`` steps into ``prof_dir``, as ``tensorboard_trace_handler`` writes
them. A start_step already passed is reported and ignored. A rank profiles
only if it is in ``rank_list`` when ``is_rank`` is set. Wrong values are
reset to their defaults with a warning; a file that is not valid JSON
leaves the profiler off, with a warning. Nothing here raises into the
training loop. The job's ranks on one node share one poller (Note [One
config poller per job] in _dynamic_profiler/__init__.py); the messages of
each rank go to ``<folder>/log/``.

``dp.start(path)`` profiles at once with a config file's settings;
``dp.set_state({"cur_step": N})`` resumes the step count after a checkpoint.
``PROF_CONFIG_PATH=<folder>`` does ``dp.init`` at ``import torch_npu`` and
``dp.step`` at each optimizer step (torch_npu/profiler/_non_intrusive_profile.py).
"""

import atexit
import functools
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

_Level = DynamicProfilerUtils.LoggerLevelEnum
_Status = DynamicProfilerUtils.ProfilerStatus
_CREATE_LOCK = threading.Lock()


def _number_steps_from(prof, first_step):
    """Makes the profile's ProfilerStep#N the job's step numbers (real
    torch_npu's _set_step_num_offset_for_dynamic_prof), its schedule still
    counting from 0."""
    counted_from_zero = prof.schedule
    prof.step_num = first_step
    prof.schedule = lambda step: counted_from_zero(step - first_step)


class _DynamicProfile:
    """The process's dynamic profile: ``_DynamicProfile()`` always returns the
    same object. It counts the job's steps, takes the configs the monitor
    hands it, and runs one torch_npu profile at a time."""

    RECORD_TIME_STEP = 10  # the duration of the step after this one becomes the poll interval
    _instance = None

    def __new__(cls):
        with _CREATE_LOCK:
            if cls._instance is None:
                instance = super().__new__(cls)
                instance._setup()
                cls._instance = instance
        return cls._instance

    def _setup(self):
        self.prof = None
        self.cfg_ctx = None  # a config waiting for its start_step
        self.step_num = 0  # steps left in the running profile
        self.cur_step = 0
        self._dynamic_monitor = None
        self.repeat_init = False
        self._step_record_time = None
        self._step_time = 0
        self._min_poll_interval = 1
        self._max_poll_interval = 50
        self._step_mstx_range_id = 0

    def init(self):
        if self.repeat_init:
            DynamicProfilerUtils.stdout_log("Init dynamic profiling repeatedly", _Level.WARNING)
            return
        self._dynamic_monitor = DynamicProfilerMonitor()
        self.repeat_init = True
        atexit.register(self._clean_resource)
        atexit.register(self._finalize_dynolog)

    def _clean_resource(self):
        prof, self.prof = self.prof, None
        if prof is not None:
            DynamicProfilerUtils.stdout_log(
                "Profiler stop when process exit, check cfg json active whether over all step!", _Level.WARNING)
            try:
                prof.stop()
            except Exception as err:  # at exit: report, and still release the monitor
                print_error_msg(f"Dynamic profiler failed to stop at exit: {err}")
        if self._dynamic_monitor is not None:
            self._dynamic_monitor.clean_resource()

    def _finalize_dynolog(self):
        proxy = PyDynamicMonitorProxySingleton().get_proxy()
        if proxy:
            proxy.finalize_dyno()

    def set_state(self, state_step: dict):
        """Sets the step count from ``{"cur_step": N}`` (a job resumed from a
        checkpoint at step N), so that start_step keeps naming training steps."""
        if not isinstance(state_step, dict):
            DynamicProfilerUtils.stdout_log("Dynamic profiler state_step must be dict.", _Level.ERROR)
            return
        cur_step = state_step.get("cur_step", 0)
        if not isinstance(cur_step, int) or isinstance(cur_step, bool) or cur_step < 0:
            DynamicProfilerUtils.stdout_log("Dynamic profiler cur_step must be a non-negative integer.", _Level.ERROR)
            return
        self.cur_step = cur_step

    def step(self):
        self.cur_step += 1
        if self._dynamic_monitor is not None:
            cfg_ctx = self._dynamic_monitor.shm_to_prof_conf_context()
            if cfg_ctx is not None:
                self.cfg_ctx = cfg_ctx  # applied when the running profile (if any) is done
        self._time_steps()
        if self._step_mstx_range_id:
            mstx.range_end(self._step_mstx_range_id)
            self._step_mstx_range_id = mstx.range_start(f"step {self.cur_step}", current_stream())
        if self.prof is not None:
            self._advance_profile()
        elif self.cfg_ctx is not None:
            self._apply_config()
        if self._dynamic_monitor is not None:
            self._dynamic_monitor.update_step_info(self.cur_step, DynamicProfilerUtils.CURRENT_STEP)
            self._dynamic_monitor.report_profiler_status()
        if not self._step_mstx_range_id:
            self._step_mstx_range_id = mstx.range_start(f"step {self.cur_step}", current_stream())

    def _advance_profile(self):
        """One step of the running profile; it stops after its last step, or
        when it fails (a trace that cannot be written)."""
        try:
            self.prof.step()
            self.step_num -= 1
            if self.step_num > 0:
                return
        except Exception as err:
            print_error_msg(f"Dynamic profiler failed at step {self.cur_step}, it stops: {err}")
        prof, self.prof = self.prof, None
        self._update_status(_Status.IDLE)
        try:
            prof.stop()
        except Exception as err:
            print_error_msg(f"Dynamic profiler failed to stop at step {self.cur_step}: {err}")
        DynamicProfilerUtils.out_log(f"Stop Dynamic Profiler at {self.cur_step} step.", _Level.INFO)

    def _time_steps(self):
        """One step's duration, measured once, becomes the poll interval."""
        if self.cur_step == self.RECORD_TIME_STEP:
            self._step_record_time = time.time()
        elif self.cur_step - self.RECORD_TIME_STEP == 1 and self._step_record_time is not None:
            seconds = int(time.time() - self._step_record_time)
            self._step_time = min(self._max_poll_interval, max(self._min_poll_interval, seconds))
            if self._dynamic_monitor is not None:
                self._dynamic_monitor.modify_step_time(self._step_time)

    def _apply_config(self):
        ctx = self.cfg_ctx
        steps = ctx.active() + ctx.warmup()
        if self.cur_step > ctx.start_step() and not ctx.start():
            print_warn_msg(f"Dynamic Profiler config is not effective. The start_step={ctx.start_step()}, "
                           f"current_step={self.cur_step}")
            self._update_status(_Status.IDLE)
            self.cfg_ctx = None
        elif self.cur_step == ctx.start_step() or ctx.start():
            self.step_num = steps
            self._update_steps(self.cur_step, self.cur_step + steps)
            self._update_status(_Status.RUNNING)
            self.enable_prof()
            self.cfg_ctx = None
        else:  # a start_step ahead: wait for it
            self._update_steps(ctx.start_step(), ctx.start_step() + steps)
            self._update_status(_Status.READY)

    def _update_status(self, status):
        if self._dynamic_monitor is not None:
            self._dynamic_monitor.update_profiler_status(status)

    def _update_steps(self, start_step, stop_step):
        if self._dynamic_monitor is not None:
            self._dynamic_monitor.update_step_info(start_step, DynamicProfilerUtils.START_STEP)
            self._dynamic_monitor.update_step_info(stop_step, DynamicProfilerUtils.STOP_STEP)

    def start(self, config_path: str):
        """Profiles from now on with ``config_path``'s settings (else those
        of the file init() watches), once."""
        if self.prof:
            DynamicProfilerUtils.stdout_log("Profiler already started. "
                                            "Cannot call start interface while the profiler is active. ",
                                            _Level.ERROR)
            return
        enable_config_path = ""
        if config_path:
            try:
                PathManager.check_input_file_path(config_path)
                PathManager.check_directory_path_readable(config_path)
                enable_config_path = config_path
            except Exception as err:
                DynamicProfilerUtils.stdout_log(
                    f"The provided config_path is invalid: {config_path}. Details: {err}", _Level.ERROR)
        if not enable_config_path and self._dynamic_monitor is not None:
            enable_config_path = self._dynamic_monitor._config_path
        if not enable_config_path:
            DynamicProfilerUtils.stdout_log("No config to start the profiler with: pass a profiler_config.json "
                                            "to start(), or call init(path) first.", _Level.ERROR)
            return
        DynamicProfilerUtils.stdout_log(
            f"The start interface profiler enable config path is set to {enable_config_path}", _Level.INFO)
        try:
            with open(enable_config_path, encoding="utf-8") as f:
                json_data = json.load(f)
        except (OSError, ValueError):
            DynamicProfilerUtils.stdout_log(f"Failed to read config from : {enable_config_path}. "
                                            "Please check the config file. ", _Level.ERROR)
            return
        if not json_data:
            DynamicProfilerUtils.stdout_log(f"The config data is empty from: {enable_config_path}. "
                                            "Please check the config file. ", _Level.ERROR)
            return
        self.cfg_ctx = ConfigContext(json_data)
        self.step_num = self.cfg_ctx.active() + self.cfg_ctx.warmup()
        self.enable_prof()
        self.cfg_ctx = None
        if self._step_mstx_range_id:
            mstx.range_end(self._step_mstx_range_id)
        self._step_mstx_range_id = mstx.range_start(f"step {self.cur_step}", current_stream())

    def enable_prof(self):
        """Starts a profile with the pending config's settings; a profile that
        cannot start (a prof_dir that cannot be written, another profiler
        running) is reported and the profiler stays off."""
        ctx = self.cfg_ctx
        for problem in ctx.problems:
            print_warn_msg(f"Dynamic profiler config: {problem}")
        try:
            prof = profile(
                activities=ctx.activities(),
                schedule=schedule(wait=0, warmup=ctx.warmup(), active=ctx.active(), repeat=1, skip_first=0),
                on_trace_ready=tensorboard_trace_handler(ctx.prof_path, analyse_flag=ctx.analyse(),
                                                         async_mode=ctx.async_mode()),
                record_shapes=ctx.record_shapes,
                profile_memory=ctx.profile_memory,
                with_stack=ctx.with_stack,
                with_flops=ctx.with_flops,
                with_modules=ctx.with_modules,
                experimental_config=ctx.experimental_config)
            _number_steps_from(prof, self.cur_step)
            prof.start()
        except Exception as err:
            print_error_msg(f"Dynamic profiler failed to start at step {self.cur_step}: {err}")
            self.step_num = 0
            self._update_status(_Status.IDLE)
            return
        self.prof = prof
        for key, value in ctx.meta_data().items():
            prof.add_metadata_json(str(key), json.dumps(value))
        DynamicProfilerUtils.out_log(f"Start Dynamic Profiler at {self.cur_step} step.", _Level.INFO)


def _never_raises(func):
    """The public functions run inside the training loop: an error is
    reported, never raised into it."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception as err:
            print_error_msg(f"Dynamic profiler {func.__name__}() failed: {err}")
            return None
    return wrapper


@_never_raises
def init(path: str):
    """Watches ``path``/profiler_config.json (written with defaults if
    missing; the folder is made if needed)."""
    if DynamicProfilerUtils.is_dyno_model():
        _DynamicProfile().init()
        return
    if _DynamicProfile().repeat_init:
        DynamicProfilerUtils.stdout_log("Init dynamic profiling repeatedly", _Level.WARNING)
        return
    try:
        PathManager.check_input_directory_path(path)
    except RuntimeError:
        DynamicProfilerUtils.stdout_log(f"The path '{path}' is invalid, and profiler will not be enabled.",
                                        _Level.ERROR)
        return
    DynamicProfilerUtils.CFG_CONFIG_PATH = os.path.abspath(path)
    DynamicProfilerUtils.init_logger(log_path=DynamicProfilerUtils.CFG_CONFIG_PATH)
    _DynamicProfile().init()


@_never_raises
def step():
    """Call once per training step."""
    _DynamicProfile().step()


@_never_raises
def start(config_path: str = None):
    _DynamicProfile().start(config_path)


@_never_raises
def set_state(state_step: dict):
    _DynamicProfile().set_state(state_step)
