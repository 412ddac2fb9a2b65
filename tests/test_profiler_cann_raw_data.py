"""CANN's raw-data folder of a torch_npu profile (torch_npu/profiler/_cann_raw_data.py): a profile
with ProfilerActivity.NPU has PROF_<n>_<timestamp>_<id>/ with host/ and device_<id>/, whose records
are the profile's device tasks, task for task those of kernel_details.csv; a CPU-only profile has
none; msprof's export (mindstudio_profiler_output/, _log/) stays only with data_simplification=False."""

import csv
import json
import re

import pytest
import torch
import torch_npu  # noqa: F401
import torch_npu.profiler as npu_profiler
from torch_npu.profiler import _cann_raw_data, analysis
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager

NPU_ACTIVITIES = [npu_profiler.ProfilerActivity.CPU, npu_profiler.ProfilerActivity.NPU]
PROF_NAME = re.compile(r"^PROF_\d{6}_\d{17}_[A-Z]{16}$")


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _profile(out, activities=NPU_ACTIVITIES, steps=2, work=True, **kwargs):
    x = torch.randn(96, 96, device="npu")
    side = torch.npu.Stream()
    torch.npu.synchronize()  # the set-up's tasks end before the profile
    schedule = npu_profiler.schedule(wait=0, warmup=0, active=steps, repeat=1)
    with npu_profiler.profile(activities=activities, schedule=schedule,
                              on_trace_ready=npu_profiler.tensorboard_trace_handler(str(out)), record_shapes=True,
                              **kwargs) as prof:
        for _ in range(steps):
            if work:
                (x @ x).relu().sum()
                with torch.npu.stream(side):
                    x.add(1)
                torch.npu.synchronize()
            prof.step()
    (folder,) = list(out.glob("*_ascend_pt"))
    return folder


def test_an_npu_profile_has_the_prof_folder_with_its_kernels_task_for_task(tmp_path):
    folder = _profile(tmp_path)
    cann_path = ProfilerPathManager.get_cann_path(str(folder))
    assert cann_path and PROF_NAME.match(cann_path.rsplit("/", 1)[1]), cann_path
    current = torch.npu.current_device()
    assert ProfilerPathManager.get_device_id(cann_path) == [current]
    for name in ("host/start_info", "host/end_info", "host/info.json", f"device_{current}/start_info.{current}",
                 f"device_{current}/end_info.{current}", f"device_{current}/info.json.{current}"):
        assert (folder / cann_path / name).is_file(), name
    records = _cann_raw_data.read(cann_path)
    begin, end = records["start_info"]["collectionTimeBegin"], records["end_info"]["collectionTimeEnd"]
    tasks = records["tasks"][current]
    kernels = _rows(folder / analysis.OUTPUT_DIR / "kernel_details.csv")
    assert len(tasks) == len(kernels) > 0
    assert len({t["streamId"] for t in tasks}) == 2  # the side stream's tasks too
    for task, kernel in zip(tasks, kernels):
        assert (task["name"], task["streamId"], task["taskId"], task["taskType"]) == (
            kernel["Name"], int(kernel["Stream ID"]), int(kernel["Task ID"]), kernel["Accelerator Core"])
        assert task["blockNum"] == int(kernel["Block Num"])
        # kernel_details.csv gives microseconds to 3 decimals from its own rounded start and end, so the
        # two durations may differ by 1 ns, plus the float error of the conversion.
        assert task["endNs"] - task["startNs"] == pytest.approx(float(kernel["Duration(us)"]) * 1000, abs=1.01)
        assert task["startNs"] / 1000 == pytest.approx(float(kernel["Start Time(us)"]), abs=1)
        assert begin <= task["startNs"] / 1000 and task["endNs"] / 1000 <= end  # inside the collection
    # every task's launch is a host API record, and its op is the kernel's op
    launches = {a["connectionId"]: a for a in records["api_events"]}
    nodes = {n["connectionId"]: n for n in records["node_info"]}
    for task, kernel in zip(tasks, kernels):
        launch = launches[task["connectionId"]]
        assert launch["name"].startswith("aclrt") and launch["startNs"] <= task["startNs"]
        assert nodes[task["connectionId"]]["opType"] == kernel["Type"]
        assert nodes[task["connectionId"]]["inputShapes"] == kernel["Input Shapes"]
    # msprof's export is removed with data_simplification (the default), as torch_npu leaves it
    assert not (folder / cann_path / "mindstudio_profiler_output").exists()
    assert not (folder / cann_path / "mindstudio_profiler_log").exists()


