"""Reliability: what a hostile probe found, each kept as a regression test.

No deadlock (workers never need the GIL; blocked host threads release it),
no silent garbage after an asynchronous error (errors reach every dependent
sync point, failed kernels' outputs are poisoned), argument errors at the
call, device indices checked before narrowing, no crash on bad handles,
every entry point in a forked child raises, and checkpoint tags validated.
"""

import pytest
import torch_npu
import torch
from torch.testing import assert_close

from conftest import run_python


# --- 1. no deadlock between the GIL and the stream workers -------------------

_PINNED_LOOP = """
    import faulthandler, sys, torch, torch_npu
    faulthandler.dump_traceback_later({timeout}, exit=True)
    w = torch.randn(384, 384, device="npu")
    side = torch.npu.Stream()
    for step in range({steps}):
        # The pin_memory DataLoader pattern: a pinned batch copied with
        # non_blocking=True, then released by Python while the copy is queued
        # behind slow matmuls and many cheap launches.
        batch = torch.randn(64, 384).pin_memory()
        x = batch.to("npu", non_blocking=True)
        del batch
        y = x
        for _ in range(3):
            y = y @ w
        for _ in range(200):
            y = y * 1.0
        out = torch.empty(64, 384).pin_memory()
        out.copy_(y, non_blocking=True)
        del out  # pinned destination released while its D2H copy is queued
        # Host waits that hold the GIL in their bindings:
        {wait}
    torch.npu.synchronize()
    print("ok", step)
"""

_GIL_HOLDING_WAITS = {
    "storage_getitem": "float(y.untyped_storage()[0])",
    "event_record_synchronize": "e = torch.npu.Event(); e.record(); e.synchronize()",
    "wait_stream": "side.wait_stream(torch.npu.current_stream()); torch.npu.current_stream().wait_stream(side)",
    "sleep": "torch.npu._sleep(10)",
}


