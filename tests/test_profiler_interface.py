"""torch_npu.profiler's layers below the API, as real torch_npu has them:
torch_npu._C._profiler (the native session, profiler/_c_profiler.py),
_ExperimentalConfig's validation, _ProfInterface (one profile's steps),
ProfActionController (what a change of schedule action does), the GC
detector, and the profiler's console warnings."""

import gc
import json
import pathlib
import pickle
import re
import struct

import pytest
import torch
import torch_npu  # noqa: F401
import torch_npu.profiler as npu_profiler
from torch_npu.profiler import analysis
from torch_npu.profiler._profiler_action_controller import ProfActionController
from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.profiler_interface import _ProfInterface
from torch_npu.profiler.scheduler import ProfilerAction

NPU_ACTIVITIES = [npu_profiler.ProfilerActivity.CPU, npu_profiler.ProfilerActivity.NPU]
WARNING_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] \[WARNING\] \[\d+\] profiler\.py: (.*)$", re.M)


def _warnings(capsys):
    return WARNING_LINE.findall(capsys.readouterr().out)


@pytest.fixture(autouse=True)
def _warnings_printed(monkeypatch):
    # warnings print on rank 0 only, and not with TORCH_NPU_WARNING_DISABLE=1
    for name in ("RANK", "TORCH_NPU_WARNING_DISABLE", "TORCH_NPU_DISABLED_WARNING"):
        monkeypatch.delenv(name, raising=False)


# --- torch_npu._C._profiler ---------------------------------------------------------------

def test_native_module_has_real_torch_npus_name_and_types():
    import torch_npu._C._profiler as native
    from torch_npu._C._profiler import NpuProfilerConfig, ProfilerActivity, _ExperimentalConfig
    assert torch_npu._C._profiler is native and ProfilerActivity is npu_profiler.ProfilerActivity
    assert str(ProfilerActivity.NPU) == Constant.NPU_ACTIVITIES and str(ProfilerActivity.CPU) == Constant.CPU_ACTIVITIES
    config = npu_profiler._ExperimentalConfig(profiler_level="Level1", mstx=True, mstx_domain_include=["a"])()
    assert isinstance(config, _ExperimentalConfig)
    assert (config.trace_level, config.metrics, config.msprof_tx, config.mstx_domain_include) == (
        "Level1", "ACL_AICORE_PIPE_UTILIZATION", True, ["a"])
    assert pickle.loads(pickle.dumps(config)) == config
    with pytest.raises(TypeError, match="experimental_config"):
        NpuProfilerConfig("/tmp", False, False, False, False, False, npu_profiler._ExperimentalConfig())
    with pytest.raises(TypeError, match="trace_level must be str"):
        _ExperimentalConfig(trace_level=1)


def test_a_native_session_refuses_a_second_recording_and_a_warm_one_is_closed(tmp_path):
    from torch_npu._C._profiler import (NpuProfilerConfig, _finalize_profiler, _init_profiler, _start_profiler,
                                        _stop_profiler, _warmup_profiler)
    activities = npu_profiler.supported_activities()
    config = NpuProfilerConfig(str(tmp_path), False, False, False, False, False, npu_profiler._ExperimentalConfig()())
    # warmed up twice and never started: the finalize leaves Kineto idle
    _init_profiler(str(tmp_path), activities)
    _warmup_profiler(config, activities)
    _warmup_profiler(config, activities)
    _finalize_profiler()
    assert not (tmp_path / analysis.RAW_TRACE).exists()
    _init_profiler(str(tmp_path), activities)
    _start_profiler(config, activities)
    try:
        with pytest.raises(RuntimeError, match="Profiler is already enabled."):
            _start_profiler(config, activities)
        with pytest.raises(RuntimeError, match="Profiler is already enabled."):
            _init_profiler(str(tmp_path), activities)
        x = torch.randn(16, 16, device="npu")
        (x @ x).sum().item()
    finally:
        kineto = _stop_profiler()
        _finalize_profiler()
    assert any(e.device_type == torch.autograd.DeviceType.PrivateUse1 for e in kineto.function_events)
    trace = json.loads((tmp_path / analysis.RAW_TRACE).read_text())
    assert any(e.get("cat") == "kernel" and e.get("name") == "mm" for e in trace["traceEvents"])
    # after the warm session was closed, torch's own profiler still records device activity
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        (x @ x).sum().item()
    assert any(e.device_type == torch.autograd.DeviceType.PrivateUse1 for e in prof.events())


