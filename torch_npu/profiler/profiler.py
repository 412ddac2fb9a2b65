"""torch_npu.profiler.profile, tensorboard_trace_handler, schedule, analyse.

``profile`` is torch.profiler.profile with torch_npu's arguments
(ProfilerActivity.NPU is PrivateUse1: the device activity of
csrc/profiler). ``tensorboard_trace_handler(dir_name)`` writes each
profile as torch_npu does::

    {dir_name}/{worker_name}_{pid}_{YYYYmmddHHMMSSmmm}_ascend_pt/
        profiler_info.json         the profile's configuration and versions
        profiler_metadata.json     add_metadata()'s values, the distributed setup
        FRAMEWORK/torch.trace.json the raw trace (what analyse() reads)
        PROF_<n>_<time>_<id>/      with ProfilerActivity.NPU: CANN's raw data
                                   (_cann_raw_data.py)
        ASCEND_PROFILER_OUTPUT/    trace_view.json, kernel_details.csv,
                                   op_statistic.csv, operator_details.csv,
                                   step_trace_time.csv, and with profile_memory
                                   operator_memory.csv / memory_record.csv,
                                   with hccl communication.json; with
                                   export_type "db" ascend_pytorch_profiler.db
                                   and analysis.db (analysis/_db_export.py)

With ``analyse_flag=False`` only the raw data is written; ``analyse(path)``
builds ASCEND_PROFILER_OUTPUT/ later, offline.
"""

import gzip
import json
import os
import pathlib
import shutil
import warnings

import torch
import torch.profiler as _torch_profiler

from torch_npu._C._profiler import ProfilerActivity
from torch_npu.profiler import _session, analysis
from torch_npu.profiler._profiler_action_controller import ProfActionController
from torch_npu.profiler._profiler_path_creator import ProfPathCreator, _check_writable
from torch_npu.profiler.analysis._npu_profiler import NpuProfiler
from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_warn_msg
from torch_npu.profiler.profiler_interface import _ProfInterface, supported_activities
from torch_npu.profiler.scheduler import ProfilerAction, Schedule as schedule  # torch_npu's names

# Real torch_npu's: ProfilerActivity, ProfilerAction and schedule are here by
# name, torch_npu.profiler's to list.
__all__ = ["supported_activities", "analyse", "tensorboard_trace_handler", "profile"]


# torch.profiler's own sessions claim too, so that mixing it with torch_npu.profiler
# gives an error instead of a Kineto crash.
_session.install()

_TORCH_ACTIVITY = {ProfilerActivity.CPU: _torch_profiler.ProfilerActivity.CPU,
                   ProfilerActivity.NPU: _torch_profiler.ProfilerActivity.PrivateUse1}


def _npu_activity(activity):
    """torch_npu's activity for one of torch_npu's or torch's (PrivateUse1 is the npu)."""
    if isinstance(activity, ProfilerActivity):
        return activity
    for npu, torch_activity in _TORCH_ACTIVITY.items():
        if activity == torch_activity:
            return npu
    raise ValueError(f"Invalid profiler activity {activity!r}: expected torch_npu.profiler.ProfilerActivity.CPU or "
                     f".NPU")


