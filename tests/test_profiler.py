"""torch.profiler with npu device activity (csrc/profiler/): every stream
task shows as a device event with real times, on its device and stream,
linked to the host op that launched it; key_averages() has device time; the
chrome trace has the kernels and their flow arrows."""

import json
import re
import pathlib

import pytest
import torch
import torch_npu  # noqa: F401
from torch.profiler import ProfilerActivity, profile

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _device_events(prof):
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]


def test_kernels_are_device_events_linked_to_their_ops():
    x = torch.randn(256, 256, device="npu")
    torch.npu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        y = (x @ x).relu()
        torch.npu.synchronize()
    names = [e.name for e in _device_events(prof)]
    assert any("mm" in n for n in names) and any("relu" in n for n in names), names
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["aten::mm"].device_time_total > 0
    assert averages["aten::relu"].device_time_total > 0
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=10)
    assert "Self NPU" in table and "NPU total" in table
    del y


def test_device_times_are_real_and_on_their_stream(tmp_path):
    x = torch.randn(64, device="npu")
    side = torch.npu.Stream()
    torch.npu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        torch.npu._sleep(20000)  # 20 ms on the default stream
        with torch.npu.stream(side):
            x.add(1)
        torch.npu.synchronize()
    sleeps = [e for e in _device_events(prof) if "_sleep" in e.name]
    assert sleeps and sleeps[0].device_time_total >= 15000  # microseconds
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in trace if e.get("cat") == "kernel"]
    assert {int(k["args"]["stream"]) for k in kernels} >= {0, side.stream_id}
    flows = [e for e in trace if e.get("cat") == "ac2g"]
    assert flows, "no flow arrows from host ops to their kernels"