@pytest.mark.parametrize("wait", list(_GIL_HOLDING_WAITS))
def test_pinned_copies_released_by_python_never_deadlock(wait):
    r = run_python(_PINNED_LOOP.format(timeout=90, steps=20, wait=_GIL_HOLDING_WAITS[wait]), timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "ok 19"


def test_full_ring_behind_a_slow_kernel_with_gil_held():
    # More launches than the 4096-slot ring holds, behind a slow kernel, while
    # pinned sources die: Event.record() must wait for a slot without the GIL.
    r = run_python("""
        import faulthandler, torch, torch_npu
        faulthandler.dump_traceback_later(90, exit=True)
        a = torch.randn(1024, 1024, device="npu")
        for step in range(3):
            b = a @ a
            for i in range(5000):
                if i % 500 == 0:
                    src = torch.ones(1024).pin_memory()
                    dst = src.to("npu", non_blocking=True)
                    del src
                b.add_(0.0)
            ev = torch.npu.Event()
            ev.record()
        torch.npu.synchronize()
        print("ok", float(dst.sum()))
    """, timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "ok 1024.0"


def test_pinned_memory_outlives_its_tensor_until_the_copy_ran():
    # The source block may not be reused while the queued copy reads it.
    a = torch.randn(512, 512, device="npu")
    torch.npu.synchronize()
    expected = []
    results = []
    for i in range(8):
        b = a @ a  # keeps the stream busy
        src = torch.full((4096,), float(i)).pin_memory()
        results.append(src.to("npu", non_blocking=True))
        del src
        # A new pinned block of the same size must not alias the queued one.
        scribble = torch.full((4096,), -1.0).pin_memory()
        expected.append(torch.full((4096,), float(i)))
        del scribble, b
    for got, want in zip(results, expected):
        assert_close(got.cpu(), want)


# --- 2. no silent garbage after an asynchronous error ------------------------

def _failing_gather(src):
    # The first launch of a signature runs on the caller and would raise at
    # the call; after a valid one, the bad index is a device-side error.
    src.gather(0, torch.tensor([[0, 0, 0]], device="npu"))
    return src.gather(0, torch.tensor([[7, 0, 0]], device="npu"))


def _failure_on_a_side_stream():
    """(side stream, output of a kernel that failed on it)."""
    src = torch.randn(5, 3, device="npu")
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        bad = _failing_gather(src)
    return side, bad


def test_error_on_side_stream_reaches_the_stream_that_waited():
    side, bad = _failure_on_a_side_stream()
    torch.npu.current_stream().wait_stream(side)
    good = bad + 1
    with pytest.raises(RuntimeError, match="gather"):
        good.cpu()
    # Reported on the side stream's own sync point as well.
    with pytest.raises(RuntimeError, match="gather"):
        side.synchronize()
    torch.npu.synchronize()


def test_event_wait_carries_the_error():
    side, bad = _failure_on_a_side_stream()
    with torch.npu.stream(side):
        done = torch.npu.Event()
        done.record()
    with pytest.raises(RuntimeError, match="gather"):
        done.synchronize()
    # A wait on the event hands the error to the waiting stream too.
    torch.npu.current_stream().wait_event(done)
    with pytest.raises(RuntimeError, match="gather"):
        (bad * 2).sum().item()
    torch.npu.synchronize()


def test_failed_kernel_outputs_are_poisoned_not_stale():
    src = torch.randn(5, 3, device="npu")
    bad = _failing_gather(src)
    dependent = bad * 2 + 1
    independent = torch.arange(6.0, device="npu") * 2
    with pytest.raises(torch.AcceleratorError):
        torch.npu.synchronize()
    # After the report, nothing reads as valid data: the failed output and
    # everything computed from it are NaN; independent work is right.
    assert torch.isnan(bad.cpu()).all()
    assert torch.isnan(dependent.cpu()).all()
    assert_close(independent.cpu(), torch.arange(6.0) * 2)


def test_failed_inplace_integer_kernel_is_poisoned_with_a_marker():
    dst = torch.zeros(5, 3, dtype=torch.int64, device="npu")
    dst.scatter_(0, torch.tensor([[1, 0, 0]], device="npu"), 1)
    torch.npu.synchronize()
    dst.scatter_(0, torch.tensor([[9, 0, 0]], device="npu"), 1)
    with pytest.raises(RuntimeError, match="scatter"):
        torch.npu.synchronize()
    lowest = torch.iinfo(torch.int64).min
    assert (dst.cpu() == lowest).all()
    # The marker is out of range as an index: using it fails, never wraps.
    table = torch.randn(4, device="npu")
    with pytest.raises((IndexError, RuntimeError)):
        table[dst[0]].cpu()
        torch.npu.synchronize()
    torch.npu.synchronize()


def test_failed_out_kernel_poisons_only_its_view():
    base = torch.ones(3, 4, device="npu")
    column = base[:, 1]  # strided: its neighbours in the storage must stay intact
    src = torch.randn(5, device="npu")
    torch.gather(src, 0, torch.tensor([0, 1, 2], device="npu"), out=column)
    torch.npu.synchronize()
    torch.gather(src, 0, torch.tensor([0, 9, 2], device="npu"), out=column)
    with pytest.raises(RuntimeError, match="gather"):
        torch.npu.synchronize()
    got = base.cpu()
    assert torch.isnan(got[:, 1]).all()
    assert_close(got[:, 0], torch.ones(3))
    assert_close(got[:, 2:], torch.ones(3, 2))


# --- 3. argument and dtype errors raise at the call --------------------------

def _f8(device):
    return torch.ones(4, device=device).to(torch.float8_e4m3fn)


_CALL_ERRORS = {
    "gelu_bool": lambda d: torch.nn.functional.gelu(torch.ones(3, dtype=torch.bool, device=d)),
    "mm_int64_float32": lambda d: torch.ones(2, 2, dtype=torch.int64, device=d) @ torch.ones(2, 2, device=d),
    "float8_add": lambda d: _f8(d) + _f8(d),
    "float8_sum": lambda d: _f8(d).sum(),
    "float8_exp": lambda d: _f8(d).exp(),
    "uint64_add": lambda d: torch.ones(3, dtype=torch.uint64, device=d) + 1,
    "uint64_mm": lambda d: torch.ones(3, 1, dtype=torch.uint64, device=d) @ torch.ones(1, 3, dtype=torch.uint64, device=d),
    "uint64_floor_divide": lambda d: torch.ones(3, dtype=torch.uint64, device=d) // 2,
    "index_put_shape": lambda d: torch.zeros(5, device=d).index_put_(
        (torch.tensor([0, 1, 2], device=d),), torch.ones(2, device=d)),
}


@pytest.mark.parametrize("case", list(_CALL_ERRORS))
def test_errors_raise_at_the_call_like_cpu(case):
    fn = _CALL_ERRORS[case]
    try:
        fn("cpu")
    except Exception as e:  # noqa: BLE001
        cpu_error = e
    else:
        pytest.skip(f"{case} works on cpu in this torch build")
    with pytest.raises(type(cpu_error)) as info:
        fn("npu")
    assert str(info.value).splitlines()[0] == str(cpu_error).splitlines()[0]
    torch.npu.synchronize()  # nothing deferred


def test_index_put_shape_error_raises_at_call_after_valid_launches():
    # The shape check does not depend on the first-launch validation.
    x = torch.zeros(5, device="npu")
    idx = torch.tensor([0, 1, 2], device="npu")
    x.index_put_((idx,), torch.ones(3, device="npu"))
    x.index_put_((idx,), torch.ones(3, device="npu"))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x.index_put_((idx,), torch.ones(2, device="npu"))
    torch.npu.synchronize()
    assert_close(x.cpu(), torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0]))


