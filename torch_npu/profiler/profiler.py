"""torch_npu.profiler.profile, tensorboard_trace_handler, schedule, analyse.

``profile`` is torch.profiler.profile with torch_npu's arguments
(ProfilerActivity.NPU is PrivateUse1: the device activity of
csrc/profiler). ``tensorboard_trace_handler(dir_name)`` writes each
profile as torch_npu does::

    {dir_name}/{worker_name}_{pid}_{YYYYmmddHHMMSSmmm}_ascend_pt/
        profiler_info.json         the profile's configuration and versions
        profiler_metadata.json     add_metadata()'s values, the distributed setup
        FRAMEWORK/torch.trace.json the raw trace (what analyse() reads)
        ASCEND_PROFILER_OUTPUT/    trace_view.json, kernel_details.csv,
                                   op_statistic.csv, operator_details.csv,
                                   step_trace_time.csv, and with profile_memory
                                   operator_memory.csv / memory_record.csv,
                                   with hccl communication.json

With ``analyse_flag=False`` only the raw data is written; ``analyse(path)``
builds ASCEND_PROFILER_OUTPUT/ later, offline.
"""

import datetime
import gzip
import json
import os
import pathlib
import shutil
import warnings
from enum import Enum

import torch
import torch.profiler as _torch_profiler

from torch_npu.profiler import _session, analysis
from torch_npu.profiler.experimental_config import _ExperimentalConfig
from torch_npu.profiler._flops_hook import FlopsHookManager
from torch_npu.profiler._profiler_path_creator import ProfPathCreator, _check_writable
from torch_npu.profiler.scheduler import ProfilerAction, Schedule as schedule  # torch_npu's names

__all__ = ["ProfilerActivity", "ProfilerAction", "analyse", "profile", "schedule", "supported_activities",
           "tensorboard_trace_handler"]


# torch.profiler's own sessions claim too, so that mixing it with torch_npu.profiler
# gives an error instead of a Kineto crash.
_session.install()


class ProfilerActivity(Enum):
    CPU = "CPU"
    NPU = "NPU"


def _torch_activity(activity):
    if activity in (ProfilerActivity.NPU, _torch_profiler.ProfilerActivity.PrivateUse1):
        return _torch_profiler.ProfilerActivity.PrivateUse1
    if activity in (ProfilerActivity.CPU, _torch_profiler.ProfilerActivity.CPU):
        return _torch_profiler.ProfilerActivity.CPU
    raise ValueError(f"Invalid profiler activity {activity!r}: expected torch_npu.profiler.ProfilerActivity.CPU or "
                     f".NPU")


def supported_activities():
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}


def _rank():
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", -1))