def test_each_op_starts_one_flow_from_its_launch_to_its_device_activities(tmp_path):
    x = torch.randn(128, 128, device="npu")
    w = torch.randn(128, 128, device="npu", requires_grad=True)
    torch.npu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(3):
            (x @ w).relu().sum().backward()
        torch.npu.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in trace if e.get("cat") == "kernel"]
    assert kernels and all({"type", "streamId"} <= set(e["args"]) for e in kernels)
    launches = [e for e in trace if e.get("name") == "aclrtLaunchKernel"]
    assert launches and {e["pid"] for e in launches} == {os.getpid()}
    flows = [e for e in trace if e.get("cat") == "ac2g"]
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    finishes = [e for e in flows if e["ph"] == "f"]
    assert len(starts) == len([e for e in flows if e["ph"] == "s"]), "one flow start per op"
    assert {e["id"] for e in finishes} == set(starts)
    assert all(e["ts"] >= starts[e["id"]]["ts"] for e in finishes), "no arrow points back in time"
    op_ids = {e["args"]["External id"] for e in trace if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    assert set(starts) <= op_ids
    # The NPU lane sorts below the host's.
    sort_index = {e["pid"]: e["args"]["sort_index"] for e in trace if e.get("name") == "process_sort_index"}
    assert min(sort_index[e["pid"]] for e in kernels) > sort_index[os.getpid()]


def test_no_device_activity_without_the_npu_activity():
    x = torch.randn(16, device="npu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x.add(1)
        torch.npu.synchronize()
    assert not _device_events(prof)
    assert any(e.name == "aten::add" for e in prof.events())


def test_profile_memory_reports_npu_allocations():
    torch.npu.synchronize()
    with profile(activities=ACTIVITIES, profile_memory=True, record_shapes=True) as prof:
        x = torch.empty(1024, 1024, device="npu")  # 4 MiB
        y = x.add(1)
        del x, y
        torch.npu.synchronize()
    rows = {e.key: e for e in prof.key_averages()}
    assert rows["aten::empty"].device_memory_usage >= 4 * 1024 * 1024
    # The frees show too: the net of the region is about zero.
    assert abs(sum(e.self_device_memory_usage for e in prof.key_averages())) < 4 * 1024 * 1024
    assert "NPU Mem" in prof.key_averages().table(sort_by="self_device_memory_usage", row_limit=5)


# --- torch_npu.profiler: torch_npu's API and output layout ------------------------

import csv  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import warnings  # noqa: E402

import torch_npu.profiler as npu_profiler  # noqa: E402
from torch_npu.profiler import analysis  # noqa: E402

NPU_ACTIVITIES = [npu_profiler.ProfilerActivity.CPU, npu_profiler.ProfilerActivity.NPU]


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _profile_steps(out, steps=4, analyse_flag=True, **kwargs):
    x = torch.randn(128, 128, device="npu")
    with npu_profiler.profile(activities=NPU_ACTIVITIES, schedule=npu_profiler.schedule(wait=1, active=2, warmup=1),
                              on_trace_ready=npu_profiler.tensorboard_trace_handler(str(out), analyse_flag=analyse_flag),
                              **kwargs) as prof:
        for _ in range(steps):
            (x @ x).relu().sum()
            torch.npu.synchronize()
            prof.step()
    (folder,) = list(out.glob("*_ascend_pt"))
    return folder


def test_output_layout_and_columns(tmp_path):
    folder = _profile_steps(tmp_path, record_shapes=True)
    assert re.fullmatch(r".+_\d+_\d{17}_ascend_pt", folder.name), folder.name
    for name in ("profiler_info.json", "profiler_metadata.json", analysis.RAW_TRACE):
        assert (folder / name).is_file(), name
    out = folder / "ASCEND_PROFILER_OUTPUT"
    kernels = _rows(out / "kernel_details.csv")
    assert list(kernels[0]) == analysis.KERNEL_COLUMNS
    mm = [k for k in kernels if k["Name"] == "mm"]
    # Steps 2 and 3 are active (wait 1, warm-up 1): one mm in each, with its shapes.
    assert sorted(k["Step Id"] for k in mm) == ["2", "3"]
    assert mm[0]["Input Shapes"] == "128,128;128,128" and mm[0]["Input Data Types"] == "FLOAT;FLOAT"
    assert float(mm[0]["Duration(us)"]) > 0
    # Block Num: the kernel's thread team (tests/test_kernel_thread_teams.py): a 16K-element relu runs alone
    assert {k["Block Num"] for k in kernels if k["Name"] == "relu"} == {"1"}
    stats = {r["OP Type"]: r for r in _rows(out / "op_statistic.csv")}
    assert list(next(iter(stats.values()))) == analysis.OP_STATISTIC_COLUMNS
    assert stats["mm"]["Count"] == "2"
    assert abs(sum(float(r["Ratio(%)"]) for r in stats.values()) - 100) < 0.1
    steps = _rows(out / "step_trace_time.csv")
    assert list(steps[0]) == analysis.STEP_COLUMNS and [s["Step"] for s in steps] == ["2", "3"]
    assert all(float(s["Computing"]) > 0 and float(s["Communication"]) == 0 for s in steps)
    ops = {r["Name"]: r for r in _rows(out / "operator_details.csv")}
    assert float(ops["aten::mm"]["Device Self Duration(us)"]) > 0
    assert float(ops["aten::matmul"]["Device Total Duration(us)"]) >= float(ops["aten::mm"]["Device Self Duration(us)"])
    assert "trace_view.json" in os.listdir(out)
    assert not (out / "operator_memory.csv").exists()  # no profile_memory


def test_profile_memory_files(tmp_path):
    out = _profile_steps(tmp_path, profile_memory=True) / "ASCEND_PROFILER_OUTPUT"
    allocations = _rows(out / "operator_memory.csv")
    assert list(allocations[0]) == analysis.OPERATOR_MEMORY_COLUMNS
    mm = [a for a in allocations if a["Name"] == "aten::mm"]
    # A 64 KiB output's block: the request padded by 32 bytes, rounded to 512 (as on real torch_npu).
    assert mm and float(mm[0]["Size(KB)"]) == 64.5 and mm[0]["Device Type"] == "NPU:0"
    records = _rows(out / "memory_record.csv")
    assert list(records[0]) == analysis.MEMORY_RECORD_COLUMNS and records[0]["Component"] == "PTA"


def test_analyse_offline(tmp_path):
    folder = _profile_steps(tmp_path, analyse_flag=False)
    assert not (folder / "ASCEND_PROFILER_OUTPUT").exists()
    npu_profiler.analyse(str(tmp_path))
    assert (folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no profiling data"):
        npu_profiler.analyse(str(empty))
    with pytest.raises(ValueError, match="not a directory"):
        npu_profiler.analyse(str(tmp_path / "missing"))


def test_every_profile_writes_its_raw_folder_and_exports_where_asked(tmp_path, monkeypatch):
    # As real torch_npu: a profile without tensorboard_trace_handler still writes its *_ascend_pt folder
    # (at $ASCEND_WORK_PATH/profiling_data), which analyse() reads offline; exports make their folders.
    from torch_npu.profiler._profiler_path_creator import ProfPathCreator
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path / "work"))
    x = torch.randn(64, 64, device="npu")
    prof = npu_profiler._KinetoProfile(with_stack=True)
    prof.start()
    (x @ x).relu().sum().item()
    prof.stop()
    folder = pathlib.Path(ProfPathCreator().get_prof_dir())
    assert folder.parent == tmp_path / "work" / "profiling_data" and folder.name.endswith("_ascend_pt")
    assert (folder / "FRAMEWORK" / "torch.trace.json").is_file() and (folder / "profiler_info.json").is_file()
    prof.export_chrome_trace(str(tmp_path / "new" / "trace.json"))  # Kineto saves once: copied from the folder
    assert json.loads((tmp_path / "new" / "trace.json").read_text())["traceEvents"]
    prof.export_chrome_trace(str(tmp_path / "new" / "trace.json.gz"))
    assert (tmp_path / "new" / "trace.json.gz").stat().st_size > 0
    prof.export_stacks(str(tmp_path / "stacks" / "stacks.log"))  # with_stack alone is enough
    lines = (tmp_path / "stacks" / "stacks.log").read_text().splitlines()
    assert lines and all(int(line.rsplit(" ", 1)[1]) > 0 for line in lines)
    npu_profiler.analyse(str(tmp_path / "work" / "profiling_data"))
    out = folder / analysis.OUTPUT_DIR
    assert any(row["Name"] == "mm" for row in _rows(out / "kernel_details.csv"))
    tasks = _rows(out / "task_time.csv")
    assert any(row["kernel_name"] == "mm" and float(row["task_time(us)"]) > 0 for row in tasks)


def test_a_cpu_only_profile_has_no_device_files(tmp_path):
    x = torch.randn(64, 64, device="npu")
    with npu_profiler.profile(activities=[npu_profiler.ProfilerActivity.CPU],
                              on_trace_ready=npu_profiler.tensorboard_trace_handler(str(tmp_path))):
        (x @ x).sum().item()
    out = next(tmp_path.glob("*_ascend_pt")) / analysis.OUTPUT_DIR
    assert (out / "trace_view.json").is_file() and (out / "operator_details.csv").is_file()
    assert not (out / "kernel_details.csv").exists() and not (out / "task_time.csv").exists()


def test_step_trace_time_leaves_out_tasks_launched_between_steps():
    # a task whose op ran between two ProfilerStep ranges (an autograd thread's, a hook's) is in no step
    def op(name, ts, dur, ext):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"External id": ext}}

    def kernel(name, ts, ext):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 0, "ts": ts, "dur": 5,
                "args": {"External id": ext, "device": "0", "stream": "0"}}

    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
               "ts": 100 * i, "dur": 50} for i in range(2)]
    events += [op("aten::mm", 10, 20, 1), op("aten::add", 70, 10, 2), op("aten::mm", 110, 20, 3),
               kernel("mm", 20, 1), kernel("add", 75, 2), kernel("mm", 120, 3)]
    _, rows = analysis.step_trace_time(analysis.Trace({"traceEvents": events}))
    assert [(r[1], r[2]) for r in rows] == [(0, 5.0), (1, 5.0)]