# --- 4. device indices are checked before they are narrowed ------------------

_INDEX_ENTRY_POINTS = {
    "set_device": lambda i: torch.npu.set_device(i),
    "device_context": lambda i: torch.npu.device(i).__enter__(),
    "get_device_properties": lambda i: torch.npu.get_device_properties(i),
    "synchronize": lambda i: torch.npu.synchronize(i),
    "memory_allocated": lambda i: torch.npu.memory_allocated(i),
    "memory_stats": lambda i: torch.npu.memory_stats(i),
    "mem_get_info": lambda i: torch.npu.mem_get_info(i),
    "current_stream": lambda i: torch.npu.current_stream(i),
    "default_stream": lambda i: torch.npu.default_stream(i),
    "Stream": lambda i: torch.npu.Stream(i),
    "get_rng_state": lambda i: torch.npu.get_rng_state(i),
    "utilization": lambda i: torch.npu.utilization(i),
}


# Stream(-2) is not among them: a negative index gives a stream of the current
# device, as torch.cuda.Stream's (tests/test_streams.py checks it).
@pytest.mark.parametrize("entry, index", [(entry, index) for entry in _INDEX_ENTRY_POINTS
                                          for index in (256, 258, 300, 1 << 40, -2)
                                          if not (entry == "Stream" and index < 0)])
def test_out_of_range_device_index_is_rejected(entry, index):
    torch.npu.set_device(1)
    with pytest.raises((RuntimeError, ValueError)) as info:
        _INDEX_ENTRY_POINTS[entry](index)
    assert "Invalid device" in str(info.value) or "invalid" in str(info.value).lower(), str(info.value)
    assert torch.npu.current_device() == 1  # nothing was selected by truncation


def test_generator_on_a_missing_device_is_rejected():
    with pytest.raises(RuntimeError, match="Invalid device ID 99"):
        torch.Generator("npu:99")
    assert torch.Generator("npu:1").device == torch.device("npu:1")


# --- 5. no crash from bad handles or bad RNG states --------------------------