# --- _ExperimentalConfig ------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,attribute,expected,warning", [
    (dict(profiler_level="Level9"), "_profiler_level", "Level0", "Invalid parameter profiler_level"),
    (dict(profiler_level="Level1"), "_aic_metrics", "ACL_AICORE_PIPE_UTILIZATION", None),
    (dict(), "_aic_metrics", "ACL_AICORE_NONE", None),
    (dict(aic_metrics="ACL_AICORE_MEMORY_BANDWIDTH"), "_aic_metrics", "ACL_AICORE_NONE", "reset aic metrics to None"),
    (dict(profiler_level="Level2", aic_metrics="x"), "_aic_metrics", "ACL_AICORE_PIPE_UTILIZATION",
     "Invalid parameter aic_metrics"),
    (dict(l2_cache="yes"), "_l2_cache", False, "Invalid parameter l2_cache, which must be of bool type"),
    (dict(data_simplification=3), "_data_simplification", True, "Invalid parameter data_simplification"),
    (dict(record_op_args=1), "record_op_args", False, "Invalid parameter record_op_args"),
    (dict(profiler_level="Level_none"), "_mstx", True, "Parameter mstx or msprof_tx must be True"),
    (dict(export_type="db"), "_export_type", ["db"], None),
    (dict(export_type=["text", "db", "text"]), "_export_type", ["db", "text"], None),
    (dict(export_type="csv"), "_export_type", ["text"], "Invalid parameter export_type, reset it to text."),
    (dict(export_type=5), "_export_type", ["text"], "Invalid parameter export_type: 5"),
    (dict(op_attr=True), "_op_attr", False, "op_attr switch is invalid with export type set as text."),
    (dict(op_attr=True, export_type="db"), "_op_attr", True, None),
    (dict(gc_detect_threshold=-1), "_gc_detect_threshold", None, "gc_detect_threshold can not be negative"),
    (dict(gc_detect_threshold="1"), "_gc_detect_threshold", None, "gc_detect_threshold is not int or float"),
    (dict(mstx_domain_include=["a"]), "_mstx_domain_include", [], "valid when msprof_tx or mstx is True"),
    (dict(mstx=True, mstx_domain_include=["b", "a", "b"]), "_mstx_domain_include", ["a", "b"], None),
    (dict(mstx=True, mstx_domain_include="a"), "_mstx_domain_include", [], "which must be of list type"),
    (dict(mstx=True, mstx_domain_exclude=[1]), "_mstx_domain_exclude", [], "contents must be of str type"),
    (dict(mstx=True, mstx_domain_include=["a"], mstx_domain_exclude=["b"]), "_mstx_domain_exclude", [],
     "only mstx_domain_include will work"),
    (dict(host_sys=["mem", "cpu", "mem"]), "_host_sys", ["cpu", "mem"], None),
    (dict(host_sys=["cpu", "gpu"]), "_host_sys", [], "Invalid parameter host_sys, reset it to empty."),
    (dict(host_sys="cpu"), "_host_sys", [], "which must be of list type"),
])
def test_experimental_config_resets_bad_values_with_torch_npus_warning(capsys, kwargs, attribute, expected, warning):
    config = npu_profiler._ExperimentalConfig(**kwargs)
    assert getattr(config, attribute) == expected
    printed = _warnings(capsys)
    if warning is None:
        assert printed == []
    else:
        assert any(warning in line for line in printed), printed
    # the public name reads the same value
    public = attribute.lstrip("_")
    assert getattr(config, public) == expected


def test_experimental_config_records_its_values_by_their_attribute_names():
    config = npu_profiler._ExperimentalConfig(gc_detect_threshold=2.5, mstx=True)
    info = config.to_dict()
    assert info[Constant.PROFILER_LEVEL] == "Level0" and info[Constant.EXPORT_TYPE] == ["text"]
    assert info["_gc_detect_threshold"] == 2.5 and config.with_gc and config.tx_enabled
    with pytest.raises(AttributeError):
        config.profiler_level = "Level1"  # read-only, as in torch_npu


def test_warnings_print_on_rank_0_only_and_can_be_turned_off(capsys, monkeypatch):
    from torch_npu.profiler.analysis.prof_common_func._constant import print_error_msg, print_warn_msg
    print_warn_msg("one")
    assert _warnings(capsys) == ["one"]
    monkeypatch.setenv("RANK", "1")
    print_warn_msg("two")
    print_error_msg("still printed")
    out = capsys.readouterr().out
    assert "two" not in out and re.search(r"\[ERROR\] \[\d+\] profiler\.py: still printed", out)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("TORCH_NPU_WARNING_DISABLE", "1")
    print_warn_msg("three")
    assert _warnings(capsys) == []


# --- ProfActionController -------------------------------------------------------------------

class _Recorder:
    """A _ProfInterface that records the steps it is asked for."""

    def __init__(self):
        self.steps = []

    def __getattr__(self, name):
        return lambda: self.steps.append(name)


