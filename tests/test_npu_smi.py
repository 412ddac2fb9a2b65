"""npu-smi: the virtual devices in real npu-smi's layouts, with the memory and
AI Core usage of the processes using them."""
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest


def _smi(*args, env):
    """The installed console command, as harnesses run it."""
    return subprocess.run([shutil.which("npu-smi"), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def env(tmp_path):
    # A private status directory (tempfile.gettempdir() follows TMPDIR).
    return dict(os.environ, TMPDIR=str(tmp_path), VNPU_DEVICE_COUNT="4")


def test_the_console_command_is_installed():
    assert shutil.which("npu-smi") is not None


def test_the_command_imports_neither_torch_nor_torch_npu(env):
    """It answers at once, as the real npu-smi does: the cards come from the
    torch-free lib/libvnpu_smi.so, not from importing torch_npu."""
    probe = ("import runpy, shutil, sys; sys.argv = ['npu-smi', 'info', '-l']\n"
             "try:\n    runpy.run_path(shutil.which('npu-smi'), run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print('IMPORTED', sorted(m for m in ('torch', 'torch_npu') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Total Count                    : 4" in run.stdout
    assert "IMPORTED []" in run.stdout


def test_an_unknown_chip_is_a_clear_error(env):
    run = _smi("info", env=dict(env, VNPU_CHIP="Ascend999"))
    assert run.returncode == 1
    assert "VNPU_CHIP names unknown chip" in run.stderr and "Ascend910B2" in run.stderr, run.stderr
    bad_count = _smi("info", "-l", env=dict(env, VNPU_DEVICE_COUNT="many"))
    assert bad_count.returncode == 1 and "VNPU_DEVICE_COUNT" in bad_count.stderr, bad_count.stderr


def test_the_chip_and_memory_follow_the_environment(env):
    run = _smi("info", "-t", "usages", "-i", "0", env=dict(env, VNPU_CHIP="Ascend910B3", VNPU_DEVICE_MEMORY_MB="1024"))
    assert run.returncode == 0, run.stderr
    assert re.search(r"HBM Capacity\(MB\)\s+: 1024$", run.stdout, re.M), run.stdout
    board = _smi("info", "-t", "board", "-i", "0", env=dict(env, VNPU_CHIP="Ascend910B3"))
    assert "vNPU 910B3 (virtual)" in board.stdout, board.stdout


def test_device_list_starts_with_the_total_count_deepspeed_parses(env):
    run = _smi("info", "-l", env=env)
    assert run.returncode == 0, run.stderr
    # DeepSpeed's tests/unit/common.py: the first line's value after ':'.
    assert int(run.stdout.strip().split("\n")[0].split(":")[1].strip()) == 4
    assert re.findall(r"NPU ID\s+: (\d+)", run.stdout) == ["0", "1", "2", "3"]


def test_overview_and_usages_show_a_live_process(env, tmp_path):
    done = tmp_path / "done"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, time, torch, torch_npu
        x = torch.empty(300 * 1024 * 1024, dtype=torch.uint8, device="npu:2")
        a = torch.randn(256, 256, device="npu:2")
        open({str(tmp_path / 'ready')!r}, "w").close()
        while not os.path.exists({str(done)!r}):
            for _ in range(10):
                a = (a @ a).clamp(-1, 1)
            torch.npu.synchronize()
        """)], env=env)
    try:
        deadline = time.time() + 120
        while not (tmp_path / "ready").exists() or not list((tmp_path / f"vnpu-smi-{os.getuid()}").glob("*.json")):
            assert time.time() < deadline and holder.poll() is None, "the holder process did not start"
            time.sleep(0.5)
        run = _smi("info", env=env)
        assert run.returncode == 0, run.stderr
        assert "910B2" in run.stdout and "Bus-Id" in run.stdout
        process_rows = [line for line in run.stdout.splitlines() if re.match(r"\| 2\s+0\s+\|\s+%d\s" % holder.pid, line)]
        assert len(process_rows) == 1, run.stdout
        assert int(process_rows[0].split("|")[4]) >= 300
        assert "No running processes found in NPU 0" in run.stdout
        usages = _smi("info", "-t", "usages", "-i", "2", env=env)
        assert usages.returncode == 0
        assert int(re.search(r"HBM Capacity\(MB\)\s+: (\d+)", usages.stdout).group(1)) == 65536
        idle = _smi("info", "-t", "usages", "-i", "0", env=env)
        assert re.search(r"Aicore Usage Rate\(%\)\s+: 0$", idle.stdout, re.M), idle.stdout
    finally:
        done.touch()
        holder.wait(timeout=120)
    # The status file goes with the process.
    assert not list((tmp_path / f"vnpu-smi-{os.getuid()}").glob("*.json"))


def test_board_information_and_bad_card_ids(env):
    board = _smi("info", "-t", "board", "-i", "1", env=env)
    assert board.returncode == 0 and re.search(r"NPU ID\s+: 1$", board.stdout, re.M)
    bad = _smi("info", "-t", "board", "-i", "4", env=env)
    assert bad.returncode == 1 and "card id 4" in bad.stderr and "0-3" in bad.stderr
    missing = _smi("info", "-t", "usages", env=env)
    assert missing.returncode == 1 and "-i <card id>" in missing.stderr
    unknown = _smi("info", "-t", "power", "-i", "0", env=env)
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr
