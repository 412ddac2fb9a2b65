"""torch_npu._C._profiler: the NPU profiler's native session.

Real torch_npu implements this module in C++ (torch_npu/csrc/profiler): the
activity enum, the experimental config as the native side stores it, and
the functions ``_ProfInterface`` (profiler_interface.py) drives a profile
with: ``_init_profiler`` -> (``_warmup_profiler``) -> ``_start_profiler`` ->
``_stop_profiler`` -> ``_finalize_profiler``.

On vNPU the recording is Kineto's, with the npu device activity of
csrc/profiler (docs/profiler.md), so the session here runs one Kineto session
through ``torch.autograd.profiler.profile``, and its finalize writes what the
session recorded as the profile's raw data, ``<path>/FRAMEWORK/torch.trace.json``
(what the analysis reads). A recording of the NPU activity also has CANN's
raw-data folder, ``<path>/PROF_<n>_<timestamp>_<id>/``, made at the start and
filled at the finalize (Note [The CANN raw-data folder] in _cann_raw_data.py).
It is plain Python: nothing here needs C++, and the module is registered under
its real name by ``install()`` (torch_npu/profiler/__init__.py).

Note [The native session's states]
idle --_init_profiler--> inited --_warmup_profiler--> warm --_start_profiler-->
recording --_stop_profiler--> stopped --_finalize_profiler--> idle.
``_start_profiler`` also starts from inited (Kineto is prepared then), and
``_finalize_profiler`` from any state: a recording session is stopped first.
A warm session that never recorded is closed by the finalize, or by the
next init or warmup (Kineto left prepared would record no device activity
for the next session). One recording at a time per process: an init, a
warmup or a start while a session records raises "Profiler is already
enabled." (Note [One profiling session per process] in _session.py).
"""

import enum
import os
import sys
import threading
import time

import torch

__all__ = []

_MODULE_NAME = "torch_npu._C._profiler"


class ProfilerActivity(enum.Enum):
    """What a profile records: host operators (CPU) and device tasks (NPU)."""
    CPU = 1
    NPU = 2

    def __str__(self):
        return f"ProfilerActivity.{self.name}"  # what profiler_info.json records

    def __repr__(self):
        return f"<ProfilerActivity.{self.name}: {self.value}>"


class _ExperimentalConfig:
    """The experimental config as the native session takes it (what
    ``torch_npu.profiler._ExperimentalConfig()()`` returns): already
    validated, so only the types are checked here."""

    _FIELDS = ("trace_level", "metrics", "l2_cache", "record_op_args", "msprof_tx", "op_attr", "host_sys",
               "mstx_domain_include", "mstx_domain_exclude", "sys_io", "sys_interconnection")

    def __init__(self, trace_level="Level0", metrics="ACL_AICORE_NONE", l2_cache=False, record_op_args=False,
                 msprof_tx=False, op_attr=False, host_sys=(), mstx_domain_include=(), mstx_domain_exclude=(),
                 sys_io=False, sys_interconnection=False):
        self.trace_level = _typed("trace_level", trace_level, str)
        self.metrics = _typed("metrics", metrics, str)
        self.l2_cache = _typed("l2_cache", l2_cache, bool)
        self.record_op_args = _typed("record_op_args", record_op_args, bool)
        self.msprof_tx = _typed("msprof_tx", msprof_tx, bool)
        self.op_attr = _typed("op_attr", op_attr, bool)
        self.host_sys = _strings("host_sys", host_sys)
        self.mstx_domain_include = _strings("mstx_domain_include", mstx_domain_include)
        self.mstx_domain_exclude = _strings("mstx_domain_exclude", mstx_domain_exclude)
        self.sys_io = _typed("sys_io", sys_io, bool)
        self.sys_interconnection = _typed("sys_interconnection", sys_interconnection, bool)

    def __getstate__(self):
        return tuple(getattr(self, f) for f in self._FIELDS)

    def __setstate__(self, state):
        if len(state) < len(self._FIELDS):
            raise RuntimeError(f"Expected at least {len(self._FIELDS)} values in state")
        self.__init__(*state[:len(self._FIELDS)])

    def __eq__(self, other):
        return isinstance(other, _ExperimentalConfig) and self.__getstate__() == other.__getstate__()

    def __repr__(self):
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS)
        return f"_ExperimentalConfig({fields})"