def _torch_steps(prev, current):
    """What torch.profiler.profile does for a change of action, in torch_npu's steps:
    a prepared trace is inited (and warmed up unless it starts at once), every
    stop is finalized."""
    names = [getattr(f, "__name__", None) or f.func.__name__ for f in torch.profiler.profile().action_map[(prev, current)]]
    steps = []
    for i, name in enumerate(names):
        if name == "prepare_trace":
            steps += ["init_trace"] if names[i + 1:i + 2] == ["start_trace"] else ["init_trace", "warmup_trace"]
        elif name == "stop_trace":
            steps += ["stop_trace", "finalize_trace"]
        elif name == "_trace_ready":
            steps.append("trace_ready")
        elif name != "warn":
            steps.append(name)
    return steps


ACTIONS = [ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE]


@pytest.mark.parametrize("prev,current", [(p, c) for p in ACTIONS for c in ACTIONS + [None] if (p, c) != (
    ProfilerAction.NONE, None)])
def test_action_controller_agrees_with_torchs_schedule_but_drops_a_profile_that_only_warmed_up(prev, current):
    recorder = _Recorder()
    controller = ProfActionController("the profile", recorder, lambda prof: recorder.steps.append("trace_ready"))
    controller.transit_action(prev, current)
    expected = _torch_steps(prev, current)
    if (prev, current) == (ProfilerAction.WARMUP, None):
        # torch saves an empty trace; torch_npu deletes the folder of a profile that never recorded
        expected = ["finalize_trace", "delete_prof_dir"]
    assert recorder.steps == expected


def test_incorrect_schedules_warn(capsys):
    controller = ProfActionController(None, _Recorder())
    controller.transit_action(ProfilerAction.RECORD, ProfilerAction.NONE)
    controller.transit_action(ProfilerAction.WARMUP, None)
    assert _warnings(capsys) == [
        "Incorrect schedule: RECORD followed by NONE",
        "Incorrect schedule: Stop profiler while current state is WARMUP which will result in empty parsed data."]


# --- _ProfInterface and the profiles over it -------------------------------------------------------

def test_prof_interface_writes_a_whole_profile_folder(tmp_path):
    from torch_npu.profiler._profiler_path_creator import ProfPathCreator
    ProfPathCreator().init(dir_name=str(tmp_path))
    prof_if = _ProfInterface(activities=npu_profiler.supported_activities(), record_shapes=True,
                             metadata={"job": "unit"}, custom_trace_id_callback=lambda: "trace-7",
                             experimental_config=npu_profiler._ExperimentalConfig(profiler_level="Level1"))
    x = torch.randn(32, 32, device="npu")
    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    prof_if.init_trace()
    prof_if.start_trace()
    start.record()
    (x @ x).sum().item()
    end.record()
    end.synchronize()
    prof_if.stop_trace()
    prof_if.finalize_trace()
    # the Event methods are torch_npu's own again
    assert not any(hasattr(getattr(torch.npu.Event, m), "origin_func")
                   for m in ("record", "wait", "query", "elapsed_time", "synchronize"))
    folder = pathlib.Path(prof_if.prof_path)
    assert folder.parent == tmp_path and folder.name.endswith("_ascend_pt")
    trace = json.loads((folder / analysis.RAW_TRACE).read_text())["traceEvents"]
    names = {e.get("name") for e in trace}
    assert {"Event::record", "Event::synchronize", "mm"} <= names, names
    info = json.loads((folder / "profiler_info.json").read_text())
    assert info["config"]["common_config"]["activities"] == ["ProfilerActivity.CPU", "ProfilerActivity.NPU"]
    assert info["config"]["experimental_config"]["_aic_metrics"] == "ACL_AICORE_PIPE_UTILIZATION"
    assert info["start_info"]["syscnt_enable"] is False and info["start_info"]["start_monotonic"] > 0
    assert set(info["end_info"]) == {"collectionTimeEnd", "MonotonicTimeEnd"}
    metadata = json.loads((folder / "profiler_metadata.json").read_text())
    assert metadata["job"] == "unit" and metadata["trace_id"] == "trace-7"
    assert set(metadata["ENV_VARIABLES"]) >= {"PYTORCH_NPU_ALLOC_CONF", "HCCL_ALGO"}
    prof_if.analyse()
    assert any(r["Name"] == "mm" for r in _csv(folder / analysis.OUTPUT_DIR / "kernel_details.csv"))


def _csv(path):
    import csv
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_bad_trace_id_callback_falls_back_to_a_random_id(capsys):
    prof_if = _ProfInterface()
    for callback in (lambda: 12, lambda: "x" * (prof_if.MAX_TRACE_ID_LEN + 1), "no", lambda: 1 / 0):
        prof_if.custom_trace_id_callback = callback
        assert re.fullmatch(r"[0-9A-F]{32}", prof_if.create_trace_id())
    assert len(_warnings(capsys)) == 4


