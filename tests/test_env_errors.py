"""Environment variables read at start-up, and the errors a misconfiguration
gives. Each case runs in a fresh interpreter, since the emulator reads its
environment once."""

import pytest

from conftest import run_python

# Prints device_count/is_available (must never raise), then tries to use the
# device and prints the error type and message on one line.
_PROBE = """
    import torch, torch_npu
    print("count", torch.npu.device_count(), torch.npu.is_available())
    try:
        x = torch.ones(2).npu()
        print("use ok", x.device, x.sum().item())
    except Exception as e:
        print("use error", type(e).__name__, str(e).replace("\\n", " "))
"""


def _probe(**env):
    r = run_python(_PROBE, **env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_default_eight_devices():
    out = _probe()
    assert "count 8 True" in out
    assert "use ok npu:0 2.0" in out


def test_device_count_env():
    out = _probe(VNPU_DEVICE_COUNT=2)
    assert "count 2 True" in out
    assert "use ok" in out


def test_device_count_zero():
    out = _probe(VNPU_DEVICE_COUNT=0)
    assert "count 0 False" in out
    assert "use error" in out


def test_device_count_not_a_number():
    out = _probe(VNPU_DEVICE_COUNT="abc")
    # device_count() never raises: libraries call it just to probe.
    assert "count 0 False" in out
    line = next(l for l in out.splitlines() if l.startswith("use "))
    assert line.startswith("use error RuntimeError"), line
    assert "VNPU_DEVICE_COUNT" in line and "abc" in line


def test_visible_devices_remaps_indices():
    r = run_python("""
        import torch, torch_npu
        print(torch.npu.device_count())
        print(torch.npu.get_device_properties(0).uuid)
        print(torch.npu.get_device_properties(1).uuid)
        x = torch.arange(3.0, device="npu:1")
        print(x.device, x.sum().item())
        try:
            torch.ones(1, device="npu:2")
        except RuntimeError as e:
            print("bad index", "0 to 1" in str(e))
    """, ASCEND_RT_VISIBLE_DEVICES="3,5")
    assert r.returncode == 0, r.stderr
    count, uuid0, uuid1, use, bad = r.stdout.strip().splitlines()
    assert count == "2"
    # npu:0 and npu:1 are the physical cards 3 and 5.
    assert "3" in uuid0 and "5" in uuid1 and uuid0 != uuid1
    assert "0005" in uuid1
    assert use == "npu:1 3.0"
    assert bad == "bad index True"


def test_visible_devices_out_of_range():
    out = _probe(ASCEND_RT_VISIBLE_DEVICES="9")
    assert "count 0 False" in out
    line = next(l for l in out.splitlines() if l.startswith("use "))
    assert "use error RuntimeError" in line
    assert "ASCEND_RT_VISIBLE_DEVICES" in line


def test_visible_devices_set_after_import_counts_until_first_use():
    # Scripts set the variable after `import torch_npu`: like CUDA and real
    # torch_npu, the count follows it until a device is used, then stays.
    r = run_python("""
        import os, torch, torch_npu
        before = torch.npu.device_count()
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "2,5"
        set_count = torch.npu.device_count(), torch_npu._C._npu_getDeviceCount()
        x = torch.ones(2, device="npu:1")
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0"
        print(before, set_count, torch.npu.device_count(), torch.accelerator.device_count())
        print(torch.npu.get_device_properties(1).uuid, x.sum().item())
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "9"
    """, VNPU_DEVICE_COUNT=8)
    assert r.returncode == 0, r.stderr
    counts, card = r.stdout.strip().splitlines()
    assert counts == "8 (2, 2) 2 2"
    assert "0005" in card and card.endswith(" 2.0")


def test_alloc_conf_set_after_import_counts_at_first_use():
    # As PYTORCH_CUDA_ALLOC_CONF: parsed when the allocator starts (spawned
    # workers set it after their imports), not at import.
    r = run_python("""
        import os, torch, torch_npu
        os.environ["PYTORCH_NPU_ALLOC_CONF"] = "per_process_memory_fraction:0.1"
        total = torch.npu.get_device_properties(0).total_memory
        try:
            torch.empty(int(total * 0.2), dtype=torch.int8, device="npu")
            print("allocated")
        except torch.OutOfMemoryError as e:
            print("refused", "out of memory" in str(e))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["refused", "True"]
    r = run_python("""
        import os, torch, torch_npu
        os.environ["PYTORCH_NPU_ALLOC_CONF"] = "per_process_memory_fraction:2.0"
        try:
            torch.empty(4, device="npu")
        except RuntimeError as e:
            print("error", "per_process_memory_fraction" in str(e))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["error", "True"]


def test_visible_devices_set_after_import_to_a_missing_card():
    r = run_python("""
        import os, torch, torch_npu
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "9"
        print(torch.npu.device_count(), torch.npu.is_available())
        try:
            torch.ones(1, device="npu")
        except RuntimeError as e:
            print("error", "ASCEND_RT_VISIBLE_DEVICES names device 9" in str(e))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "False", "error", "True"]


def test_visible_devices_with_device_count():
    out = _probe(VNPU_DEVICE_COUNT=4, ASCEND_RT_VISIBLE_DEVICES="1,3")
    assert "count 2 True" in out


def test_task_queue_enable_invalid():
    out = _probe(TASK_QUEUE_ENABLE=5)
    line = next(l for l in out.splitlines() if l.startswith("use "))
    assert "use error" in line
    assert "TASK_QUEUE_ENABLE should be 0, 1 or 2" in line


@pytest.mark.parametrize("value", ["0", "1", "2"])
def test_task_queue_enable_valid(value):
    out = _probe(TASK_QUEUE_ENABLE=value)
    assert "count 8 True" in out and "use ok" in out


# A kernel whose error only shows in stage 2 (gather checks its indices in the
# CPU kernel, on the stream worker). Synchronous launch modes must raise it at
# the call itself, with the accurate stack trace.
_SYNC_ERROR = """
    import torch, torch_npu
    src = torch.randn(5, 3).npu()
    idx = torch.tensor([[7, 0, 0]]).npu()
    src.gather(0, torch.tensor([[1, 0, 0]]).npu())  # first launch of the signature: on the caller
    torch.npu.synchronize()
    try:
        src.gather(0, idx)
        print("call returned")
    except Exception as e:
        # Synchronous: no "called asynchronously" disclaimer, accurate stack.
        print("raised at call", type(e).__name__, "asynchronously" in str(e))
    try:
        torch.npu.synchronize()
        print("sync ok")
    except Exception as e:
        print("raised at sync", type(e).__name__)
    # The device still works afterwards.
    print("after", (torch.arange(4.0).npu() * 2).sum().item())
"""


@pytest.mark.parametrize("env", [{"ASCEND_LAUNCH_BLOCKING": "1"}, {"TASK_QUEUE_ENABLE": "0"}],
                         ids=["ASCEND_LAUNCH_BLOCKING=1", "TASK_QUEUE_ENABLE=0"])
def test_blocking_launch_raises_at_call(env):
    r = run_python(_SYNC_ERROR, **env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("raised at call"), lines
    assert lines[0].endswith("False"), lines
    assert lines[1] == "sync ok", lines
    assert lines[2] == "after 12.0"


def test_default_launch_raises_at_sync():
    # Contrast: with the queue on (default), the same error surfaces later.
    r = run_python(_SYNC_ERROR)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "call returned", lines
    assert lines[1].startswith("raised at sync"), lines
    assert lines[2] == "after 12.0"


def test_invalid_device_message_in_fresh_process():
    r = run_python("""
        import torch, torch_npu
        try:
            torch.npu.set_device(8)
        except RuntimeError as e:
            print(str(e).splitlines()[0])
    """)
    assert r.returncode == 0, r.stderr
    assert "0 to 7" in r.stdout


def test_fork_after_init():
    # torch_npu's message for a forked child that touches the NPU; DataLoader
    # workers (fork, CPU only) must keep working.
    r = run_python("""
        import multiprocessing as mp
        import torch, torch_npu
        from torch.utils.data import DataLoader, TensorDataset

        torch.ones(1, device="npu")  # initialise in the parent

        def child(q):
            try:
                torch.ones(2, device="npu")
                q.put("no error")
            except RuntimeError as e:
                q.put(str(e).splitlines()[0])

        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        print(q.get(timeout=30))
        p.join(30)

        ds = TensorDataset(torch.arange(64.0).view(32, 2))
        total = sum((b.npu() * 2).sum().item() for (b,) in DataLoader(ds, batch_size=8, num_workers=2))
        print("loader", total)
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("Cannot re-initialize NPU in forked subprocess"), lines
    assert "'spawn' start method" in lines[0]
    assert lines[1] == "loader 4032.0"


def test_readme_lists_exactly_the_environment_variables():
    # One list (runtime/src/environment.cpp + torch_npu/_environment.py); the
    # README's table is generated from it: `python -m torch_npu._environment`.
    import pathlib
    import torch_npu._environment as environment
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    assert environment.markdown_table() in readme, "regenerate the README table: python -m torch_npu._environment"


def test_environment_binding_reports_raw_values():
    r = run_python("""
        import torch, torch_npu
        env = torch_npu._C._environment()
        print(env["VNPU_DEVICE_COUNT"], env["TASK_QUEUE_ENABLE"], "VNPU_CHIP" in env, env["errors"])
    """, VNPU_DEVICE_COUNT="3", TASK_QUEUE_ENABLE="2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "3 2 False []"


def test_acl_init_config_path_is_checked_at_the_first_device_use(tmp_path):
    good = tmp_path / "acl.json"
    good.write_text('{"dump": {"dump_scene": "lite_exception"}}')
    assert "use ok" in _probe(TORCH_ACL_INIT_CONFIG_PATH=str(good))
    broken = tmp_path / "broken.json"
    broken.write_text("not a json{{{")
    for path, words in ((broken, "Failed to parse user acl json"), (tmp_path / "missing.json", "is invalid")):
        line = next(l for l in _probe(TORCH_ACL_INIT_CONFIG_PATH=str(path)).splitlines() if l.startswith("use "))
        assert line.startswith("use error RuntimeError") and words in line, line


def test_acl_op_init_mode_out_of_range_warns_with_torch_npus_words():
    r = run_python(_PROBE, ACL_OP_INIT_MODE="999")
    assert r.returncode == 0 and "use ok" in r.stdout, r.stderr
    assert "Get env ACL_OP_INIT_MODE not in [0, 1, 2], so reset it to the default value 0." in r.stderr
    # torch.npu.set_device initialises the device (aclrtSetDevice), so the warning comes with it alone
    r = run_python("import torch, torch_npu; torch.npu.set_device(0)", ACL_OP_INIT_MODE="999")
    assert r.returncode == 0 and "ACL_OP_INIT_MODE not in [0, 1, 2]" in r.stderr, r.stderr