class _NpuProfileMixin:
    """What torch_npu's profiles add to torch's (profile and _KinetoProfile):
    torch_npu's activities and experimental config, one profiling session per
    process, the FLOPs ranges, and the raw-data folder each trace writes
    (ProfPathCreator)."""

    def _npu_setup(self, activities, experimental_config):
        """Records torch_npu's arguments; returns the torch activities to profile."""
        if activities is None:
            activities = [ProfilerActivity.CPU, ProfilerActivity.NPU]
        if experimental_config is None:
            experimental_config = _ExperimentalConfig()
        if not isinstance(experimental_config, _ExperimentalConfig):
            warnings.warn("Invalid parameter experimental_config, which must be a "
                          "torch_npu.profiler._ExperimentalConfig, reset it to default.")
            experimental_config = _ExperimentalConfig()
        self.npu_experimental_config = experimental_config
        self.npu_activities = sorted({a.value if isinstance(a, ProfilerActivity) else _torch_activity(a).name
                                      for a in activities})
        self._npu_metadata = {}
        self._npu_start = datetime.datetime.now()
        self._npu_folder = None
        return sorted({_torch_activity(a) for a in activities}, key=lambda a: a.value)

    def start(self):
        # Claimed before Kineto starts, under a lock: the start drops the GIL,
        # so a flag set after it let two threads both start (and crash
        # Kineto). Note [One profiling session per process] in _session.py.
        _session.claim_for_npu_profile(self)
        try:
            super().start()
        except BaseException:
            _session.release_npu_profile(self)
            raise
        if self._counts_flops_as_ranges():
            FlopsHookManager.install()

    def stop(self):
        try:
            if self._counts_flops_as_ranges():
                FlopsHookManager.uninstall()
            super().stop()
        finally:
            _session.release_npu_profile(self)

    def start_trace(self):
        # Each trace gets its folder when it starts, where the handler (if it
        # is tensorboard_trace_handler) says, else at the default place.
        handler = getattr(self, "on_trace_ready", None)
        creator = ProfPathCreator()
        creator.init(worker_name=getattr(handler, "worker_name", None), dir_name=getattr(handler, "dir_name", None))
        self._npu_folder = creator.create_prof_dir()
        self._npu_start = datetime.datetime.now()
        super().start_trace()

    def stop_trace(self):
        super().stop_trace()
        if self._npu_folder is not None:
            _write_raw_data(self, self._npu_folder)

    def _counts_flops_as_ranges(self):
        # with_flops and mstx: the operators' FLOPs as "mfu_flops" ranges (torch_npu/profiler/_flops_hook.py)
        return self.with_flops and self.npu_experimental_config.tx_enabled

    def export_chrome_trace(self, path):
        _make_parent(path)
        raw = None if self._npu_folder is None else self._npu_folder / analysis.RAW_TRACE
        if raw is not None and raw.is_file():
            # Kineto saves a trace once; the stop already saved it as the folder's raw data.
            if str(path).endswith(".gz"):
                with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            else:
                shutil.copyfile(raw, path)
            return None
        return super().export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        _make_parent(path)
        return super().export_stacks(path, metric)

    def export_memory_timeline(self, output_path, device=None):
        """torch's export_memory_timeline; torch_npu names the file argument output_path."""
        _make_parent(output_path)
        return super().export_memory_timeline(output_path, device)

    def add_metadata(self, key, value):
        """Recorded in profiler_metadata.json (and the trace)."""
        if not isinstance(key, str) or not isinstance(value, str):
            warnings.warn("The key and value of add_metadata must be str; the metadata is not recorded.")
            return
        self._npu_metadata[key] = value
        super().add_metadata(key, value)

    def add_metadata_json(self, key, value):
        if not isinstance(key, str) or not isinstance(value, str):
            warnings.warn("The key and value of add_metadata_json must be str; the metadata is not recorded.")
            return
        try:
            self._npu_metadata[key] = json.loads(value)
        except ValueError:
            warnings.warn(f"add_metadata_json: the value for {key!r} is not JSON; the metadata is not recorded.")
            return
        super().add_metadata_json(key, value)

    def _npu_info(self):
        from torch_npu import __version__ as npu_version
        return {
            "config": {
                "common_config": {
                    "activities": self.npu_activities,
                    "schedule": {} if getattr(self, "schedule", None) is None else {"enabled": True},
                    "record_shapes": self.record_shapes,
                    "profile_memory": self.profile_memory,
                    "with_stack": self.with_stack,
                    "with_flops": self.with_flops,
                    "with_modules": self.with_modules,
                },
                "experimental_config": self.npu_experimental_config.to_dict(),
            },
            "start_info": {"start_time": self._npu_start.isoformat()},
            "end_info": {"end_time": datetime.datetime.now().isoformat()},
            "torch_npu_version": npu_version,
            "torch_version": torch.__version__,
            "cann_version": torch.npu.get_cann_version() if hasattr(torch.npu, "get_cann_version") else "",
            "rank_id": _rank(),
            "device": "vNPU (virtual Ascend NPU on the host CPU)",
            # The chip the cost model estimates for (VNPU_CHIP).
            "device_name": torch.npu.get_device_name() if torch.npu.is_available() else "",
        }


class _KinetoProfile(_NpuProfileMixin, _torch_profiler.profiler._KinetoProfile):
    """A profile without a schedule: ``start()``, the work, ``stop()``, then the
    exports; its raw data is written to its ``*_ascend_pt`` folder at stop, for
    ``analyse()`` to read."""

    def __init__(self, *, activities=None, record_shapes=False, profile_memory=False, with_stack=False,
                 with_flops=False, with_modules=False, experimental_config=None, **kwargs):
        super().__init__(activities=self._npu_setup(activities, experimental_config), record_shapes=record_shapes,
                         profile_memory=profile_memory, with_stack=with_stack, with_flops=with_flops,
                         with_modules=with_modules, **_torch_options(with_stack, kwargs))