def test_schedule_keeps_its_parameters_and_follows_torchs_cycle():
    import torch.profiler as tp
    A = npu_profiler.ProfilerAction
    sched = npu_profiler.schedule(wait=2, active=2, warmup=1, repeat=2, skip_first=1)
    assert (sched.wait, sched.active, sched.warmup, sched.repeat, sched.skip_first) == (2, 2, 1, 2, 1)
    reference = tp.schedule(wait=2, active=2, warmup=1, repeat=2, skip_first=1)
    assert [sched(i) for i in range(14)] == [reference(i) for i in range(14)]
    assert sched(3) == A.WARMUP and sched(5) == A.RECORD_AND_SAVE and sched(13) == A.NONE
    # skip_first_wait: the first cycle has no wait.
    quick = npu_profiler.schedule(skip_first=1, wait=2, warmup=1, active=2, repeat=2, skip_first_wait=1)
    assert [quick(i) for i in range(5)] == [A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE]
    with pytest.warns(UserWarning, match="Invalid parameter skip_first_wait, reset it to 0"):
        assert npu_profiler.schedule(wait=1, active=1, skip_first_wait=0.5).skip_first_wait == 0
    with pytest.warns(UserWarning, match="Invalid parameter active, reset it to 1"):
        assert npu_profiler.schedule(wait=0, active=0).active == 1
    with pytest.raises(ValueError, match="Invalid parameter step"):
        sched(-1)


