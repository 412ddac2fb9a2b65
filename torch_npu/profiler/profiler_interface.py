"""One profile's life, below the schedule: ``_ProfInterface``.

A profile (torch_npu.profiler.profile, _KinetoProfile) owns one
``_ProfInterface``; its schedule decides when (``ProfActionController``,
_profiler_action_controller.py) and this class does the steps, over the
native session of ``torch_npu._C._profiler`` (_c_profiler.py):

- ``init_trace``: makes the profile's ``*_ascend_pt`` folder
  (ProfPathCreator) and opens the native session on it; picks the trace id.
- ``warmup_trace``: prepares the recording.
- ``start_trace``: records the start clocks, starts the recording, wraps the
  npu Event methods in "Event::<name>" ranges, and, as asked, the FLOPs
  ranges (with_flops and mstx) and the GC detector (gc_detect_threshold).
- ``stop_trace``: undoes those and stops the recording (after the device's
  work is done, when the NPU activity is on).
- ``finalize_trace``: writes the raw data (FRAMEWORK/torch.trace.json),
  profiler_info.json and profiler_metadata.json; ends the native session.
- ``analyse``: builds ASCEND_PROFILER_OUTPUT/ (analysis/_npu_profiler.py);
  a failure is reported as a warning, as torch_npu does, not raised.
"""

import functools
import os
import time
import uuid
from collections.abc import Callable

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


# --- "Event::<name>" ranges ----------------------------------------------------------
# While a profile records, each call of these npu Event methods is a range of
# its own in the trace, so the host's waits on events show up by name.

_EVENT_METHODS = ("record", "wait", "query", "elapsed_time", "synchronize")