class _NpuProfileMixin:
    """What torch_npu's profiles (profile and _KinetoProfile) are over torch's:
    each step of the recording is its ``_ProfInterface``'s (``prof_if``,
    profiler_interface.py), which runs the npu profiler's native session and
    writes the ``*_ascend_pt`` folder; torch's class keeps the rest
    (key_averages(), events(), the exports, add_metadata into the trace).
    One profiling session per process (_session.py)."""

    def _npu_setup(self, activities, experimental_config, record_shapes, profile_memory, with_stack, with_flops,
                   with_modules, schedule=None, custom_trace_id_callback=None):
        """Makes the profile's _ProfInterface; returns the torch activities to give torch's class."""
        activities = supported_activities() if activities is None else {_npu_activity(a) for a in activities}
        self.prof_if = _ProfInterface(activities=activities, record_shapes=record_shapes,
                                      profile_memory=profile_memory, with_stack=with_stack, with_flops=with_flops,
                                      with_modules=with_modules, schedule=schedule, metadata={},
                                      experimental_config=experimental_config,
                                      custom_trace_id_callback=custom_trace_id_callback)
        return sorted((_TORCH_ACTIVITY[a] for a in self.prof_if.activities), key=lambda a: a.value)

    # torch's class keeps the recording's autograd profile as .profiler: here it
    # is the one the native session recorded into.
    @property
    def profiler(self):
        prof_if = self.__dict__.get("prof_if")
        return None if prof_if is None else prof_if.kineto_profile

    @profiler.setter
    def profiler(self, value):
        self.prof_if.kineto_profile = value

    def start(self):
        # Claimed before Kineto starts, under a lock: the start drops the GIL,
        # so a flag set after it let two threads both start (and crash
        # Kineto). Note [One profiling session per process] in _session.py.
        _session.claim_for_npu_profile(self)
        try:
            # The folders of this profile's traces go where its handler says
            # (tensorboard_trace_handler), else to the default place.
            handler = getattr(self, "on_trace_ready", None)
            ProfPathCreator().init(worker_name=getattr(handler, "worker_name", None),
                                   dir_name=getattr(handler, "dir_name", None))
            super().start()
        except BaseException:
            _session.release_npu_profile(self)
            raise
        # As in torch_npu, an execution trace observer records from the profile's start to its stop,
        # whatever the schedule records.
        if getattr(self, "execution_trace_observer", None):
            self.execution_trace_observer.start()

    def stop(self):
        try:
            super().stop()
        finally:
            _session.release_npu_profile(self)
        if getattr(self, "execution_trace_observer", None):
            self.execution_trace_observer.stop()

    # torch's steps of a recording (what _KinetoProfile.start()/stop() call)
    def prepare_trace(self):
        self.prof_if.init_trace()

    def start_trace(self):
        self.prof_if.start_trace()

    def stop_trace(self):
        self.prof_if.stop_trace()
        self.prof_if.finalize_trace()

    @property
    def _npu_folder(self):
        """The folder of the last trace (a pathlib.Path), or None."""
        return pathlib.Path(self.prof_if.prof_path) if self.prof_if.prof_path else None

    def export_chrome_trace(self, path):
        _make_parent(path)
        raw = None if self._npu_folder is None else self._npu_folder / analysis.RAW_TRACE
        if raw is not None and raw.is_file():
            # Kineto saves a trace once; the finalize already saved it as the folder's raw data.
            if str(path).endswith(".gz"):
                with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            else:
                shutil.copyfile(raw, path)
            return None
        return super().export_chrome_trace(path)

    def export_stacks(self, path, metric=Constant.METRIC_CPU_TIME):
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
        self.prof_if.metadata[key] = value
        super().add_metadata(key, value)

    def add_metadata_json(self, key, value):
        if not isinstance(key, str) or not isinstance(value, str):
            warnings.warn("The key and value of add_metadata_json must be str; the metadata is not recorded.")
            return
        try:
            self.prof_if.metadata[key] = json.loads(value)
        except ValueError:
            warnings.warn(f"add_metadata_json: the value for {key!r} is not JSON; the metadata is not recorded.")
            return
        super().add_metadata_json(key, value)