def test_real_module_paths_of_the_profiler():
    from torch_npu.profiler.profiler_interface import supported_activities
    from torch_npu.profiler.scheduler import ProfilerAction, Schedule
    assert supported_activities() == npu_profiler.supported_activities() == {
        npu_profiler.ProfilerActivity.CPU, npu_profiler.ProfilerActivity.NPU}
    assert Schedule is npu_profiler.schedule and ProfilerAction is npu_profiler.ProfilerAction


def test_bad_arguments_warn_and_reset_or_raise(tmp_path, capsys):
    # the experimental config's warnings are the profiler's console lines, as in torch_npu
    config = npu_profiler._ExperimentalConfig(profiler_level="Level9")
    assert config.profiler_level == npu_profiler.ProfilerLevel.Level0
    assert re.search(r"\[WARNING\] \[\d+\] profiler.py: Invalid parameter profiler_level, reset it to "
                     r"ProfilerLevel.Level0.", capsys.readouterr().out)
    config = npu_profiler._ExperimentalConfig(aic_metrics=npu_profiler.AiCMetrics.PipeUtilization)  # Level0
    assert config.aic_metrics == npu_profiler.AiCMetrics.AiCoreNone
    assert "reset aic metrics to None" in capsys.readouterr().out
    with pytest.warns(UserWarning, match="Invalid parameter wait, reset it to 0"):
        npu_profiler.schedule(wait=-1, active=1)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o500)
    try:
        if not os.access(read_only, os.W_OK):  # root may write anywhere
            with pytest.raises(RuntimeError, match="not writable"):
                npu_profiler.tensorboard_trace_handler(str(read_only))
    finally:
        read_only.chmod(0o700)
    with pytest.raises(RuntimeError, match="cannot be created"):
        npu_profiler.tensorboard_trace_handler("/proc/no/such/dir")
    prof = npu_profiler.profile(activities=NPU_ACTIVITIES)
    prof.start()
    try:
        with pytest.raises(RuntimeError):
            npu_profiler.profile(activities=NPU_ACTIVITIES).start()  # a second one at the same time
    finally:
        prof.stop()


