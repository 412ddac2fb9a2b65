"""The steps of one profile: ``_ProfInterface``.

A profile (``torch_npu.profiler.profile`` or ``_KinetoProfile``) owns one
interface. The profile's schedule decides *when* a step happens
(``ProfActionController`` in _profiler_action_controller.py); the interface
knows *what* each step does, over the native session of
``torch_npu._C._profiler`` (_c_profiler.py):

    init_trace -> [warmup_trace] -> start_trace -> stop_trace -> finalize_trace -> [analyse]

Beyond the native session, a recording carries three pieces of host-side
instrumentation, switched on at the start and off at the stop:

- every call of an npu ``Event`` method is a range "Event::<method>", so the
  host's waits on the device are visible by name;
- with ``with_flops`` and mstx, the fused operators' FLOPs as ranges
  (_flops_hook.py);
- with ``gc_detect_threshold``, Python's garbage collections (_profiler_gc_detect.py).

The files a profile leaves in its ``*_ascend_pt`` folder besides the raw
trace: ``profiler_info[_<rank>].json`` (the options, the clocks at start and
end, the versions) and ``profiler_metadata.json`` (``add_metadata``'s values,
the trace id, the environment, the hccl groups).

The native functions are imported by name into this module on purpose:
real torch_npu's tests replace them here with ``mock.patch``.
"""

import functools
import os
import time
import uuid

import torch

from torch_npu._C._profiler import (
    NpuProfilerConfig,
    ProfilerActivity,
    _finalize_profiler,
    _get_freq,
    _get_monotonic,
    _get_syscnt,
    _get_syscnt_enable,
    _init_profiler,
    _start_profiler,
    _stop_profiler,
    _supported_npu_activities,
    _warmup_profiler,
)
from torch_npu.npu import Event
from torch_npu.profiler._flops_hook import FlopsHookManager
from torch_npu.profiler._profiler_gc_detect import ProfGCDetector
from torch_npu.profiler._profiler_path_creator import ProfPathCreator
from torch_npu.profiler.analysis._npu_profiler import NpuProfiler
from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_warn_msg
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_common_func._host_info import collect_env_vars
from torch_npu.profiler.experimental_config import _ExperimentalConfig

__all__ = ["supported_activities"]


def supported_activities():
    """The activities a profile may record: ProfilerActivity.CPU and .NPU."""
    return _supported_npu_activities()


# --- Event methods as named ranges ----------------------------------------------------
#
# Event's methods are replaced on the class while a profile records (one
# replacement however many profiles start) and put back at its stop. Some of
# them are Event's own and some it inherits from torch.Event; what the class
# held before is remembered so that an inherited method is inherited again
# rather than pinned on Event.

_TIMED_EVENT_METHODS = ("record", "wait", "query", "elapsed_time", "synchronize")
_NOT_OWN = object()  # remembered for a method Event inherits
_held_before = {}


def _as_named_range(method):
    label = f"Event::{method.__name__}"

    @functools.wraps(method)
    def ranged(*args, **kwargs):
        with torch.profiler.record_function(label):
            return method(*args, **kwargs)

    ranged.origin_func = method  # marks the replacement; torch_npu's tests look for this name
    return ranged


def _enable_event_record():
    for name in _TIMED_EVENT_METHODS:
        current = getattr(Event, name)
        if hasattr(current, "origin_func"):
            continue
        _held_before[name] = Event.__dict__.get(name, _NOT_OWN)
        setattr(Event, name, _as_named_range(current))


def _disable_event_record():
    for name in _TIMED_EVENT_METHODS:
        ranged = Event.__dict__.get(name)
        if not hasattr(ranged, "origin_func"):
            continue
        before = _held_before.pop(name, ranged.origin_func)
        if before is _NOT_OWN:
            delattr(Event, name)
        else:
            setattr(Event, name, before)


# --- who and where this process is in a distributed job --------------------------------

def _distributed_ready():
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized()