def test_a_cpu_only_profile_has_no_prof_folder(tmp_path):
    folder = _profile(tmp_path, activities=[npu_profiler.ProfilerActivity.CPU])
    assert ProfilerPathManager.get_cann_path(str(folder)) == ""
    assert not list(folder.glob("PROF*"))
    assert not (folder / analysis.OUTPUT_DIR / "kernel_details.csv").exists()


def test_a_profile_that_ran_nothing_has_the_prof_folder_with_no_tasks(tmp_path):
    # real torch_npu's dynamic profiler tests start and stop a profile around no work and look for PROF*
    folder = _profile(tmp_path, steps=1, work=False)
    cann_path = ProfilerPathManager.get_cann_path(str(folder))
    assert cann_path
    assert _cann_raw_data.read(cann_path)["tasks"] == {torch.npu.current_device(): []}


def test_each_recording_of_a_schedule_has_its_own_prof_folder(tmp_path):
    x = torch.randn(32, 32, device="npu")
    torch.npu.synchronize()
    with npu_profiler.profile(activities=NPU_ACTIVITIES,
                              schedule=npu_profiler.schedule(wait=0, warmup=0, active=1, repeat=2),
                              on_trace_ready=npu_profiler.tensorboard_trace_handler(str(tmp_path))) as prof:
        for _ in range(2):
            (x @ x).sum()
            torch.npu.synchronize()
            prof.step()
    folders = sorted(tmp_path.glob("*_ascend_pt"))
    names = [ProfilerPathManager.get_cann_path(str(f)).rsplit("/", 1)[1] for f in folders]
    assert len(folders) == 2 and len(set(names)) == 2
    numbers = sorted(int(n.split("_")[1]) for n in names)
    assert numbers[1] == numbers[0] + 1  # msprof numbers a process's collections


def test_msprof_export_is_kept_without_data_simplification(tmp_path):
    folder = _profile(tmp_path, experimental_config=npu_profiler._ExperimentalConfig(data_simplification=False))
    cann_path = folder / ProfilerPathManager.get_cann_path(str(folder))
    (summary,) = (cann_path / "mindstudio_profiler_output").glob("op_summary_*.csv")
    (task_time,) = (cann_path / "mindstudio_profiler_output").glob("task_time_*.csv")
    assert list((cann_path / "mindstudio_profiler_log").glob("msprof_export_*.log"))
    kernels = _rows(folder / analysis.OUTPUT_DIR / "kernel_details.csv")
    ops = _rows(summary)
    # kernel_details.csv is msprof's op summary with "Op Name" -> "Name", "Task Duration(us)" -> "Duration(us)"
    assert [(o["Op Name"], o["OP Type"], o["Task ID"], o["Input Shapes"]) for o in ops] == [
        (k["Name"], k["Type"], k["Task ID"], k["Input Shapes"]) for k in kernels]
    for op, kernel in zip(ops, kernels):
        assert float(op["Task Duration(us)"]) == pytest.approx(float(kernel["Duration(us)"]), abs=0.002)
    assert [r["kernel_name"] for r in _rows(task_time)] == [k["Name"] for k in kernels]
    # analysed again with simplification, the export goes, the raw data stays
    info_file = next(folder.glob("profiler_info*.json"))
    info = json.loads(info_file.read_text())
    info["config"]["experimental_config"]["_data_simplification"] = True
    info_file.write_text(json.dumps(info))
    npu_profiler.analyse(str(folder))
    assert not (cann_path / "mindstudio_profiler_output").exists()
    assert _cann_raw_data.read(str(cann_path))["tasks"]