def test_hccl_profile_writes_one_folder_per_rank_with_communication(tmp_path):
    from torchrun_jobs import torchrun
    torchrun("profile_hccl.py", 2, PROFILE_DIR=str(tmp_path))
    folders = sorted(tmp_path.glob("*_ascend_pt"))
    assert [f.name.split("_")[0] for f in folders] == ["rank0", "rank1"]
    for folder in folders:
        out = folder / "ASCEND_PROFILER_OUTPUT"
        comm = json.loads((out / "communication.json").read_text())
        names = [n for step in comm.values() for n in step["collective"]]
        assert any(n.startswith("hcom_all_reduce__") for n in names), names
        steps = _rows(out / "step_trace_time.csv")
        assert all(float(s["Communication"]) > 0 for s in steps)
        metadata = json.loads((folder / "profiler_metadata.json").read_text())
        rank = int(folder.name[len("rank")])
        assert metadata["distributed_args"] == {"rank": rank, "world_size": 2, "backend": "hccl"}
        # the hccl groups, by communicator name: here the default group, whose communicator all_reduce made
        (group,) = metadata["parallel_group_info"].values()
        assert group == {"group_name": "default_group", "group_rank": rank, "global_ranks": [0, 1]}
        # the db export of the same profile: each collective of communication.json, on the rank's own file
        import sqlite3
        with sqlite3.connect(out / f"ascend_pytorch_profiler_{rank}.db") as db:
            ops = db.execute("SELECT s.value, endNs - startNs FROM COMMUNICATION_OP op "
                             "JOIN STRING_IDS s ON s.id = op.opName").fetchall()
            assert db.execute("SELECT rankId FROM RANK_DEVICE_MAP").fetchall() == [(rank,)]
        text = sorted((n, op["Communication Time Info"]["Elapse Time(ms)"]) for step in comm.values()
                      for n, op in step["collective"].items())
        assert [n for n, _ in sorted(ops)] == [n for n, _ in text]
        assert [ns / 1e6 for _, ns in sorted(ops)] == pytest.approx([ms for _, ms in text], abs=1e-5)
        with sqlite3.connect(out / "analysis.db") as db:
            times = db.execute("SELECT hccl_op_name, elapse_time, step, type FROM CommAnalyzerTime").fetchall()
        assert sorted((t[0], t[1]) for t in times) == text and {t[3] for t in times} == {"collective"}


# --- torch.npu.utilization, Event timing against the trace ------------------------

def test_utilization_reports_the_busy_share_since_the_last_call():
    import time
    torch.npu.synchronize()
    torch.npu.utilization()  # starts a window
    torch.npu._sleep(200000)  # 200 ms of device work
    torch.npu.synchronize()
    assert torch.npu.utilization() >= 80
    time.sleep(0.2)  # idle
    assert torch.npu.utilization() <= 20
    with pytest.raises(Exception, match="Invalid device|invalid device"):
        torch.npu.utilization(99)


def test_event_elapsed_time_agrees_with_the_trace():
    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    torch.npu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        start.record()
        torch.npu._sleep(30000)
        end.record()
        torch.npu.synchronize()
    (sleep,) = [e for e in _device_events(prof) if "_sleep" in e.name]
    traced_ms = sleep.device_time_total / 1000
    # The kernel sleeps 30 ms and the events bracket it on the same stream.
    # Only orderings are asserted: on a loaded machine the worker may start
    # late after the first event, which widens the bracket, not the kernel.
    assert traced_ms >= 30.0 - 0.5
    assert start.elapsed_time(end) >= traced_ms - 0.5