class NpuProfilerConfig:
    """What one recording collects: the output folder, torch.profiler's
    switches and the experimental config."""

    def __init__(self, path, record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False, experimental_config=None):
        self.path = _typed("path", path, str)
        self.record_shapes = _typed("record_shapes", record_shapes, bool)
        self.profile_memory = _typed("profile_memory", profile_memory, bool)
        self.with_stack = _typed("with_stack", with_stack, bool)
        self.with_flops = _typed("with_flops", with_flops, bool)
        self.with_modules = _typed("with_modules", with_modules, bool)
        if experimental_config is None:
            experimental_config = _ExperimentalConfig()
        if not isinstance(experimental_config, _ExperimentalConfig):
            raise TypeError(f"NpuProfilerConfig: experimental_config must be a {_MODULE_NAME}._ExperimentalConfig "
                            f"(torch_npu.profiler._ExperimentalConfig()() makes one), not "
                            f"{type(experimental_config).__name__}")
        self.experimental_config = experimental_config


def _typed(name, value, kind):
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be {kind.__name__}, not {type(value).__name__}")
    return value


def _strings(name, values):
    values = list(values)
    if not all(isinstance(v, str) for v in values):
        raise TypeError(f"{name} must be a list of str")
    return values


def _supported_npu_activities():
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}


def _activity_set(activities):
    activities = set(activities)
    unknown = [a for a in activities if not isinstance(a, ProfilerActivity)]
    if unknown:
        raise TypeError(f"activities must be {_MODULE_NAME}.ProfilerActivity values, got {unknown!r}")
    return activities


# --- clocks -------------------------------------------------------------------------
# An Ascend host reads the device's system counter (syscnt) to line host and
# device times up. vNPU's device runs on the host's steady clock, so there is
# no counter: profiles time everything with the raw monotonic clock, as real
# torch_npu does where the counter is not available.

_SYSCNT_FREQ_MHZ = 100  # what _ProfInterface assumes when there is no counter


def _get_syscnt_enable():
    return False


def _get_freq():
    return _SYSCNT_FREQ_MHZ


def _get_monotonic():
    clock = getattr(time, "CLOCK_MONOTONIC_RAW", None)
    return time.clock_gettime_ns(clock) if clock is not None else time.monotonic_ns()


def _get_syscnt():
    """The monotonic clock in ticks of a _get_freq() MHz counter."""
    return _get_monotonic() * _SYSCNT_FREQ_MHZ // 1000


# --- the session ----------------------------------------------------------------------

RAW_TRACE = os.path.join("FRAMEWORK", "torch.trace.json")  # what the analysis reads (analysis.RAW_TRACE)


class _Session:
    """The process's one native session (Note [The native session's states])."""

    def __init__(self):
        self.lock = threading.Lock()
        self.state = "idle"
        self.path = ""
        self.activities = set()
        self.kineto = None  # the torch.autograd.profiler.profile recording for it
        self.cann_raw_data = None  # the recording's PROF_* folder (_cann_raw_data.CannRawData), with NPU

    def kineto_profile(self, config, activities):
        from torch.autograd import profiler as autograd_profiler
        from torch_npu.profiler import _session
        options = {}
        if config.with_stack:
            # torch keeps the Python stacks export_stacks() needs only with its verbose flag.
            options["experimental_config"] = torch._C._profiler._ExperimentalConfig(verbose=True)
        kineto = autograd_profiler.profile(
            use_cpu=ProfilerActivity.CPU in activities,
            use_device="npu" if ProfilerActivity.NPU in activities else None,
            record_shapes=config.record_shapes, profile_memory=config.profile_memory,
            with_stack=config.with_stack, with_flops=config.with_flops, with_modules=config.with_modules,
            use_kineto=True, **options)
        _session.mark_as_npu_session(kineto)
        return kineto