class _KinetoProfile(_NpuProfileMixin, _torch_profiler.profiler._KinetoProfile):
    """A profile without a schedule: ``start()``, the work, ``stop()``, then the
    exports; its raw data is written to its ``*_ascend_pt`` folder at stop, for
    ``analyse()`` to read."""

    def __init__(self, *, activities=None, record_shapes=False, profile_memory=False, with_stack=False,
                 with_flops=False, with_modules=False, experimental_config=None, custom_trace_id_callback=None,
                 **kwargs):
        torch_activities = self._npu_setup(activities, experimental_config, record_shapes, profile_memory, with_stack,
                                           with_flops, with_modules, custom_trace_id_callback=custom_trace_id_callback)
        super().__init__(activities=torch_activities, record_shapes=record_shapes, profile_memory=profile_memory,
                         with_stack=with_stack, with_flops=with_flops, with_modules=with_modules, **kwargs)


class profile(_NpuProfileMixin, _torch_profiler.profile):
    """``with torch_npu.profiler.profile(activities=[...NPU], schedule=...,
    on_trace_ready=tensorboard_trace_handler(dir)) as prof: ... prof.step()``.
    torch's class steps the schedule; each change of action runs torch_npu's
    steps (ProfActionController, _profiler_action_controller.py)."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, use_cuda=None, custom_trace_id_callback=None, **kwargs):
        torch_activities = self._npu_setup(activities, experimental_config, record_shapes, profile_memory, with_stack,
                                           with_flops, with_modules, schedule=schedule,
                                           custom_trace_id_callback=custom_trace_id_callback)
        super().__init__(activities=torch_activities, schedule=schedule, on_trace_ready=on_trace_ready,
                         record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules, **kwargs)
        self.action_controller = ProfActionController(self, self.prof_if, self.on_trace_ready)

    def _transit_action(self, prev_action, current_action):
        self.action_controller.transit_action(prev_action, current_action)


def _make_parent(path):
    parent = os.path.dirname(os.path.abspath(str(path)))
    os.makedirs(parent, exist_ok=True)


def _write_torch_profile(prof, folder):
    """The raw data of a torch.profiler profile (not torch_npu's) in a folder of its own."""
    (folder / "FRAMEWORK").mkdir(parents=True, exist_ok=True)
    raw = folder / analysis.RAW_TRACE
    tmp = raw.with_name(raw.name + ".tmp")
    torch.profiler.profiler._KinetoProfile.export_chrome_trace(prof, str(tmp))
    os.replace(tmp, raw)
    analysis._write_atomically(folder / "profiler_info.json", json.dumps({"config": {}}, indent=1))


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
        prof_if = getattr(prof, "prof_if", None)
        if prof_if is None:
            # a profile of torch's own: its raw data is written here
            creator = ProfPathCreator()
            creator.init(worker_name=worker_name, dir_name=str(root))
            folder = creator.create_prof_dir()
            _write_torch_profile(prof, folder)
            if analyse_flag:
                analysis.write_outputs(folder)
        elif analyse_flag:
            prof_if.analyse()  # a failed analysis warns, as in torch_npu

    handler.dir_name = str(root)  # where the profile makes its folders (ProfPathCreator)
    handler.worker_name = worker_name
    return handler


def analyse(profiler_path, max_process_number=None, export_type=None):
    """Builds ASCEND_PROFILER_OUTPUT/ offline for a ``*_ascend_pt`` folder, or
    for every one under ``profiler_path`` (one after the other:
    ``max_process_number`` is accepted and not needed). ``export_type``
    ("text", "db" or both) overrides the one each profile was made with."""
    path = pathlib.Path(profiler_path)
    if not path.is_dir():
        raise ValueError(f"analyse: '{profiler_path}' is not a directory of profiling data")
    if export_type is not None:
        requested = [export_type] if isinstance(export_type, str) else export_type
        if not isinstance(requested, list) or not requested or not all(
                t in (Constant.Text, Constant.Db) for t in requested):
            print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to None.")
            export_type = None
        else:
            export_type = sorted(set(requested))
    done = NpuProfiler.analyse(str(path), export_type=export_type)
    if not done:
        raise ValueError(f"analyse: no profiling data (a *_ascend_pt folder with {analysis.RAW_TRACE}) under "
                         f"'{profiler_path}'")
    return done