def test_a_process_killed_mid_profile_leaves_readable_output(tmp_path):
    from conftest import run_python
    code = f"""
import os, torch, torch_npu
import torch_npu.profiler as P
x = torch.randn(64, 64, device="npu")
prof = P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU],
                 schedule=P.schedule(wait=0, active=1, repeat=0),
                 on_trace_ready=P.tensorboard_trace_handler({str(tmp_path)!r}))
prof.start()
for step in range(3):
    (x @ x).sum()
    torch.npu.synchronize()
    prof.step()
os._exit(9)  # killed in the middle of the next cycle: no stop(), no cleanup
"""
    r = run_python(code, timeout=120)
    assert r.returncode == 9, r.stderr[-2000:]
    folders = sorted(tmp_path.glob("*_ascend_pt"))
    finished = [f for f in folders if (f / "profiler_info.json").is_file()]
    assert len(finished) >= 2  # the finished cycles
    # the cycle the kill interrupted has its folder (made when its trace started), with nothing in it
    assert len(folders) - len(finished) <= 1
    for folder in folders:
        assert not list(folder.rglob("*.tmp"))
    for folder in finished:
        json.loads((folder / "profiler_info.json").read_text())
        rows = _rows(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
        assert any(row["Name"] == "mm" for row in rows)
    npu_profiler.analyse(str(tmp_path))  # the raw data is whole too


# --- one profiling session per process (Note [One profiling session per process]) ---

# Two threads start a profiler at the same instant (a Barrier releases them),
# both wait until each has tried, then the winner records and stops. Kineto
# keeps one session per process: two overlapping sessions from two threads
# crash it (SIGSEGV), so this runs in a subprocess, and eight rounds make the
# race likely to hit.
_START_RACE = """
import json, threading, torch, torch_npu
import torch_npu.profiler as P
from torch.profiler import ProfilerActivity

def make(kind):
    if kind == "npu":
        return P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU])
    return torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])

x = torch.randn(32, 32, device="npu")
for round in range({rounds}):
    tried, outcome = threading.Barrier(2, timeout=60), [None, None]
    released = threading.Barrier(2, timeout=60)
    def contender(i, kind):
        prof = make(kind)
        released.wait()
        try:
            prof.start()
        except RuntimeError as e:
            outcome[i] = "lost: " + str(e)
            tried.wait()
            return
        tried.wait()  # the loser has tried while this one records
        (x @ x).sum()
        torch.npu.synchronize()
        prof.stop()
        outcome[i] = "won: %d device events" % sum(
            e.device_type == torch.autograd.DeviceType.PrivateUse1 for e in prof.events())
    threads = [threading.Thread(target=contender, args=(i, kind)) for i, kind in enumerate({kinds!r})]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(outcome), flush=True)
"""


@pytest.mark.parametrize("kinds", [("npu", "npu"), ("npu", "torch"), ("torch", "npu")])
def test_two_threads_starting_profilers_at_once_one_wins_the_other_gets_the_error(kinds):
    from conftest import run_python
    rounds = 8
    r = run_python(_START_RACE.format(rounds=rounds, kinds=kinds), timeout=240)
    assert r.returncode == 0, f"exit {r.returncode} (-11 is SIGSEGV)\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    # (the profiler's console lines, "[date] [WARNING] ...", start with "[" too)
    outcomes = [json.loads(line) for line in r.stdout.splitlines() if line.startswith('["')]
    assert len(outcomes) == rounds, r.stdout
    for outcome in outcomes:
        won = [o for o in outcome if o.startswith("won")]
        lost = [o for o in outcome if o.startswith("lost")]
        assert len(won) == 1 and len(lost) == 1, outcome
        assert "Profiler is already enabled." in lost[0], lost[0]
        assert "device events" in won[0] and not won[0].startswith("won: 0 "), won[0]


def _npu_events(prof):
    return sum(e.device_type == torch.autograd.DeviceType.PrivateUse1 for e in prof.events())


@pytest.mark.parametrize("outer,inner", [("npu", "npu"), ("npu", "torch"), ("torch", "npu")])
def test_a_profiler_nested_in_a_running_one_is_refused_and_the_outer_keeps_recording(outer, inner):
    def make(kind):
        if kind == "npu":
            return npu_profiler.profile(activities=NPU_ACTIVITIES)
        return profile(activities=ACTIVITIES)

    x = torch.randn(64, 64, device="npu")
    with make(outer) as prof:
        nested = make(inner)
        with pytest.raises(RuntimeError, match="Profiler is already enabled") as refused:
            nested.start()
        (x @ x).sum()
        torch.npu.synchronize()
    assert "Stop it" in str(refused.value)
    assert _npu_events(prof) > 0  # the refused start did not end the outer session
    with make(inner) as again:  # refused once, it starts once the outer one stopped
        (x @ x).sum()
        torch.npu.synchronize()
    assert _npu_events(again) > 0


def test_a_start_that_fails_after_prepare_leaves_no_claim_behind(monkeypatch):
    # Kineto prepared, then the start itself failed: the session is gone, and so must its claim be.
    import torch.autograd.profiler as autograd_profiler
    from torch_npu.profiler import _session

    def failing_start(self):
        raise RuntimeError("simulated Kineto start failure")
    monkeypatch.setattr(autograd_profiler.profile, "_start_trace", _session._guard_start(failing_start))
    with pytest.raises(RuntimeError, match="simulated Kineto start failure"):
        with profile(activities=ACTIVITIES):
            pass
    monkeypatch.undo()
    x = torch.randn(16, 16, device="npu")
    # torch_npu's profile is refused while any claim stands ("Profiler is already enabled.").
    with npu_profiler.profile(activities=NPU_ACTIVITIES) as prof:
        (x @ x).sum()
        torch.npu.synchronize()
    # Its host ops and its device events are recorded: the failed start did
    # not leave Kineto holding its prepared session.
    assert any(e.name == "aten::mm" for e in prof.events())
    assert _npu_events(prof) > 0


def test_legacy_profiler_on_npu_times_ops_and_names_copies_like_torch_npu(capfd):
    # torch.autograd.profiler.profile(use_device="npu"): device events per op
    # (torch's PrivateUse1 profiler stubs), and device copies named after the
    # kernels real torch_npu launches (its trans-contiguous tests read them).
    x = torch.randn(64, 64).npu()
    with torch.autograd.profiler.profile(use_device="npu") as prof:
        strided = x.t().contiguous()
        plain = x.clone()
        y = x @ x
    assert "PrivateUse1 used in profiler but not enabled" not in capfd.readouterr().err
    keys = {e.key for e in prof.key_averages()}
    assert {"aclnnInplaceCopy", "d2dCopyAsync", "aten::mm"} <= keys
    mm = next(e for e in prof.key_averages() if e.key == "aten::mm")
    assert mm.device_time_total > 0  # measured between its two npu events
    torch.testing.assert_close(strided.cpu(), x.cpu().t().contiguous())
    torch.testing.assert_close(plain.cpu(), x.cpu())
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-4, atol=1e-4)


def _copy_kernels(fn):
    with torch.autograd.profiler.profile(use_device="npu") as prof:
        fn()
    return {e.key for e in prof.key_averages()} & {"aclnnInplaceCopy", "d2dCopyAsync"}


def test_a_memcpy_only_between_tensors_of_one_storage_descriptor():
    # torch_npu copies with a memcpy only when both tensors' storages were
    # made with the same sizes and format and the copy covers all of it
    x = torch.randn(2, 3, 16, 16).npu()
    assert _copy_kernels(lambda: x.clone()) == {"d2dCopyAsync"}
    assert _copy_kernels(lambda: x.view(1, 6, 16, 16).clone()) == {"aclnnInplaceCopy"}  # storage made 2x3x16x16
    assert _copy_kernels(lambda: x.unsqueeze(0).clone()) == {"aclnnInplaceCopy"}
    assert _copy_kernels(lambda: x[1].clone()) == {"aclnnInplaceCopy"}  # part of the storage
    assert _copy_kernels(lambda: x.half().float()) == {"aclnnInplaceCopy"}  # converting
    nz = torch_npu.npu_format_cast(torch.randn(32, 32).npu(), 29)
    assert _copy_kernels(lambda: torch.empty(32, 32, device="npu").copy_(nz)) == {"aclnnInplaceCopy"}  # formats differ


def test_memory_timeline_of_an_npu_training_step_with_foreach_sgd(tmp_path):
    # The CPU copies a queued kernel keeps of its CPU arguments are freed on
    # the stream worker, out of the profiler's sight; had their allocations
    # been reported, torch's memory profiler would see their addresses
    # allocated again without a free and refuse the timeline ("duplicate
    # outputs: aten::_foreach_mul_", about every second profile before).
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(32, 10), torch.nn.ReLU(),
                                torch.nn.Linear(10, 10)).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4, foreach=True)
    x = torch.randn(1, 3, 8, 8, device="npu")
    y = torch.rand_like(model(x))
    for trial in range(6):
        out = tmp_path / f"timeline{trial}.json"

        def export(prof, out=out):
            prof.export_memory_timeline(str(out), device="npu:0")

        with torch_npu.profiler.profile(
                activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
                schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=3, repeat=1), on_trace_ready=export,
                profile_memory=True, record_shapes=True, with_stack=True) as prof:
            for _ in range(3):
                optimizer.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
                prof.step()
        assert out.stat().st_size > 0