_session_state = _Session()


def _refuse_if_recording(state):
    """A new session may not start while one records; one only warmed up is closed."""
    if state.state == "warm":
        from torch_npu.profiler import _session
        _session.close_prepared(state.kineto)
        state.kineto, state.state = None, "inited"
    if state.state == "recording":
        raise RuntimeError("Profiler is already enabled. A torch_npu profile is recording in this process and has "
                           "not been finalized; a process records one profiling session at a time. Stop it "
                           "before starting another.")


def _init_profiler(path, activities):
    state = _session_state
    with state.lock:
        _refuse_if_recording(state)
        state.path = _typed("path", path, str)
        state.activities = _activity_set(activities)
        state.kineto, state.cann_raw_data = None, None
        state.state = "inited"


def _prepare(state, config, activities):
    kineto = state.kineto_profile(config, _activity_set(activities))
    kineto._prepare_trace()
    state.kineto, state.state = kineto, "warm"


def _warmup_profiler(config, activities):
    """Prepares the recording (Kineto's set-up), so that the start is quick."""
    state = _session_state
    with state.lock:
        _refuse_if_recording(state)
        _prepare(state, config, activities)


def _start_profiler(config, activities, scopes=None):
    state = _session_state
    with state.lock:
        if state.state == "recording":
            _refuse_if_recording(state)
        if state.state != "warm":
            _prepare(state, config, activities)
        try:
            state.kineto._start_trace()
        except BaseException:
            state.kineto, state.state = None, "inited"
            raise
        state.state = "recording"
        if ProfilerActivity.NPU in _activity_set(activities) and state.path:
            state.cann_raw_data = _start_cann_raw_data(state.path)


def _start_cann_raw_data(path):
    """The recording's CANN raw-data folder on the current device, or None when it cannot be made
    (reported: as a failed aclprofStart on Ascend, it costs the profile its device data, not the run)."""
    from torch_npu.profiler._cann_raw_data import CannRawData
    try:
        return CannRawData.start(path, torch.npu.current_device())
    except (OSError, RuntimeError) as err:
        _report(f"Failed to start the CANN profiling data collection in {path}: {err}")
        return None


def _report(message):
    from torch_npu.profiler.analysis.prof_common_func._constant import print_error_msg
    print_error_msg(message)


def _stop_profiler():
    """Ends the recording; returns its torch.autograd.profiler.profile (for
    key_averages() and the exports), or None when nothing was recording."""
    state = _session_state
    with state.lock:
        if state.state != "recording":
            return None
        state.kineto.__exit__(None, None, None)
        state.state = "stopped"
        return state.kineto


def _finalize_profiler():
    """Writes the recording's raw data into the session's folder and ends the session."""
    state = _session_state
    with state.lock:
        kineto, was = state.kineto, state.state
        if was == "recording":
            kineto.__exit__(None, None, None)
        elif was == "warm":
            from torch_npu.profiler import _session
            _session.close_prepared(kineto)
        if kineto is not None and was in ("recording", "stopped") and state.path:
            folder = os.path.join(state.path, "FRAMEWORK")
            os.makedirs(folder, exist_ok=True)
            raw = os.path.join(state.path, RAW_TRACE)
            tmp = raw + ".tmp"
            kineto.export_chrome_trace(tmp)
            os.replace(tmp, raw)
            if state.cann_raw_data is not None:
                try:
                    state.cann_raw_data.finish(raw)
                except (OSError, ValueError, KeyError) as err:
                    _report(f"Failed to write the CANN profiling data of {state.cann_raw_data.path}: {err}")
        state.kineto, state.state, state.path, state.cann_raw_data = None, "idle", "", None


def install():
    """Registers this module as torch_npu._C._profiler (once)."""
    from torch_npu import _C
    module = sys.modules[__name__]
    sys.modules.setdefault(_MODULE_NAME, module)
    if getattr(_C, "_profiler", None) is not module:
        _C._profiler = module
    for cls in (ProfilerActivity, _ExperimentalConfig, NpuProfilerConfig):
        cls.__module__ = _MODULE_NAME