def _job_rank():
    """$RANK when the launcher set it, else the process group's rank, else None."""
    from_env = os.environ.get("RANK")
    if from_env is not None:
        return from_env
    return torch.distributed.get_rank() if _distributed_ready() else None


def _hccl_communicators():
    """{communicator name: its group} for each hccl process group this rank is in.

    The default group is listed as "default_group"; the others under the
    group_name of their hccl options. A group whose communicator was never
    made has no name yet and is left out.
    """
    dist = torch.distributed
    from torch.distributed.distributed_c10d import _world

    me = dist.get_rank()
    world_group = dist.distributed_c10d._get_default_group()

    def is_hccl(backend):
        return str(backend).lower() == "hccl"

    candidates = [group for group, (backend, *_) in _world.pg_map.items()
                  if group is not world_group and is_hccl(backend)]
    if is_hccl(dist.get_backend(world_group)):
        candidates.append(world_group)

    table = {}
    for group in candidates:
        backend = group._get_backend(torch.device("npu"))
        comm_name = backend.get_hccl_comm_name(me, init_comm=False)
        if not comm_name:
            continue
        if group is world_group:
            label = "default_group"
        else:
            label = backend.options.hccl_config.get("group_name", "")
        table[comm_name] = {
            "group_name": label,
            "group_rank": dist.get_group_rank(group, me),
            "global_ranks": dist.get_process_group_ranks(group),
        }
    return table


# --- the options' checks --------------------------------------------------------------
# A bad option never fails the profile: torch_npu warns and uses the default.

_BOOLEAN_OPTIONS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")


def _checked_activities(activities):
    wanted = set(activities) if activities else supported_activities()
    if wanted <= set(supported_activities()):
        return wanted
    print_warn_msg("Invalid activities, only CPU and NPU are supported, reset it to default.")
    return supported_activities()


def _checked_flag(name, value):
    if isinstance(value, bool):
        return value
    print_warn_msg(f"Parameter {name} is of boolean type, reset it to False.")
    return False


def _checked_experimental_config(config):
    if config is None:
        return _ExperimentalConfig()
    if isinstance(config, _ExperimentalConfig):
        return config
    print_warn_msg("Parameter experimental_config is an instance of _ExperimentalConfig, reset it to default.")
    return _ExperimentalConfig()


def _schedule_summary(schedule):
    """A schedule's plain public fields (a Schedule's wait, warmup, active, ...), or None."""
    if not schedule:
        return None
    fields = {}
    for key, value in getattr(schedule, "__dict__", {}).items():
        if not key.startswith("_") and isinstance(value, (bool, int, float, str)):
            fields[key] = value
    return fields or None


class _HostInstrumentation:
    """What one recording adds on the host, chosen when it starts and undone when it stops.

    Always the Event ranges; the FLOPs ranges when asked for (with_flops and
    mstx); a GC detector when collections are recorded (gc_threshold, in ms).
    """

    def __init__(self, flops_ranges, gc_threshold):
        self.flops_ranges = flops_ranges
        self.gc_threshold = gc_threshold
        self.gc_detector = None

    def attach(self):
        _enable_event_record()
        if self.flops_ranges:
            FlopsHookManager.install()
        if self.gc_threshold is not None:
            self.gc_detector = ProfGCDetector(self.gc_threshold)
            self.gc_detector.start()

    def detach(self):
        if self.flops_ranges:
            FlopsHookManager.uninstall()
        if self.gc_detector is not None:
            self.gc_detector.stop()  # writes the collections it saw into the profile's FRAMEWORK folder
            self.gc_detector = None
        _disable_event_record()