def test_rng_state_from_a_meta_tensor_raises_in_a_live_process():
    r = run_python("""
        import torch, torch_npu
        for bad in (torch.empty(16, dtype=torch.uint8, device="meta"),
                    torch.zeros(16, dtype=torch.uint8, device="npu"),
                    torch.zeros(32, dtype=torch.uint8)[::2],
                    torch.zeros(16, dtype=torch.float32)):
            try:
                torch.npu.set_rng_state(bad)
                print("accepted")
            except (RuntimeError, TypeError) as e:
                print(type(e).__name__, str(e).splitlines()[0])
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    assert lines == ["TypeError RNG state must be a torch.ByteTensor",
                     "TypeError RNG state must be a torch.ByteTensor",
                     "RuntimeError RNG state must be contiguous",
                     "TypeError RNG state must be a torch.ByteTensor"], lines


def test_rng_state_round_trip_still_works():
    torch.npu.manual_seed(3)
    state = torch.npu.get_rng_state()
    a = torch.randn(4, device="npu").cpu()
    torch.npu.set_rng_state(state)
    assert_close(torch.randn(4, device="npu").cpu(), a)


def test_elapsed_time_never_trusts_an_event_id():
    r = run_python("""
        import torch, torch_npu

        class Forged(torch.Event):
            @property
            def event_id(self):
                return 0xdeadbeef

        start = torch.npu.Event(enable_timing=True)
        start.record()
        forged = Forged(device="npu", enable_timing=True)
        forged.record()
        try:
            start.elapsed_time(forged)
            print("accepted")
        except ValueError as e:
            print("ValueError", "npu events" in str(e))
        end = torch.npu.Event(enable_timing=True)
        end.record()
        end.synchronize()
        print("ok", start.elapsed_time(end) >= 0)
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines() == ["ValueError True", "ok True"]


def test_stream_and_event_arguments_are_validated():
    # RuntimeError for parts that name no stream, as torch_npu's unpacking raises.
    with pytest.raises(RuntimeError, match="device_type"):
        torch.npu.Stream(stream_id=0, device_index=0, device_type=0)
    with pytest.raises(RuntimeError, match="stream id"):
        torch.npu.Stream(stream_id=999, device_index=0, device_type=torch.npu.current_stream().device_type)
    with pytest.raises(RuntimeError, match="Invalid device ID"):
        torch.npu.Stream(stream_id=0, device_index=77, device_type=torch.npu.current_stream().device_type)
    with pytest.raises(NotImplementedError, match="interprocess"):
        torch.npu.Event(interprocess=True)
    s = torch.npu.current_stream()
    rebuilt = torch.npu.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert rebuilt == s


# --- 6. every entry point in a forked child raises, none hangs ---------------

_FORK_CHILD = """
    import os, sys, torch, torch_npu
    x = torch.randn(256, 256, device="npu")
    torch.npu._sleep(200000)          # the parent has queued work at fork time
    for _ in range(50):
        x = x @ x * 0.0
    event = torch.npu.Event()
    event.record()
    calls = {
        "empty_cache": lambda: torch.npu.empty_cache(),
        "event_synchronize": lambda: event.synchronize(),
        "event_query": lambda: event.query(),
        "synchronize": lambda: torch.npu.synchronize(),
        "memory_allocated": lambda: torch.npu.memory_allocated(),
        "current_stream_sync": lambda: torch.npu.current_stream().synchronize(),
        "new_tensor": lambda: torch.ones(3, device="npu"),
        "op_on_parent_tensor": lambda: x + 1,
        "item": lambda: x.sum().item(),
        "set_device": lambda: torch.npu.set_device(0),
        "Stream": lambda: torch.npu.Stream(),
    }
    pid = os.fork()
    if pid == 0:
        results = []
        for name, call in calls.items():
            try:
                call()
                results.append(name + ":returned")
            except RuntimeError as e:
                results.append(name + (":fork_error" if "forked subprocess" in str(e) else ":other " + str(e)[:80]))
        print("\\n".join(results), flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    torch.npu.synchronize()
    print("parent ok", status)
"""


def test_forked_child_raises_the_fork_error_everywhere():
    r = run_python(_FORK_CHILD, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "parent ok 0", lines
    results = dict(line.split(":", 1) for line in lines[:-1])
    assert set(results.values()) == {"fork_error"}, results


# --- 7. checkpoints: storage-format tags are validated -----------------------

def _checkpoint_with_tag(tag: bytes) -> bytes:
    import io
    t = torch_npu.npu_format_cast(torch.ones(2, 2, device="npu"), 29)
    buffer = io.BytesIO()
    # Legacy format: a plain pickle, so the tag can be rewritten in place.
    torch.save(t, buffer, _use_new_zipfile_serialization=False)
    raw = buffer.getvalue()
    assert raw.count(b"npu_format_29") == 1
    return raw.replace(b"npu_format_29", tag)


@pytest.mark.parametrize("tag", [b"npu_format_99", b"npu_format_-1", b"npu_format_1x", b"npu_format_+3"])
def test_checkpoint_with_an_unknown_format_tag_is_rejected(tag):
    import io
    with pytest.raises(ValueError, match="not a known ACL format"):
        torch.load(io.BytesIO(_checkpoint_with_tag(tag)), weights_only=False)


def test_checkpoint_with_a_known_format_tag_loads():
    import io
    t = torch.load(io.BytesIO(_checkpoint_with_tag(b"npu_format_03")), weights_only=False)
    assert torch_npu.get_npu_format(t) == 3
    assert_close(t.cpu(), torch.ones(2, 2))