class profile(_NpuProfileMixin, _torch_profiler.profile):
    """``with torch_npu.profiler.profile(activities=[...NPU], schedule=...,
    on_trace_ready=tensorboard_trace_handler(dir)) as prof: ... prof.step()``."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, use_cuda=None, **kwargs):
        super().__init__(activities=self._npu_setup(activities, experimental_config), schedule=schedule,
                         on_trace_ready=on_trace_ready, record_shapes=record_shapes, profile_memory=profile_memory,
                         with_stack=with_stack, with_flops=with_flops, with_modules=with_modules,
                         **_torch_options(with_stack, kwargs))


def _torch_options(with_stack, kwargs):
    """torch.profiler's remaining options. torch keeps the Python stacks of its
    events for export_stacks() only with its experimental config's verbose
    flag; torch_npu's export_stacks() works with with_stack alone, so a
    profile with stacks asks for it."""
    if with_stack and "experimental_config" not in kwargs:
        kwargs = dict(kwargs, experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True))
    return kwargs


def _make_parent(path):
    parent = os.path.dirname(os.path.abspath(str(path)))
    os.makedirs(parent, exist_ok=True)


def _write_raw_data(prof, folder):
    """A trace's raw data in its folder: the chrome trace (what analyse() reads),
    profiler_info.json and profiler_metadata.json."""
    (folder / "FRAMEWORK").mkdir(parents=True, exist_ok=True)
    raw = folder / analysis.RAW_TRACE
    tmp = raw.with_name(raw.name + ".tmp")
    torch.profiler.profiler._KinetoProfile.export_chrome_trace(prof, str(tmp))
    os.replace(tmp, raw)
    info = prof._npu_info() if isinstance(prof, _NpuProfileMixin) else {"config": {}}
    analysis.write_atomically(folder / "profiler_info.json", json.dumps(info, indent=1))
    metadata = dict(getattr(prof, "_npu_metadata", {}))
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        metadata["distributed_args"] = {"rank": torch.distributed.get_rank(),
                                        "world_size": torch.distributed.get_world_size(),
                                        "backend": torch.distributed.get_backend()}
    analysis.write_atomically(folder / "profiler_metadata.json", json.dumps(metadata, indent=1))


def tensorboard_trace_handler(dir_name=None, worker_name=None, analyse_flag=True, async_mode=False):
    """The on_trace_ready callback writing torch_npu's ``*_ascend_pt`` folders
    under ``dir_name`` (default: $ASCEND_WORK_PATH/profiling_data or ./)."""
    if dir_name is None:
        work = os.environ.get("ASCEND_WORK_PATH")
        dir_name = os.path.join(work, "profiling_data") if work else "."
    if not isinstance(dir_name, (str, os.PathLike)):
        raise TypeError(f"dir_name must be a str, but got {type(dir_name).__name__}")
    if worker_name is not None and not isinstance(worker_name, str):
        warnings.warn("Invalid parameter worker_name, reset it to default.")
        worker_name = None
    if not isinstance(analyse_flag, bool):
        warnings.warn("Invalid parameter analyse_flag, reset it to True.")
        analyse_flag = True
    root = pathlib.Path(dir_name).expanduser().resolve()
    _check_writable(root)

    def handler(prof):
        folder = getattr(prof, "_npu_folder", None)
        if folder is None or not (folder / analysis.RAW_TRACE).is_file():
            # a profile of torch's own: its raw data is written here
            creator = ProfPathCreator()
            creator.init(worker_name=worker_name, dir_name=str(root))
            folder = creator.create_prof_dir()
            _write_raw_data(prof, folder)
        if analyse_flag:
            analysis.write_outputs(folder)
        handler.folders.append(folder)

    handler.folders = []
    handler.dir_name = str(root)  # where the profile makes its folders (ProfPathCreator)
    handler.worker_name = worker_name
    return handler


def analyse(profiler_path, max_process_number=None, export_type=None):
    """Builds ASCEND_PROFILER_OUTPUT/ offline for a ``*_ascend_pt`` folder, or
    for every one under ``profiler_path``."""
    path = pathlib.Path(profiler_path)
    if not path.is_dir():
        raise ValueError(f"analyse: '{profiler_path}' is not a directory of profiling data")
    folders = [path] if path.name.endswith("_ascend_pt") else sorted(path.glob("*_ascend_pt"))
    done = []
    for folder in folders:
        if not (folder / analysis.RAW_TRACE).is_file():
            warnings.warn(f"analyse: {folder} has no raw trace ({analysis.RAW_TRACE}); skipped")
            continue
        done.append(analysis.write_outputs(folder))
    if not done:
        raise ValueError(f"analyse: no profiling data (a *_ascend_pt folder with {analysis.RAW_TRACE}) under "
                         f"'{profiler_path}'")
    return done