class _ProfInterface:
    PARALLEL_GROUP_KEY = "parallel_group_info"
    TRACE_ID_KEY = "trace_id"
    MAX_TRACE_ID_LEN = 1024

    def __init__(self, activities=None, record_shapes=False, profile_memory=False, with_stack=False,
                 with_flops=False, with_modules=False, schedule=None, metadata=None, experimental_config=None,
                 custom_trace_id_callback=None):
        self.activities = _checked_activities(activities)
        flags = (record_shapes, profile_memory, with_stack, with_flops, with_modules)
        for name, value in zip(_BOOLEAN_OPTIONS, flags):
            setattr(self, name, _checked_flag(name, value))
        self.experimental_config = _checked_experimental_config(experimental_config)
        if self.experimental_config.with_gc and not self._records_host():
            print_warn_msg("GC detect will not take effect while ProfilerActivity.CPU is not set.")
        self.schedule = schedule
        self.metadata = {} if metadata is None else metadata
        self.custom_trace_id_callback = custom_trace_id_callback

        # What the steps find out. The clocks at the start go to profiler_info.json,
        # so that the analysis can put the host's and the device's times on one line.
        self.prof_path = ""
        self.trace_id = ""
        self.syscnt_enable = False
        self.freq = _get_freq()
        self.start_cnt = 0
        self.start_monotonic = 0
        self.kineto_profile = None  # vNPU's: the last recording's torch.autograd.profiler.profile
        self._instrumentation = None  # the running recording's _HostInstrumentation

    def _records_host(self):
        return ProfilerActivity.CPU in self.activities

    def _native_config(self):
        return NpuProfilerConfig(self.prof_path, self.record_shapes, self.profile_memory, self.with_stack,
                                 self.with_flops, self.with_modules, self.experimental_config())

    # --- the steps ----------------------------------------------------------------------

    def init_trace(self):
        self.prof_path = str(ProfPathCreator().create_prof_dir())
        _init_profiler(self.prof_path, self.activities)
        self.trace_id = self.create_trace_id()

    def warmup_trace(self):
        _warmup_profiler(self._native_config(), self.activities)

    def start_trace(self):
        config = self._native_config()
        self.syscnt_enable = _get_syscnt_enable()
        if self.syscnt_enable:
            self.freq, self.start_cnt = _get_freq(), _get_syscnt()
        self.start_monotonic = _get_monotonic()
        _start_profiler(config, self.activities)

        experimental = self.experimental_config
        records_gc = experimental.with_gc and self._records_host()  # GC events live on the host's timeline
        self._instrumentation = _HostInstrumentation(
            flops_ranges=self.with_flops and experimental.tx_enabled,
            gc_threshold=experimental.gc_detect_threshold if records_gc else None)
        self._instrumentation.attach()

    def stop_trace(self):
        if ProfilerActivity.NPU in self.activities:
            torch.npu.synchronize()  # the device's queued work belongs to this recording
        instrumentation, self._instrumentation = self._instrumentation, None
        if instrumentation is not None:
            instrumentation.detach()
        recording = _stop_profiler()
        if recording is not None:
            self.kineto_profile = recording

    def finalize_trace(self):
        _finalize_profiler()
        self._write_profiler_info()
        self._write_metadata()
        ProfPathCreator().is_prof_inited = False

    def delete_prof_dir(self):
        ProfPathCreator().delete_prof_dir()

    def analyse(self, analysis_type=Constant.TENSORBOARD_TRACE_HANDLER, output_path=None, **kwargs):
        # as in torch_npu, a failed analysis is reported and the program goes on
        try:
            NpuProfiler.analyse(self.prof_path, analysis_type, output_path, **kwargs)
        except Exception as e:  # noqa: BLE001
            print_warn_msg(f"Profiling data parsing failed, error: {e}")

    # --- the trace id ---------------------------------------------------------------------

    def default_trace_id(self):
        return uuid.uuid4().hex.upper()  # 32 hex digits

    def create_trace_id(self):
        """custom_trace_id_callback's answer when it is a usable id, else a random one."""
        chosen = self._trace_id_from_callback() if self.custom_trace_id_callback else None
        return self.default_trace_id() if chosen is None else chosen

    def _trace_id_from_callback(self):
        """The callback's id, or None (after a warning) when there is no usable one."""
        callback = self.custom_trace_id_callback
        if not callable(callback):
            print_warn_msg("Parameter custom_trace_id_callback is not callable, reset it to default.")
            return None
        try:
            answer = callback()
        except Exception as e:  # noqa: BLE001 - whatever the user's callback raises, fall back
            print_warn_msg(f"Parameter custom_trace_id_callback raised an exception: {e}, reset it to default.")
            return None
        if isinstance(answer, str) and len(answer) <= self.MAX_TRACE_ID_LEN:
            return answer
        print_warn_msg(f"Parameter custom_trace_id_callback should return str(max length: "
                       f"{self.MAX_TRACE_ID_LEN}), reset it to default.")
        return None

    # --- profiler_info.json ---------------------------------------------------------------

    def _write_profiler_info(self):
        from torch_npu.utils.collect_env import get_cann_version, get_torch_npu_version

        common = {"activities": sorted(str(a) for a in self.activities),
                  "schedule": _schedule_summary(self.schedule)}
        common.update((name, getattr(self, name)) for name in _BOOLEAN_OPTIONS)
        info = {Constant.CONFIG: {Constant.COMMON_CONFIG: common,
                                  Constant.EXPERIMENTAL_CONFIG: self.experimental_config.to_dict()}}
        info[Constant.START_INFO] = dict(zip(
            (Constant.SyscntEable, Constant.SysCntFreq, Constant.StartCnt, Constant.StartMonotonic),
            (self.syscnt_enable, self.freq, self.start_cnt, self.start_monotonic)))
        info[Constant.END_INFO] = {Constant.FWK_END_TIME: time.time_ns(),
                                   Constant.FWK_END_MONOTONIC: _get_monotonic()}
        info[Constant.TORCH_NPU_VERSION] = "".join(c for c in get_torch_npu_version() if c not in "' ")
        info[Constant.CANN_VERSION] = get_cann_version()
        # vNPU's own: what ran the profile, and the chip the cost model stands for (VNPU_CHIP)
        info["torch_version"] = torch.__version__
        info["device"] = "vNPU (virtual Ascend NPU on the host CPU)"
        info["device_name"] = torch.npu.get_device_name() if torch.npu.is_available() else ""

        file_name = "profiler_info.json"
        rank = _job_rank()
        if rank is not None:
            info[Constant.RANK_ID] = rank
            file_name = f"profiler_info_{rank}.json"
        FileManager.create_json_file_by_path(os.path.join(os.path.realpath(self.prof_path), file_name), info,
                                             indent=4)

    # --- profiler_metadata.json -----------------------------------------------------------

    def _write_metadata(self):
        # after add_metadata's values: the environment (text export), the job, the trace id
        if Constant.Text in self.experimental_config.export_type:
            self.metadata.update(collect_env_vars())
        self.metadata.update(_distributed_metadata(self.PARALLEL_GROUP_KEY))
        self.metadata[self.TRACE_ID_KEY] = self.trace_id
        if ProfPathCreator().is_prof_inited:
            FileManager.create_json_file_by_path(os.path.join(self.prof_path, Constant.PROFILER_META_DATA),
                                                 self.metadata)
            self.metadata.clear()  # the schedule's next cycle starts from what add_metadata gives it
        else:
            print_warn_msg("Profiler is not initialized. Skip this metadata.")


def _distributed_metadata(groups_key):
    """The job's shape and this rank's hccl groups (under groups_key), when torch.distributed is up.

    Best effort: what could not be had is left out with a warning, and the
    profile is written without it.
    """
    found = {}
    if not _distributed_ready():
        return found
    dist = torch.distributed
    try:
        found["distributed_args"] = {"rank": dist.get_rank(), "world_size": dist.get_world_size(),
                                     "backend": dist.get_backend()}
        groups = _hccl_communicators()
    except Exception as err:  # noqa: BLE001
        print_warn_msg(f"Failed to get parallel group info, Exception: {err}.")
        return found
    if groups:
        found[groups_key] = groups
    return found
