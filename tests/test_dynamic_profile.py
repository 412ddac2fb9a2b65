"""torch_npu.profiler.dynamic_profile and its machinery (_dynamic_profiler/):
a config file edited while the job runs starts a profile at its start_step;
bad configs never reach the training loop; the ranks of a job share one
poller through shared memory, which leaves nothing behind; PROF_CONFIG_PATH
does the same for an unchanged script."""

import copy
import csv
import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

from conftest import clean_env, run_python
from torch_npu.profiler import dynamic_profile as dp
from torch_npu.profiler._dynamic_profiler import _dynamic_monitor_proxy
from torch_npu.profiler._dynamic_profiler._dynamic_profiler_config_context import ConfigContext
from torch_npu.profiler._dynamic_profiler._dynamic_profiler_monitor import DynamicProfilerMonitor
from torch_npu.profiler._dynamic_profiler._dynamic_profiler_monitor_shm import (
    _HEADER, DynamicProfilerShareMemory, _attach, _segment_name)
from torch_npu.profiler._dynamic_profiler._dynamic_profiler_utils import DynamicProfilerUtils
from torch_npu.profiler.dynamic_profile import _DynamicProfile

SAMPLE = DynamicProfilerShareMemory.JSON_DATA


def _activity_names(ctx):
    return [a.name for a in ctx.activities()]


def _wait_for(condition, seconds=10.0, what="the condition"):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _segment_exists(name):
    try:
        _attach(name).close()
        return True
    except FileNotFoundError:
        return False


@pytest.fixture
def dyn(tmp_path, monkeypatch):
    """A fresh process-wide dynamic profile (rank 0) whose poller reads every 20 ms."""
    monkeypatch.setattr(DynamicProfilerUtils, "POLL_INTERVAL", 0.02)
    monkeypatch.setattr(DynamicProfilerUtils, "CFG_CONFIG_PATH", None)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setattr(_DynamicProfile, "_instance", None)
    yield tmp_path
    if _DynamicProfile._instance is not None:
        _DynamicProfile._instance._clean_resource()
    for logger in (DynamicProfilerUtils.LOGGER, DynamicProfilerUtils.LOGGER_MONITOR):
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
    DynamicProfilerUtils._log_files.clear()


def _edit_config(cfg_dir, **changes):
    """Writes profiler_config.json as a user would and waits until the poller has published it."""
    shm_obj = _DynamicProfile()._dynamic_monitor._shm_obj
    published = shm_obj.read_published()[0]
    config = copy.deepcopy(SAMPLE)
    config.update(changes)
    path = cfg_dir / "profiler_config.json"
    path.write_text(json.dumps(config) if not isinstance(changes.get("raw"), str) else changes["raw"])
    _wait_for(lambda: shm_obj.read_published()[0] != published, what="the poller to publish the edit")


def _train(steps, x=None):
    x = torch.randn(64, 64, device="npu") if x is None else x
    for _ in range(steps):
        (x @ x).sum()
        torch.npu.synchronize()
        dp.step()


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# --- the config file drives the profile --------------------------------------------------------