def _event_range(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with torch.profiler.record_function(f"Event::{method.__name__}"):
            return method(*args, **kwargs)

    wrapper.origin_func = method
    return wrapper


def _enable_event_record():
    for name in _EVENT_METHODS:
        method = getattr(Event, name)
        if not hasattr(method, "origin_func"):  # wrapped once, however many profiles start
            setattr(Event, name, _event_range(method))


def _disable_event_record():
    for name in _EVENT_METHODS:
        wrapped = Event.__dict__.get(name)
        original = getattr(wrapped, "origin_func", None)
        if original is None:
            continue
        if getattr(Event.__mro__[1], name, None) is original:
            delattr(Event, name)  # inherited from torch.Event: inherit it again
        else:
            setattr(Event, name, original)


def _rank_id():
    """The rank a profile belongs to: $RANK, else the initialized process group's, else None."""
    rank = os.environ.get("RANK")
    if rank is None and torch.distributed.is_available() and torch.distributed.is_initialized():
        rank = torch.distributed.get_rank()
    return rank


class _ProfInterface:
    PARALLEL_GROUP_KEY = "parallel_group_info"
    TRACE_ID_KEY = "trace_id"
    MAX_TRACE_ID_LEN = 1024

    def __init__(self, activities=None, record_shapes=False, profile_memory=False, with_stack=False,
                 with_flops=False, with_modules=False, schedule=None, metadata=None, experimental_config=None,
                 custom_trace_id_callback=None):
        # Real torch_npu turns this interface off when msprof itself collects
        # (PROFILER_SAMPLECONFIG / PROFILING_MODE); vNPU has no msprof, so it is always on.
        self._is_env_valid = True
        self.prof_path = ""
        self.syscnt_enable = False
        self.freq = _get_freq()
        self.start_cnt = 0
        self.start_monotonic = 0
        self.activities = set(activities) if activities else supported_activities()
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.experimental_config = _ExperimentalConfig() if experimental_config is None else experimental_config
        self.schedule = schedule
        self.metadata = {} if metadata is None else metadata
        self.custom_trace_id_callback = custom_trace_id_callback
        self.trace_id = ""
        self.gc_detector = None
        self.kineto_profile = None  # vNPU's: the last recording's torch.autograd.profiler.profile
        self._check_params()

    # --- the steps --------------------------------------------------------------------

    def init_trace(self):
        self.prof_path = str(ProfPathCreator().create_prof_dir())
        _init_profiler(self.prof_path, self.activities)
        self.trace_id = self.create_trace_id()

    def _native_config(self):
        return NpuProfilerConfig(self.prof_path, self.record_shapes, self.profile_memory, self.with_stack,
                                 self.with_flops, self.with_modules, self.experimental_config())

    def warmup_trace(self):
        _warmup_profiler(self._native_config(), self.activities)

    def start_trace(self):
        config = self._native_config()
        self.syscnt_enable = _get_syscnt_enable()
        if self.syscnt_enable:
            self.freq = _get_freq()
            self.start_cnt = _get_syscnt()
        self.start_monotonic = _get_monotonic()
        _start_profiler(config, self.activities)
        _enable_event_record()
        if self._counts_flops_as_ranges():
            FlopsHookManager.install()
        self.start_gc_detect()

    def stop_trace(self):
        if ProfilerActivity.NPU in self.activities:
            torch.npu.synchronize()  # the device's tasks of the profile end inside it
        if self._counts_flops_as_ranges():
            FlopsHookManager.uninstall()
        stopped = _stop_profiler()
        if stopped is not None:
            self.kineto_profile = stopped
        self.stop_gc_detect()
        _disable_event_record()

    def finalize_trace(self):
        _finalize_profiler()
        self._dump_profiler_info()
        self._dump_metadata()
        ProfPathCreator().is_prof_inited = False

    def delete_prof_dir(self):
        ProfPathCreator().delete_prof_dir()

    def analyse(self, analysis_type=Constant.TENSORBOARD_TRACE_HANDLER, output_path=None, **kwargs):
        try:
            NpuProfiler.analyse(self.prof_path, analysis_type, output_path, **kwargs)
        except Exception as e:  # noqa: BLE001 - torch_npu reports a failed analysis, the program goes on
            print_warn_msg(f"Profiling data parsing failed, error: {e}")

    def _counts_flops_as_ranges(self):
        # with_flops and mstx: the operators' FLOPs as "mfu_flops" ranges (_flops_hook.py)
        return self.with_flops and self.experimental_config.tx_enabled

    # --- garbage collections ------------------------------------------------------------

    def check_gc_detect_enable(self):
        return ProfilerActivity.CPU in self.activities and self.experimental_config.with_gc

    def start_gc_detect(self):
        if self.check_gc_detect_enable():
            self.gc_detector = ProfGCDetector(self.experimental_config.gc_detect_threshold)
            self.gc_detector.start()

    def stop_gc_detect(self):
        if self.gc_detector is not None:
            self.gc_detector.stop()
            self.gc_detector = None

    # --- the trace id -------------------------------------------------------------------

    def default_trace_id(self):
        return f"{uuid.uuid4().int:032X}"

    def create_trace_id(self):
        """custom_trace_id_callback's id when it gives a usable one, else a random one (32 hex digits)."""
        callback = self.custom_trace_id_callback
        if not callback:
            return self.default_trace_id()
        if not isinstance(callback, Callable):
            print_warn_msg("Parameter custom_trace_id_callback is not callable, reset it to default.")
            return self.default_trace_id()
        try:
            trace_id = callback()
        except Exception as e:  # noqa: BLE001 - the user's callback: any failure falls back
            print_warn_msg(f"Parameter custom_trace_id_callback raised an exception: {e}, reset it to default.")
            return self.default_trace_id()
        if isinstance(trace_id, str) and len(trace_id) <= self.MAX_TRACE_ID_LEN:
            return trace_id
        print_warn_msg(f"Parameter custom_trace_id_callback should return str(max length: {self.MAX_TRACE_ID_LEN}), "
                       f"reset it to default.")
        return self.default_trace_id()

    # --- checks and files ---------------------------------------------------------------

    def _check_params(self):
        if any(activity not in supported_activities() for activity in self.activities):
            print_warn_msg("Invalid activities, only CPU and NPU are supported, reset it to default.")
            self.activities = supported_activities()
        for name in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"):
            if not isinstance(getattr(self, name), bool):
                print_warn_msg(f"Parameter {name} is of boolean type, reset it to False.")
                setattr(self, name, False)
        if not isinstance(self.experimental_config, _ExperimentalConfig):
            print_warn_msg("Parameter experimental_config is an instance of _ExperimentalConfig, reset it to default.")
            self.experimental_config = _ExperimentalConfig()
        if ProfilerActivity.CPU not in self.activities and self.experimental_config.with_gc:
            print_warn_msg("GC detect will not take effect while ProfilerActivity.CPU is not set.")

    def _info(self):
        from torch_npu.utils.collect_env import get_cann_version, get_torch_npu_version
        # the schedule's parameters (a Schedule's wait, active, ...): its public plain values
        schedule = {k: v for k, v in getattr(self.schedule, "__dict__", {}).items()
                    if not k.startswith("_") and isinstance(v, (bool, int, float, str))} if self.schedule else None
        info = {
            Constant.CONFIG: {
                Constant.COMMON_CONFIG: {
                    "activities": sorted(map(str, self.activities)),
                    "schedule": schedule or None,
                    "record_shapes": self.record_shapes,
                    "profile_memory": self.profile_memory,
                    "with_stack": self.with_stack,
                    "with_flops": self.with_flops,
                    "with_modules": self.with_modules,
                },
                Constant.EXPERIMENTAL_CONFIG: self.experimental_config.to_dict(),
            },
            Constant.START_INFO: {
                Constant.SyscntEable: self.syscnt_enable,
                Constant.SysCntFreq: self.freq,
                Constant.StartCnt: self.start_cnt,
                Constant.StartMonotonic: self.start_monotonic,
            },
            Constant.END_INFO: {
                Constant.FWK_END_TIME: time.time_ns(),
                Constant.FWK_END_MONOTONIC: _get_monotonic(),
            },
            Constant.TORCH_NPU_VERSION: get_torch_npu_version().replace("'", "").replace(" ", ""),
            Constant.CANN_VERSION: get_cann_version(),
            # vNPU's: what ran the profile, and the chip the cost model estimates for (VNPU_CHIP)
            "torch_version": torch.__version__,
            "device": "vNPU (virtual Ascend NPU on the host CPU)",
            "device_name": torch.npu.get_device_name() if torch.npu.is_available() else "",
        }
        return info

    def _dump_profiler_info(self):
        info = self._info()
        rank = _rank_id()
        name = "profiler_info.json"
        if rank is not None:
            name = f"profiler_info_{rank}.json"
            info[Constant.RANK_ID] = rank
        FileManager.create_json_file_by_path(os.path.join(os.path.realpath(self.prof_path), name), info, indent=4)

    def _dump_metadata(self):
        if Constant.Text in self.experimental_config.export_type:
            self.metadata.update(collect_env_vars())
        self._add_group_info_to_metadata()
        self.metadata[self.TRACE_ID_KEY] = self.trace_id
        if not ProfPathCreator().is_prof_inited:
            print_warn_msg("Profiler is not initialized. Skip this metadata.")
            return
        FileManager.create_json_file_by_path(os.path.join(self.prof_path, Constant.PROFILER_META_DATA), self.metadata)
        self.metadata.clear()

    def _add_group_info_to_metadata(self):
        """The hccl process groups of this rank, by communicator name, and the job's size."""
        dist = torch.distributed
        if not (dist.is_available() and dist.is_initialized()):
            return
        try:
            self.metadata["distributed_args"] = {"rank": dist.get_rank(), "world_size": dist.get_world_size(),
                                                 "backend": dist.get_backend()}
            groups = _hccl_groups(dist)
        except Exception as err:  # noqa: BLE001 - metadata is best effort
            print_warn_msg(f"Failed to get parallel group info, Exception: {err}.")
            return
        if groups:
            self.metadata[self.PARALLEL_GROUP_KEY] = groups


def _hccl_groups(dist):
    from torch.distributed.distributed_c10d import _world
    rank = dist.get_rank()
    default = dist.distributed_c10d._get_default_group()
    named = [(group, None) for group, config in _world.pg_map.items()
             if str(config[0]).lower() == "hccl" and group is not default]
    if str(dist.get_backend(default)).lower() == "hccl":
        named.append((default, "default_group"))
    groups = {}
    for group, name in named:
        hccl = group._get_backend(torch.device("npu"))
        comm_name = hccl.get_hccl_comm_name(rank, init_comm=False)
        if not comm_name:
            continue
        if name is None:
            name = hccl.options.hccl_config.get("group_name", "")
        groups[comm_name] = {"group_name": name, "group_rank": dist.get_group_rank(group, rank),
                             "global_ranks": dist.get_process_group_ranks(group)}
    return groups