def test_garbage_collections_over_the_threshold_are_gc_events_of_the_trace(tmp_path):
    x = torch.randn(32, 32, device="npu")
    config = npu_profiler._ExperimentalConfig(gc_detect_threshold=0)
    with npu_profiler.profile(activities=NPU_ACTIVITIES, experimental_config=config,
                              schedule=npu_profiler.schedule(wait=0, active=1, repeat=1),  # one folder: this cycle's
                              on_trace_ready=npu_profiler.tensorboard_trace_handler(str(tmp_path))) as prof:
        (x @ x).sum().item()
        gc.collect()
        prof.step()
    folder = next(tmp_path.glob("*_ascend_pt"))
    raw = (folder / "FRAMEWORK" / "torch.gc_record").read_bytes()
    assert raw and len(raw) % struct.calcsize(Constant.GC_RECORD_FORMAT) == 0
    events = json.loads((folder / analysis.OUTPUT_DIR / "trace_view.json").read_text())["traceEvents"]
    (step,) = [e for e in events if e.get("name") == "ProfilerStep#0"]
    collections = [e for e in events if e.get("name") == "GC"]
    # the collection inside the step is placed inside it on the trace's clock
    assert any(step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] for e in collections), (
        step, collections)
    assert gc.callbacks == [c for c in gc.callbacks if "ProfGCDetector" not in repr(c)]


def test_export_type_db_writes_the_databases_and_text_can_be_had_later(tmp_path, capsys):
    x = torch.randn(32, 32, device="npu")
    with npu_profiler.profile(activities=NPU_ACTIVITIES,
                              experimental_config=npu_profiler._ExperimentalConfig(export_type="db"),
                              on_trace_ready=npu_profiler.tensorboard_trace_handler(str(tmp_path))):
        (x @ x).sum().item()
    folder = next(tmp_path.glob("*_ascend_pt"))
    assert sorted(p.name for p in (folder / analysis.OUTPUT_DIR).iterdir()) == [
        "analysis.db", "ascend_pytorch_profiler.db"]
    assert not any("parsing failed" in line for line in _warnings(capsys))
    npu_profiler.analyse(str(tmp_path), export_type="text")  # the raw data is whole: text can be had
    assert (folder / analysis.OUTPUT_DIR / "kernel_details.csv").is_file()


def test_a_profile_stopped_while_warming_up_leaves_no_folder(tmp_path, capsys):
    with npu_profiler.profile(activities=NPU_ACTIVITIES, schedule=npu_profiler.schedule(wait=0, warmup=2, active=1),
                              on_trace_ready=npu_profiler.tensorboard_trace_handler(str(tmp_path))) as prof:
        torch.ones(4, device="npu").sum().item()
        prof.step()
    assert list(tmp_path.glob("*_ascend_pt")) == []
    assert any("current state is WARMUP" in line for line in _warnings(capsys))
    # the session it warmed up is closed: the next profile records device activity
    with npu_profiler.profile(activities=NPU_ACTIVITIES) as prof:
        torch.ones(4, device="npu").sum().item()
    assert any(e.device_type == torch.autograd.DeviceType.PrivateUse1 for e in prof.events())


def test_kineto_profile_runs_on_its_prof_interface(tmp_path):
    from torch_npu.profiler._profiler_path_creator import ProfPathCreator
    ProfPathCreator().init(dir_name=str(tmp_path))
    prof = npu_profiler._KinetoProfile(activities=NPU_ACTIVITIES, record_shapes=True,
                                       custom_trace_id_callback=lambda: "kin")
    prof.start()
    x = torch.randn(16, 16, device="npu")
    (x @ x).sum().item()
    prof.stop()
    assert prof.prof_if.trace_id == "kin"
    folder = pathlib.Path(prof.prof_if.prof_path)
    assert json.loads((folder / "profiler_metadata.json").read_text())["trace_id"] == "kin"
    # torch's views of the same recording
    assert any(e.key == "aten::mm" for e in prof.key_averages())
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    assert json.loads((tmp_path / "t.json").read_text()) == json.loads((folder / analysis.RAW_TRACE).read_text())


def test_event_ranges_put_back_exactly_what_event_had():
    # some of the methods are Event's own, some inherited from torch.Event: after the
    # recording each is what it was, an inherited one inherited again, not pinned on Event
    from torch_npu.npu import Event
    from torch_npu.profiler.profiler_interface import _disable_event_record, _enable_event_record
    names = ("record", "wait", "query", "elapsed_time", "synchronize")
    before = {name: Event.__dict__.get(name) for name in names}
    _enable_event_record()
    _enable_event_record()  # a second profile's start wraps nothing twice
    assert all(getattr(Event, name).origin_func is not None for name in names)
    assert not hasattr(getattr(Event, "record").origin_func, "origin_func")
    _disable_event_record()
    assert {name: Event.__dict__.get(name) for name in names} == before