def test_an_edit_profiles_active_steps_from_start_step(dyn):
    cfg, out = dyn / "cfg", dyn / "out"
    dp.init(str(cfg))
    assert json.loads((cfg / "profiler_config.json").read_text()) == SAMPLE  # the template, written at init
    _train(2)
    _edit_config(cfg, start_step=4, active=2, prof_dir=str(out), analyse=True)
    _train(2)  # steps 3, 4: the profile starts at step 4
    assert _DynamicProfile().prof is not None and _DynamicProfile().prof.step_num == 4
    _train(4)
    assert _DynamicProfile().prof is None
    (folder,) = out.glob("*_ascend_pt")
    kernels = _rows(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert sum(k["Name"] == "mm" for k in kernels) == 2  # the two active steps
    trace = json.loads((folder / "FRAMEWORK" / "torch.trace.json").read_text())
    steps = sorted({e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")})
    assert steps == ["ProfilerStep#4", "ProfilerStep#5"]  # numbered as the job's steps
    assert (cfg / "log").is_dir() and any(p.name.startswith("dp_") for p in (cfg / "log").iterdir())


def test_start_step_minus_one_starts_at_the_next_step(dyn):
    cfg, out = dyn / "cfg", dyn / "out"
    dp.init(str(cfg))
    _train(5)
    _edit_config(cfg, start_step=-1, active=1, prof_dir=str(out))
    _train(1)
    assert _DynamicProfile().prof is not None
    _train(1)
    assert len(list(out.glob("*_ascend_pt"))) == 1


def test_a_start_step_already_passed_is_reported_and_dropped(dyn, capsys):
    cfg, out = dyn / "cfg", dyn / "out"
    dp.init(str(cfg))
    _train(5)
    _edit_config(cfg, start_step=3, prof_dir=str(out))
    _train(3)
    assert "Dynamic Profiler config is not effective. The start_step=3, current_step=6" in capsys.readouterr().out
    assert not out.exists() or not list(out.glob("*_ascend_pt"))


def test_set_state_resumes_the_step_count(dyn, capsys):
    cfg, out = dyn / "cfg", dyn / "out"
    dp.init(str(cfg))
    dp.set_state({"cur_step": 100})  # resumed from a checkpoint taken at step 100
    for bad in ([100], {"cur_step": -1}, {"cur_step": 1.5}, {"cur_step": True}):
        dp.set_state(bad)
        assert "[ERROR]" in capsys.readouterr().out
    assert _DynamicProfile().cur_step == 100
    _edit_config(cfg, start_step=102, prof_dir=str(out))
    _train(1)
    assert _DynamicProfile().prof is None
    _train(1)  # step 102
    assert _DynamicProfile().prof is not None


def test_a_config_seen_before_the_rank_started_is_not_applied(dyn):
    cfg, out = dyn / "cfg", dyn / "out"
    cfg.mkdir()
    config = dict(copy.deepcopy(SAMPLE), start_step=-1, prof_dir=str(out))
    (cfg / "profiler_config.json").write_text(json.dumps(config))
    dp.init(str(cfg))
    time.sleep(0.1)  # several polls
    _train(3)
    assert not out.exists()


def test_an_invalid_file_warns_keeps_the_profiler_off_and_a_later_fix_works(dyn, capsys):
    cfg, out = dyn / "cfg", dyn / "out"
    dp.init(str(cfg))
    _edit_config(cfg, raw='{"start_step": -1, "prof_dir": ')  # not JSON: published after a second read
    _train(2)
    assert "Dynamic profiler config is not valid" in capsys.readouterr().out
    assert _DynamicProfile().prof is None
    _edit_config(cfg, start_step=-1, prof_dir=str(out))
    _train(2)
    assert len(list(out.glob("*_ascend_pt"))) == 1


def test_an_oversized_file_is_refused_and_a_removed_one_is_logged_once(dyn, capsys, monkeypatch):
    cfg = dyn / "cfg"
    dp.init(str(cfg))
    monkeypatch.setattr(DynamicProfilerUtils, "CFG_BUFFER_SIZE", 64)  # the segment keeps its size
    _edit_config(cfg, start_step=-1, prof_dir=str(dyn / "out"))  # published as invalid after a second read
    _train(1)
    printed = capsys.readouterr().out
    assert "Dynamic profiler config is not valid" in printed and "over the 64 allowed" in printed
    assert _DynamicProfile().prof is None
    (cfg / "profiler_config.json").unlink()
    time.sleep(0.2)  # several polls
    (log,) = (cfg / "log").glob("monitor_dp_*.log")
    assert log.read_text().count("Dynamic profiler cfg json not exists") == 1


def test_wrong_values_are_reset_and_the_profile_still_runs(dyn, capsys):
    cfg, out = dyn / "cfg", dyn / "out"
    dp.init(str(cfg))
    _edit_config(cfg, start_step=-1, prof_dir=str(out), with_stack="yes", active=0,
                 experimental_config={"profiler_level": "Level7", "l2_cache": "1"})
    _train(1)
    printed = capsys.readouterr().out
    assert "Invalid parameter with_stack, reset it to False." in printed
    assert "Invalid parameter active, reset it to 1." in printed
    assert "profiler_level" in printed and "l2_cache" in printed  # _ExperimentalConfig's own resets
    _train(1)
    assert len(list(out.glob("*_ascend_pt"))) == 1


def test_a_profile_that_cannot_start_is_reported(dyn, capsys):
    cfg = dyn / "cfg"
    blocker = dyn / "a_file"
    blocker.write_text("")
    dp.init(str(cfg))
    _edit_config(cfg, start_step=-1, prof_dir=str(blocker / "out"))
    _train(2)  # never raises
    assert "Dynamic profiler failed to start at step 1" in capsys.readouterr().out
    assert _DynamicProfile().prof is None


def test_rank_list_selects_ranks_and_turns_their_analysis_off(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    config = dict(copy.deepcopy(SAMPLE), is_valid=True, is_rank=True, analyse=True)
    assert not ConfigContext(dict(config, rank_list=[0])).valid()
    chosen = ConfigContext(dict(config, rank_list=[0, 1]))
    assert chosen.valid() and not chosen.analyse()  # without async_mode, a chosen rank does not analyse
    assert ConfigContext(dict(config, rank_list=[1], async_mode=True)).analyse()
    assert not ConfigContext(dict(config, is_valid=False)).valid()  # the poller could not read it


def test_config_context_resets_every_wrong_value():
    bad = copy.deepcopy(SAMPLE)
    bad.update(activities=["CPU", "GPU"], prof_dir=1, analyse="1", record_shapes="1", active=-2, warmup=1.5,
               start_step=-7, is_rank=True, rank_list="0", metadata=[1])
    bad["experimental_config"]["host_sys"] = "cpu"
    ctx = ConfigContext(bad)
    assert _activity_names(ctx) == ["CPU"]
    assert (ctx.prof_path, ctx.analyse(), ctx.record_shapes) == ("./", False, False)
    assert (ctx.active(), ctx.warmup(), ctx.start_step()) == (1, 0, 0)
    assert ctx.meta_data() == {} and ctx.experimental_config is not None
    text = "\n".join(ctx.problems)
    for needle in ("activity must be CPU OR NPU", "prof_dir", "analyse", "record_shapes", "active, reset it to 1",
                   "warmup, reset it to 0", "start_step, reset it to 0", "rank_list must be list", "metadata",
                   "host_sys"):
        assert needle in text, needle
    good = ConfigContext(copy.deepcopy(SAMPLE))
    assert good.problems == [] and _activity_names(good) == ["CPU", "NPU"] and good.start_step() == 0


def test_utils_rank_dyno_replies_and_log_files(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "two")
    assert DynamicProfilerUtils.get_rank_id() == -1  # warned on rank 0's console only
    monkeypatch.setenv("RANK", "5")
    assert DynamicProfilerUtils.get_rank_id() == 5
    assert DynamicProfilerUtils.dyno_str_to_json("A=1\n B = x \nno pair\nC=1=2") == {"A": "1", "B": "x"}
    assert DynamicProfilerUtils.parse_str_params_to_list("None") == []
    try:
        DynamicProfilerUtils.init_logger(log_path=str(tmp_path))
        DynamicProfilerUtils.init_logger(log_path=str(tmp_path))  # the same file: no second handler
        DynamicProfilerUtils.out_log("a warning", DynamicProfilerUtils.LoggerLevelEnum.WARNING)
        for handler in DynamicProfilerUtils.LOGGER.handlers:
            handler.flush()
        (log,) = (tmp_path / "log").glob("dp_*_rank_5.log")
        (line,) = log.read_text().splitlines()
        assert line.endswith("[WARNING] [%d] test_dynamic_profile.py: a warning" % os.getpid())
    finally:
        for handler in list(DynamicProfilerUtils.LOGGER.handlers):
            DynamicProfilerUtils.LOGGER.removeHandler(handler)
            handler.close()
        DynamicProfilerUtils._log_files.clear()


def test_config_context_reads_dynologs_strings(monkeypatch):
    monkeypatch.setattr(DynamicProfilerUtils, "DYNAMIC_PROFILER_MODEL",
                        DynamicProfilerUtils.DynamicProfilerConfigModel.DYNO_CONFIG)
    ctx = ConfigContext({"is_valid": True, "PROFILE_ACTIVITIES": "CPU", "ACTIVITIES_ITERATIONS": "3",
                         "WARMUP_ITERATIONS": "1", "PROFILE_START_STEP": "soon", "PROFILE_WITH_STACK": "TRUE",
                         "ACTIVITIES_LOG_FILE": "/tmp/prof", "PROFILE_IS_RANK": "true",
                         "PROFILE_RANK_LIST": "0, 2,x", "PROFILE_PROFILER_LEVEL": "Level1",
                         "PROFILE_AIC_METRICS": "PipeUtilization"})
    assert _activity_names(ctx) == ["CPU"] and (ctx.active(), ctx.warmup()) == (3, 1)
    assert ctx.start_step() == 0 and any("start_step" in p for p in ctx.problems)
    assert ctx.with_stack is True and ctx.prof_path == "/tmp/prof" and ctx._rank_set == {0, 2}
    assert ctx.experimental_config.profiler_level == "Level1"
    assert ctx.experimental_config.aic_metrics == "ACL_AICORE_PIPE_UTILIZATION"
    assert ConfigContext({"is_valid": True, "NPU_MONITOR_START": "true"}).is_dyno_monitor()


def test_start_profiles_once_from_a_file(dyn, capsys):
    out = dyn / "out"
    path = dyn / "start.json"
    path.write_text(json.dumps(dict(copy.deepcopy(SAMPLE), active=2, prof_dir=str(out))))
    dp.start(str(path))  # no init needed
    dp.start(str(path))
    assert "Profiler already started" in capsys.readouterr().out
    _train(2)
    assert _DynamicProfile().prof is None and len(list(out.glob("*_ascend_pt"))) == 1
    dp.start(str(dyn / "missing.json"))
    assert "The provided config_path is invalid" in capsys.readouterr().out
    assert _DynamicProfile().prof is None


def test_step_before_init_counts_steps_only(dyn):
    _train(3)
    assert _DynamicProfile().cur_step == 3 and _DynamicProfile().prof is None


class _FakeMonitor:
    """Records what the dynamic profile tells its monitor; publishes nothing."""

    def __init__(self):
        self.poll_intervals, self.statuses, self.steps = [], [], {}

    def shm_to_prof_conf_context(self):
        return None

    def modify_step_time(self, seconds):
        self.poll_intervals.append(seconds)

    def update_profiler_status(self, status):
        self.statuses.append(status)

    def update_step_info(self, step, flag):
        self.steps[flag] = step

    def report_profiler_status(self):
        pass


def test_the_timed_step_sets_the_poll_interval(dyn):
    profile, monitor = _DynamicProfile(), _FakeMonitor()
    profile._dynamic_monitor = monitor
    for _ in range(profile.RECORD_TIME_STEP + 3):
        dp.step()
    assert monitor.poll_intervals == [1]  # measured once; a step of under a second polls every second
    assert monitor.steps[DynamicProfilerUtils.CURRENT_STEP] == profile.RECORD_TIME_STEP + 3
    profile._dynamic_monitor = None


def test_a_profile_that_fails_mid_way_is_stopped_and_reported(dyn, capsys):
    class Failing:
        stopped = False

        def step(self):
            raise RuntimeError("disk full")

        def stop(self):
            Failing.stopped = True

    profile, monitor = _DynamicProfile(), _FakeMonitor()
    profile._dynamic_monitor = monitor
    profile.prof, profile.step_num = Failing(), 3
    dp.step()
    assert "Dynamic profiler failed at step 1, it stops: disk full" in capsys.readouterr().out
    assert profile.prof is None and Failing.stopped
    assert monitor.statuses == [DynamicProfilerUtils.ProfilerStatus.IDLE]
    profile._dynamic_monitor = None


def test_init_with_a_file_path_is_refused(dyn, capsys):
    target = dyn / "plain_file"
    target.write_text("")
    dp.init(str(target))
    assert "is invalid, and profiler will not be enabled" in capsys.readouterr().out
    assert not _DynamicProfile().repeat_init


# --- the shared segment and its poller ---------------------------------------------------------


def _poller_threads():
    return [t for t in threading.enumerate() if t.name == "DynMonitorProc"]


def test_one_poller_per_job_and_nothing_left_after_clean_resource(dyn):
    cfg = dyn / "cfg"
    dp.init(str(cfg))
    monitor = _DynamicProfile()._dynamic_monitor
    name = monitor._shm_obj.shm_path
    assert monitor._shm_obj.is_create_process and len(_poller_threads()) == 1
    second = DynamicProfilerMonitor()  # another rank of the job: attaches, does not poll
    assert not second._shm_obj.is_create_process and len(_poller_threads()) == 1
    second.clean_resource()
    assert _segment_exists(name)  # only the creator removes it
    poller = monitor._process
    _DynamicProfile()._clean_resource()
    assert not poller.is_alive() and not _segment_exists(name)


def test_a_dropped_monitor_stops_its_poller_and_removes_its_segment(dyn, monkeypatch):
    monkeypatch.setattr(DynamicProfilerUtils, "CFG_CONFIG_PATH", str(dyn))
    monitor = DynamicProfilerMonitor()
    poller, name = monitor._process, monitor._shm_obj.shm_path
    assert poller.is_alive() and _segment_exists(name)
    del monitor
    gc.collect()
    assert not poller.is_alive() and not _segment_exists(name)


def test_a_killed_creators_segment_is_replaced(dyn, monkeypatch):
    from multiprocessing import shared_memory
    config_path = str(dyn / "profiler_config.json")
    name = _segment_name(config_path)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = shared_memory.SharedMemory(name=name, create=True, size=DynamicProfilerUtils.CFG_BUFFER_SIZE)
    try:
        _HEADER.pack_into(stale.buf, 0, 7, dead.pid, 12345, 0)
        shm_obj = DynamicProfilerShareMemory(str(dyn), config_path, 0)
        assert shm_obj.is_create_process  # the stale one was removed, a fresh one made
        assert _HEADER.unpack_from(shm_obj.shm.buf)[:2] == (0, os.getpid())
        shm_obj.clean_resource()
    finally:
        stale.close()
        try:
            stale.unlink()
        except FileNotFoundError:
            from multiprocessing import resource_tracker
            resource_tracker.unregister(stale._name, "shared_memory")


def test_a_live_creators_segment_is_kept(dyn):
    config_path = str(dyn / "profiler_config.json")
    first = DynamicProfilerShareMemory(str(dyn), config_path, 0)
    second = DynamicProfilerShareMemory(str(dyn), config_path, 1)
    assert first.is_create_process and not second.is_create_process
    first.publish(b'{"a": 1}')
    assert second.read_published() == (1, b'{"a": 1}')
    with pytest.raises(ValueError, match="more than"):
        first.publish(b" " * DynamicProfilerUtils.CFG_BUFFER_SIZE)
    second.clean_resource()
    first.clean_resource()
    assert not _segment_exists(first.shm_path)


def test_msmonitors_proxy_is_one_object_and_its_absence_is_remembered(monkeypatch):
    imports = []

    class Finder:  # counts the imports of IPCMonitor, and fails them: msmonitor is not installed
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "IPCMonitor":
                imports.append(name)
                raise ImportError("No module named 'IPCMonitor'")
            return None

    monkeypatch.delitem(sys.modules, "IPCMonitor", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Finder()] + sys.meta_path)
    monkeypatch.setattr(_dynamic_monitor_proxy.PyDynamicMonitorProxySingleton, "_instance", None)
    handle = _dynamic_monitor_proxy.PyDynamicMonitorProxySingleton()
    assert handle is _dynamic_monitor_proxy.PyDynamicMonitorProxySingleton()
    assert handle.get_proxy() is None and handle.get_proxy() is None
    assert imports == ["IPCMonitor"] and handle._load_success is False


def test_dynolog_mode_through_msmonitors_proxy(dyn, monkeypatch):
    """A stand-in for msmonitor's IPCMonitor module: dynolog's reply starts a profile."""
    out = dyn / "out"
    calls = []

    class Proxy:
        replies = [f"PROFILE_START_STEP=-1\nACTIVITIES_ITERATIONS=1\nACTIVITIES_LOG_FILE={out}\n"
                   "PROFILE_ACTIVITIES=CPU"]

        def init_dyno(self, rank):
            calls.append(("init_dyno", rank))
            return True

        def poll_dyno(self):
            return self.replies.pop() if self.replies else ""

        def update_profiler_status(self, status):
            calls.append(("status", status["profiler_status"]))

        def finalize_dyno(self):
            calls.append(("finalize_dyno",))

    fake = type(sys)("IPCMonitor")
    fake.PyDynamicMonitorProxy = Proxy
    monkeypatch.setitem(sys.modules, "IPCMonitor", fake)
    monkeypatch.setattr(_dynamic_monitor_proxy.PyDynamicMonitorProxySingleton, "_instance", None)
    monkeypatch.setattr(DynamicProfilerUtils, "DYNAMIC_PROFILER_MODEL",
                        DynamicProfilerUtils.DynamicProfilerConfigModel.DYNO_CONFIG)
    dp.init("")  # dynolog mode: no folder
    shm_obj = _DynamicProfile()._dynamic_monitor._shm_obj
    _wait_for(lambda: shm_obj.read_published()[0] == 1, what="dynolog's config")
    _train(2)
    assert len(list(out.glob("*_ascend_pt"))) == 1
    assert ("init_dyno", 0) in calls
    _DynamicProfile()._clean_resource()
    assert calls[-1] == ("status", "-1")  # the poller reports itself gone


# --- processes ----------------------------------------------------------------------------------

_RANK_SCRIPT = """
    import os, sys, time, torch, torch_npu
    from torch_npu.profiler import dynamic_profile as dp
    from torch_npu.profiler._dynamic_profiler._dynamic_profiler_utils import DynamicProfilerUtils
    DynamicProfilerUtils.POLL_INTERVAL = 0.05
    dp.init(sys.argv[1])
    monitor = dp._DynamicProfile()._dynamic_monitor
    print("role", "poller" if monitor._shm_obj.is_create_process else "reader", monitor._shm_obj.shm_path, flush=True)
    x = torch.randn(32, 32, device="npu")
    deadline = time.monotonic() + 60
    started = False
    while time.monotonic() < deadline:
        (x @ x).sum()
        dp.step()
        started = started or dp._DynamicProfile().prof is not None
        if started and dp._DynamicProfile().prof is None:
            break
        time.sleep(0.02)
    print("profiled", started, flush=True)
"""


def test_two_ranks_share_one_poller_and_leave_no_segment(tmp_path):
    cfg, out = tmp_path / "cfg", tmp_path / "out"
    cfg.mkdir()
    (cfg / "profiler_config.json").write_text(json.dumps(SAMPLE))
    ranks = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(_RANK_SCRIPT), str(cfg)],
                              env=clean_env(RANK=str(r)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    try:
        roles = [rank.stdout.readline().split() for rank in ranks]
        assert sorted(r[1] for r in roles) == ["poller", "reader"], roles
        assert roles[0][2] == roles[1][2]  # one segment
        time.sleep(0.1)
        config = dict(copy.deepcopy(SAMPLE), start_step=-1, prof_dir=str(out))
        (cfg / "profiler_config.json").write_text(json.dumps(config))
        outputs = [rank.communicate(timeout=120) for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
    for (stdout, stderr), rank in zip(outputs, ranks):
        assert rank.returncode == 0 and "profiled True" in stdout, stderr[-2000:]
    assert len(list(out.glob("*_ascend_pt"))) == 2  # each rank profiled
    assert not _segment_exists(roles[0][2])
    assert "leaked shared_memory" not in outputs[0][1] + outputs[1][1]


def test_import_torch_npu_leaves_the_dynamic_profiler_unloaded():
    result = run_python("""
        import sys, torch_npu
        print(sorted(m for m in sys.modules if "dynamic_prof" in m or "non_intrusive" in m
                     or m == "multiprocessing.shared_memory"))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_prof_config_path_profiles_an_unchanged_training_loop(tmp_path):
    cfg, out = tmp_path / "cfg", tmp_path / "out"
    result = run_python(f"""
        import json, os, sys, time, torch, torch_npu
        assert "torch_npu.profiler._non_intrusive_profile" in sys.modules
        from torch_npu.profiler._dynamic_profiler._dynamic_profiler_utils import DynamicProfilerUtils
        DynamicProfilerUtils.POLL_INTERVAL = 0.05
        assert not os.path.exists({str(cfg)!r})  # nothing until an optimizer exists
        model = torch.nn.Linear(8, 8).npu()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        path = os.path.join({str(cfg)!r}, "profiler_config.json")
        config = json.load(open(path))  # the template, written when the optimizer was made
        config.update(start_step=3, active=2, prof_dir={str(out)!r})
        time.sleep(0.1)
        json.dump(config, open(path, "w"))
        time.sleep(0.5)
        from torch_npu.profiler.dynamic_profile import _DynamicProfile
        for step in range(6):
            model(torch.randn(4, 8, device="npu")).sum().backward()
            opt.step()
            opt.zero_grad()
        print("steps", _DynamicProfile().cur_step)
    """, PROF_CONFIG_PATH=str(cfg), RANK="0")
    assert result.returncode == 0, result.stderr
    assert "steps 6" in result.stdout
    assert len(list(out.glob("*_ascend_pt"))) == 1


def test_bad_non_intrusive_settings_are_reported_at_import(tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("")
    result = run_python("import torch, torch_npu; torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1)",
                        PROF_CONFIG_PATH=str(a_file))
    assert result.returncode == 0, result.stderr
    assert "is invalid, and profiler will not be enabled" in result.stdout
    result = run_python("import torch_npu", MSMONITOR_USE_DAEMON="yes", KINETO_USE_DAEMON="1")
    assert result.returncode == 0, result.stderr
    assert "'KINETO_USE_DAEMON' will be deprecated" in result.stdout
    assert "'MSMONITOR_USE_DAEMON' value not valid" in result.stdout


def test_only_the_optimizer_made_last_counts_the_training_steps(monkeypatch):
    # a job with several optimizers steps each of them once per training step
    from torch_npu.profiler._non_intrusive_profile import _NonIntrusiveProfile
    counted = []
    monkeypatch.setattr(dp, "step", lambda: counted.append(1))
    monkeypatch.setattr(_NonIntrusiveProfile, "OPTIMIZER_ID", 0)
    monkeypatch.setattr(_NonIntrusiveProfile, "_folder_to_watch", None)  # no profiler to start
    monkeypatch.setattr(torch.optim.Optimizer, "_patch_step_function", _NonIntrusiveProfile.patch_step_function)

    class SGD(torch.optim.SGD):  # subclasses: the wrapped steps stay on this test's classes
        pass

    class Adam(torch.optim.Adam):
        pass

    w = torch.zeros(2, requires_grad=True)
    w.grad = torch.ones(2)
    first = SGD([w], lr=0.1)
    wrapped_once = SGD.step
    optimizers = [first, Adam([w], lr=0.1), SGD([w], lr=0.1)]
    assert SGD.step is wrapped_once and SGD.step.step_hooked and Adam.step.step_hooked
    for optimizer in optimizers:
        optimizer.step()
    assert len(counted) == 1  # the last SGD's step
    optimizers[-1].step()
    assert len(counted) == 2


def test_msmonitor_use_daemon_selects_dynologs_configs(monkeypatch):
    from torch_npu.profiler import _non_intrusive_profile as non_intrusive
    monkeypatch.setattr(DynamicProfilerUtils, "DYNAMIC_PROFILER_MODEL", DynamicProfilerUtils.DYNAMIC_PROFILER_MODEL)
    monkeypatch.delenv("PROF_CONFIG_PATH", raising=False)
    monkeypatch.delenv("KINETO_USE_DAEMON", raising=False)
    monkeypatch.setenv("MSMONITOR_USE_DAEMON", "0")
    assert non_intrusive._requested_config_folder() is None
    assert not DynamicProfilerUtils.is_dyno_model()
    monkeypatch.setenv("MSMONITOR_USE_DAEMON", "1")
    assert non_intrusive._requested_config_folder() == ""  # dynamic_profile.init's folder in dynolog mode
    assert DynamicProfilerUtils.is_dyno_model()
