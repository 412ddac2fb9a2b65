"""Step-time dumps (PERF_DUMP_CONFIG) and the silent-check switches
(NPU_ASD_CONFIG, NPU_ASD_ENABLE, register_asd_hook): torch_npu/utils/_step.py
and torch_npu/asd/asd.py. Each environment case runs in a fresh process,
since they are read at import."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch_npu


def run(body, **env):
    full = {k: v for k, v in os.environ.items() if k not in ("PERF_DUMP_CONFIG", "PERF_DUMP_PATH",
                                                             "NPU_ASD_CONFIG", "NPU_ASD_ENABLE")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", "import torch, torch_npu\n" + textwrap.dedent(body)],
                          capture_output=True, text=True, timeout=120, env=full)


def test_perf_dump_writes_one_step_interval_per_outer_call(tmp_path):
    (tmp_path / "perf_pt_1_0.log.1").write_text("an earlier run's log")
    done = run("""
        import time
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).npu()
        loss_fn = torch.nn.MSELoss()
        x = torch.randn(2, 4, device="npu")
        for _ in range(3):
            loss_fn(model(x), x).backward()   # the loss and the submodules are not steps
            time.sleep(0.02)
        print(torch.nn.Module.__call__.__name__)
    """, PERF_DUMP_CONFIG="enable:true", PERF_DUMP_PATH=str(tmp_path), MASTER_ADDR="10.0.0.1", MASTER_PORT="6000")
    assert done.returncode == 0, done.stderr
    logs = sorted(p.name for p in tmp_path.iterdir())
    assert len(logs) == 1 and logs[0].startswith("perf_pt_") and logs[0].endswith("_0.log"), logs
    lines = (tmp_path / logs[0]).read_text().splitlines()
    assert lines[0].startswith("[LOCALUUID]:") and lines[1] == "[FRAMEWORK]:PyTorch"
    assert lines[2] == "[UUID]:10.0.0.1_6000"
    steps = [tuple(map(int, line.split(":", 1)[1].split(","))) for line in lines[3:]]
    assert len(steps) == 2 and all(start + 15 <= end for start, end in steps), lines
    assert steps[0][1] == steps[1][0]


def test_perf_dump_needs_an_existing_absolute_folder():
    done = run("torch.nn.Linear(2, 2).npu()(torch.ones(2, device='npu'))",
               PERF_DUMP_CONFIG="enable:true", PERF_DUMP_PATH="relative/folder")
    assert done.returncode != 0 and "PERF_DUMP_PATH is empty or invalid" in done.stderr
    off = run("print(torch.nn.Module.__call__.__name__)", PERF_DUMP_CONFIG="enable:false")
    assert off.returncode == 0 and off.stdout.strip() != "_custom_call"


@pytest.mark.parametrize("env, message", [
    (dict(NPU_ASD_ENABLE="5"), "NPU_ASD_ENABLE should be 0, 1, 2 or 3"),
    (dict(NPU_ASD_CONFIG="enable:yes"), "NPU_ASD_CONFIG-enable should be true or false"),
    (dict(NPU_ASD_CONFIG="enable:true,with_checksum:1"), "NPU_ASD_CONFIG-with_checksum should be true or false"),
])
def test_bad_silent_check_settings_fail_the_import(env, message):
    done = run("pass", **env)
    assert done.returncode != 0 and message in done.stderr and "ValueError" in done.stderr


@pytest.mark.parametrize("env", [dict(NPU_ASD_ENABLE="2"), dict(NPU_ASD_CONFIG="enable:true,cooldown:0")])
def test_asking_for_a_silent_check_warns_that_vnpu_does_not_perform_it(env):
    done = run("""
        from torch_npu.asd.asd import matmul_check, silent_check
        print(silent_check.get_check_enable(), matmul_check.get_matmul_hook_enable(), matmul_check.get_cooldown())
    """, **env)
    assert done.returncode == 0, done.stderr
    assert "silent data corruption detection is not supported on vNPU" in done.stderr
    assert done.stdout.split() == ["0", "0", "5"]
    if "NPU_ASD_CONFIG" in env:
        assert "NPU_ASD_CONFIG-cooldown is invalid; using the default value of 5" in done.stderr


def test_asd_config_settings_are_applied_and_bad_numbers_keep_the_defaults():
    from torch_npu.asd.asd import matmul_check
    from torch_npu.utils._step import _prase_asd_config
    saved = dict(vars(matmul_check))
    try:
        with pytest.warns(UserWarning, match="upper_thresh2 is invalid; using the default value of 100"):
            _prase_asd_config({"with_checksum": "true", "cooldown": "7", "strikes_num": "4", "upper_thresh1": "3",
                               "upper_thresh2": "2"})
        assert matmul_check.get_with_checksum() is True and matmul_check.get_cooldown() == 7
        assert matmul_check.get_strikes_num() == 4 and matmul_check.get_upper_thresh1() == 3
        assert matmul_check.get_upper_thresh2() == 100 and matmul_check.get_grad_sample_interval() == 3
    finally:
        vars(matmul_check).update(saved)


def test_silent_check_settings_have_real_torch_npus_accessors_and_nothing_else():
    from torch_npu.asd.asd import _MatmulSilentCheck, _SilentCheckState
    state, matmul = _SilentCheckState(), _MatmulSilentCheck()
    assert state.get_check_enable() == 0
    state.set_check_enable(2)
    assert state.check_enable == 2 and state.get_check_enable() == 2
    assert matmul.get_matmul_hook_enable() == 0 and matmul.get_strikes_window() == 480
    matmul.set_checksum_cooldown(7)
    assert matmul.checksum_cooldown == 7
    for unknown in ("get_nothing", "set_nothing", "fetch_cooldown", "nothing"):
        with pytest.raises(AttributeError, match=f"'_MatmulSilentCheck' object has no attribute '{unknown}'"):
            getattr(matmul, unknown)


def test_a_version_1_hook_records_its_weight_and_lets_unscaled_fp16_through():
    from torch_npu.asd.asd import _SilentFaultDetector
    detector, weight = _SilentFaultDetector(), torch.ones(1)
    hook = detector.silent_fault_check_hook(weight)
    assert hook(torch.ones(2, dtype=torch.float16)) is None  # no loss scale yet: fp16 is not checked
    assert detector.idx == id(weight)
    detector.set_asd_loss_scale(128.0)
    assert detector.loss_scale == 128.0 and detector.set_loss_scale_flag
    with pytest.raises(RuntimeError, match="is not supported on vNPU"):
        hook(torch.ones(2, dtype=torch.float16))
    with pytest.raises(RuntimeError, match="is not supported on vNPU"):
        _SilentFaultDetector().silent_fault_check(torch.ones(2))


def test_register_asd_hook_does_nothing_at_silent_check_version_2_as_real_torch_npu():
    assert torch_npu._C._get_silent_check_version() == 2
    x = torch.ones(3, requires_grad=True)
    assert torch_npu.utils.register_asd_hook(x, torch.ones(1)) is None and x._backward_hooks is None
    assert torch_npu.utils.set_asd_loss_scale(0) is None  # 1.0 only: no check of the scale either
    from torch_npu.utils import asd_detector
    assert asd_detector.register_asd_hook is torch_npu.utils.register_asd_hook


def test_a_version_1_hook_is_placed_and_refuses_to_run(monkeypatch):
    monkeypatch.setattr(torch_npu._C, "_get_silent_check_version", lambda: 1)
    from torch_npu.utils._asd_detector import register_asd_hook, set_asd_loss_scale
    x = torch.ones(3, requires_grad=True)
    y = x * 2
    register_asd_hook(y, torch.ones(1))
    assert y._backward_hooks is not None
    with pytest.raises(RuntimeError, match=r"_npu_silent_check \(silent check 1.0\) is not supported on vNPU"):
        y.sum().backward()
    with pytest.raises(ValueError, match="loss scale cannot be 0"):
        set_asd_loss_scale(0)


def test_the_training_phase_setters_take_torch_npus_values_and_refuse_others():
    # torch_npu.asd reports the phase through these; its collectives would check gradients in a training backward.
    torch_npu._C._npu_set_module_train_state("train")
    torch_npu._C._npu_set_call_state("backward")
    torch_npu._C._npu_set_call_state("forward")
    torch_npu._C._npu_set_module_train_state("infer")
    with pytest.raises(RuntimeError, match="expected one of `forward`, `backward`"):
        torch_npu._C._npu_set_call_state("eval")
    with pytest.raises(RuntimeError, match="call_state must string"):
        torch_npu._C._npu_set_call_state(1)
    with pytest.raises(RuntimeError, match="expected one of `train`, `infer`"):
        torch_npu._C._npu_set_module_train_state("eval")
    with pytest.raises(RuntimeError, match="train_state must string"):
        torch_npu._C._npu_set_module_train_state(None)


def test_each_rotated_perf_log_starts_with_the_header(tmp_path, monkeypatch):
    import logging

    from torch_npu.utils import _step
    monkeypatch.setattr(_step.perf_dump_state, "local_uuid", "L")
    monkeypatch.setattr(_step.perf_dump_state, "uuid", "1.2.3.4_5")
    path = tmp_path / "perf_pt_1_0.log"
    handler = _step.CustomRotatingFileHandler(str(path), maxBytes=60, backupCount=3)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("test_rotated_perf_log")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for step in range(6):
            logger.warning("[STEPTIME]:%d,%d", 1000 + step, 1001 + step)
    finally:
        logger.removeHandler(handler)
        handler.close()
    header = ["[LOCALUUID]:L", "[FRAMEWORK]:PyTorch", "[UUID]:1.2.3.4_5"]
    current = path.read_text().splitlines()
    assert current[:3] == header and current[3].startswith("[STEPTIME]:"), current
    assert (tmp_path / "perf_pt_1_0.log.1").read_text().splitlines()[:3] == header
    assert (path.stat().st_mode & 0o777) == 0o640


def test_deleting_old_perf_logs_keeps_other_devices_and_links(tmp_path):
    from torch_npu.utils._step import delete_pref_pt_logs
    for name in ("perf_pt_11_0.log", "perf_pt_11_0.log.2", "perf_pt_11_1.log", "other_0.log"):
        (tmp_path / name).write_text("x")
    (tmp_path / "perf_pt_12_0.log").symlink_to(tmp_path / "other_0.log")
    delete_pref_pt_logs(str(tmp_path), 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other_0.log", "perf_pt_11_1.log", "perf_pt_12_0.log"]
