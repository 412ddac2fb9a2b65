"""Asynchronous execution: kernels are queued on streams and run later on
worker threads, in order; errors surface at the next sync point; streams and
events order work across queues."""

import time

import pytest
import torch
from torch.testing import assert_close

from conftest import run_python


def _chain(x, steps=200):
    # Many small dependent kernels: any reordering or lost write shows up.
    for i in range(steps):
        x = x * 1.01 + (i % 7) * 0.001
        if i % 10 == 0:
            x = torch.tanh(x)
        if i % 25 == 0:
            x.add_(x.mean())
    return x


def test_long_chain_is_ordered():
    cpu = torch.randn(64, 64)
    out_n = _chain(cpu.npu())
    out_c = _chain(cpu)
    # The whole chain was queued; .cpu() is the sync point.
    assert_close(out_n.cpu(), out_c)


def test_inplace_chain_on_same_buffer():
    n = torch.zeros(1000, device="npu")
    for i in range(500):
        n.add_(1)
        n.mul_(1)
    assert n.sum().item() == 500_000


def test_write_then_read_through_views_in_order():
    n = torch.zeros(10, 10, device="npu")
    for i in range(10):
        n[i].fill_(i)
        n[:, i] += n[i, 0]
    c = torch.zeros(10, 10)
    for i in range(10):
        c[i].fill_(i)
        c[:, i] += c[i, 0]
    assert_close(n.cpu(), c)


def test_freed_memory_reuse_is_safe():
    # A buffer freed while its kernel is still queued may be reused only in
    # stream order: results must be unaffected.
    cpu = torch.randn(256, 256)
    acc_n = torch.zeros(256, 256, device="npu")
    acc_c = torch.zeros(256, 256)
    for i in range(50):
        tmp_n = cpu.npu() * i
        acc_n += tmp_n
        del tmp_n
        acc_c += cpu * i
    assert_close(acc_n.cpu(), acc_c)


def test_synchronize_all_forms():
    x = torch.ones(10, device="npu") * 3
    torch.npu.synchronize()
    torch.npu.synchronize(0)
    torch.npu.synchronize("npu:0")
    torch.npu.synchronize(torch.device("npu:0"))
    assert x.sum().item() == 30


# --- asynchronous errors ---------------------------------------------------------

# The first launch of an op with a given signature runs on the caller, so it
# raises at the call (Note [Argument errors raise at the call] in launch.h).
# A valid launch first makes the bad one queued: its index error (a
# device-side error, as on CUDA) then surfaces at the next sync point.

def _bad_gather():
    src = torch.randn(5, 3).npu()
    src.gather(0, torch.tensor([[1, 0, 0]]).npu())
    return src.gather(0, torch.tensor([[7, 0, 0]]).npu())


def _bad_scatter():
    dst = torch.zeros(5, 3).npu()
    dst.scatter_(0, torch.tensor([[1, 0, 0]]).npu(), 1.0)
    return dst.scatter_(0, torch.tensor([[7, 0, 0]]).npu(), 1.0)


def _bad_index_add():
    dst = torch.zeros(5, 3).npu()
    dst.index_add_(0, torch.tensor([1]).npu(), torch.ones(1, 3).npu())
    return dst.index_add_(0, torch.tensor([7]).npu(), torch.ones(1, 3).npu())


ASYNC_FAILURES = {"gather": _bad_gather, "scatter": _bad_scatter, "index_add": _bad_index_add}


def _sync_points():
    return {
        "synchronize": lambda: torch.npu.synchronize(),
        "item": lambda: torch.ones(1, device="npu").item(),
        "cpu": lambda: torch.ones(3, device="npu").cpu(),
        "stream_synchronize": lambda: torch.npu.current_stream().synchronize(),
    }


@pytest.mark.parametrize("op", list(ASYNC_FAILURES))
@pytest.mark.parametrize("sync", ["synchronize", "item", "cpu", "stream_synchronize"])
def test_async_error_raised_at_sync_point(op, sync):
    torch.npu.synchronize()
    ASYNC_FAILURES[op]()  # stage 1 accepts the launch
    with pytest.raises(RuntimeError) as info:
        _sync_points()[sync]()
    msg = str(info.value)
    assert op in msg, msg
    assert "ASCEND_LAUNCH_BLOCKING" in msg
    assert "asynchronously" in msg
    # The error is reported once, then cleared: the device works again.
    torch.npu.synchronize()
    a = torch.randn(8, 8)
    assert_close((a.npu() @ a.npu()).cpu(), a @ a)


def test_async_error_is_accelerator_error_with_code():
    _bad_gather()
    with pytest.raises(torch.AcceleratorError) as info:
        torch.npu.synchronize()
    msg = str(info.value)
    # torch_npu's error suffix: [ERROR] date (PID:.., Device:0, RankID:..) ERRxxxxx PTA ...
    assert "[ERROR]" in msg and "Device:0" in msg and "ERR" in msg


def test_call_time_errors_are_raised_at_call():
    # Argument errors found in stage 1 (shapes, dtypes) raise at once, like CPU.
    a = torch.randn(3, 4).npu()
    with pytest.raises(RuntimeError):
        a @ a
    with pytest.raises(RuntimeError):
        a + torch.randn(5).npu()
    torch.npu.synchronize()  # nothing pending


def test_operator_argument_errors_carry_torch_npus_ops_suffix():
    # As op-plugin's checks: ATen's message, then "ERR01001 OPS invalid
    # parameter" on the suffix line; the Python type is ATen's.
    x = torch.tensor(1).npu()
    with pytest.raises(RuntimeError, match=r"rounding_mode to be one of None.*\n\[ERROR\] .* ERR01001 OPS invalid "
                                           r"parameter$") as info:
        torch.div(x, x, rounding_mode="test")
    cpu_message = None
    try:
        torch.div(torch.tensor(1), torch.tensor(1), rounding_mode="test")
    except RuntimeError as e:
        cpu_message = str(e)
    assert str(info.value).startswith(cpu_message + "\n[ERROR] ")
    with pytest.raises(IndexError, match="ERR01001 OPS invalid parameter"):
        torch.ones(2, 3, device="npu").sum(dim=5)
    r = run_python("""
        import torch, torch_npu
        x = torch.tensor(1).npu()
        try:
            torch.div(x, x, rounding_mode="test")
        except RuntimeError as e:
            print(repr(str(e)))
    """, TORCH_NPU_COMPACT_ERROR_OUTPUT="1")
    assert r.returncode == 0, r.stderr
    assert "[ERROR]" not in r.stdout and "rounding_mode" in r.stdout


@pytest.mark.parametrize("op,call", [
    ("index_select", lambda: torch.randn(5, 3).npu().index_select(0, torch.tensor([7]).npu())),
    ("embedding", lambda: torch.nn.functional.embedding(torch.tensor([7]).npu(), torch.randn(5, 3).npu())),
])
def test_index_errors_raise_at_call_or_next_sync(op, call):
    # Whether a kernel checks its indices in stage 1 or stage 2 is an
    # implementation choice; either way the error must surface by the next
    # sync point, name an op, and leave the device usable.
    with pytest.raises((IndexError, RuntimeError)) as info:
        call()
        torch.npu.synchronize()
    assert "index out of range" in str(info.value)
    torch.npu.synchronize()
    assert (torch.ones(4, device="npu") * 2).sum().item() == 8


def test_work_queued_after_error_before_sync():
    # Work enqueued behind a failed kernel must not silently produce garbage
    # that later looks valid: the error is raised at the sync point, and new
    # work after it is correct.
    _bad_gather()
    y = torch.arange(5.0).to("npu", non_blocking=True) * 2
    with pytest.raises(RuntimeError):
        y.cpu()
    z = torch.arange(5.0).npu() * 2
    assert_close(z.cpu(), torch.arange(5.0) * 2)


def test_a_blocking_copy_to_the_device_reports_the_streams_error():
    # It waits for the stream first, as real torch_npu's does (Note [A blocking
    # copy to the device is done when it returns] in csrc/ops/copy.cpp).
    _bad_gather()
    with pytest.raises(RuntimeError, match="gather"):
        torch.arange(5.0).npu()
    z = torch.arange(5.0).npu() * 2
    assert_close(z.cpu(), torch.arange(5.0) * 2)


def test_error_on_other_device_does_not_poison_this_one():
    with torch.npu.device(1):
        _bad_gather()
    # Device 0 is unaffected.
    assert torch.ones(3, device="npu:0").sum().item() == 3
    with pytest.raises(RuntimeError, match="gather"):
        torch.npu.synchronize(1)
    torch.npu.synchronize(1)


def test_async_error_in_subprocess_without_sync():
    # An error nobody waits for must not hang or crash interpreter exit.
    r = run_python("""
        import torch, torch_npu
        src = torch.randn(5, 3).npu()
        src.gather(0, torch.tensor([[1, 0, 0]]).npu())
        src.gather(0, torch.tensor([[7, 0, 0]]).npu())
        print("done")
    """)
    assert r.stdout.strip() == "done"
    assert r.returncode in (0, 1), r.stderr  # never a signal (negative rc)


# --- streams ---------------------------------------------------------------------

def test_default_and_current_stream():
    d = torch.npu.default_stream()
    c = torch.npu.current_stream()
    assert d == c
    assert d.device == torch.device("npu:0")
    assert torch.npu.default_stream(1).device == torch.device("npu:1")
    assert torch.npu.current_stream("npu:2").device_index == 2


def test_stream_context():
    s = torch.npu.Stream()
    assert s.device == torch.device("npu:0")
    assert s != torch.npu.default_stream()
    with torch.npu.stream(s):
        assert torch.npu.current_stream() == s
        x = torch.ones(100, device="npu") * 2
    assert torch.npu.current_stream() == torch.npu.default_stream()
    s.synchronize()
    assert s.query()
    assert x.sum().item() == 200


def test_stream_on_other_device():
    s = torch.npu.Stream(device=3)
    assert s.device_index == 3
    with torch.npu.stream(s):
        # torch.npu.stream changes the current stream of the stream's device.
        assert torch.npu.current_stream(3) == s
    assert torch.npu.current_stream(3) == torch.npu.default_stream(3)


def test_set_stream():
    s = torch.npu.Stream()
    torch.npu.set_stream(s)
    try:
        assert torch.npu.current_stream() == s
    finally:
        torch.npu.set_stream(torch.npu.default_stream())
    assert torch.npu.current_stream() == torch.npu.default_stream()


def test_wait_stream_orders_producer_consumer():
    producer = torch.npu.Stream()
    cpu = torch.randn(512, 512)
    with torch.npu.stream(producer):
        a = cpu.npu()
        for _ in range(20):
            a = a * 1.001
    torch.npu.current_stream().wait_stream(producer)
    out = (a + 1).cpu()
    assert_close(out, cpu * 1.001 ** 20 + 1, rtol=1e-4, atol=1e-4)


def test_record_stream():
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        x = torch.ones(1000, device="npu") * 2
    torch.npu.current_stream().wait_stream(s)
    # x was allocated on s but is used on the default stream: tell the
    # allocator, so the block is not reused by s before that use finished.
    x.record_stream(torch.npu.current_stream())
    y = x + 1
    del x
    assert y.sum().item() == 3000
    assert "aten::record_stream" not in torch.npu.fallback_counts()


def test_wait_event_between_streams():
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    ev = torch.npu.Event()
    with torch.npu.stream(s1):
        x = torch.full((1000,), 2.0, device="npu")
        for _ in range(30):
            x = x + 1
        ev.record()
    with torch.npu.stream(s2):
        s2.wait_event(ev)
        y = x * 10
    s2.synchronize()
    assert y.sum().item() == 1000 * 32 * 10


def test_event_record_query_synchronize():
    ev = torch.npu.Event()
    x = torch.randn(200, 200, device="npu")
    for _ in range(10):
        x = x @ x.t() / 200
    ev.record()
    ev.synchronize()
    assert ev.query() is True
    # After the event completed, the work before it is visible.
    assert torch.isfinite(x).all().item()
    ev2 = torch.npu.Event()
    ev2.record(torch.npu.current_stream())
    ev2.wait()
    torch.npu.current_stream().wait_event(ev2)


def test_event_elapsed_time():
    start = torch.npu.Event(enable_timing=True)
    end = torch.npu.Event(enable_timing=True)
    start.record()
    x = torch.randn(256, 256, device="npu")
    for _ in range(5):
        x = x @ x
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    assert ms >= 0.0


def test_event_elapsed_time_requires_timing():
    a, b = torch.npu.Event(), torch.npu.Event()
    a.record()
    b.record()
    b.synchronize()
    # torch_npu raises RuntimeError here (TORCH_CHECK), like CUDA; ValueError
    # is accepted too, the message must say what to do.
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        a.elapsed_time(b)


def test_stream_record_event():
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        torch.ones(10, device="npu").add_(1)
    ev = s.record_event()
    ev.synchronize()
    assert ev.query()


def test_generic_torch_stream_and_event():
    s = torch.Stream(device="npu")
    assert s.device_type == torch.device("npu").type or s.device.type == "npu"
    e = torch.Event(device="npu", enable_timing=True)
    e2 = torch.Event(device="npu", enable_timing=True)
    with s:
        e.record(s)
        y = torch.arange(1000.0, device="npu").sum()
        e2.record(s)
    e2.synchronize()
    assert e2.query()
    assert e.elapsed_time(e2) >= 0
    s.synchronize()
    assert y.item() == sum(range(1000))
    # torch.accelerator's generic stream API
    assert torch.accelerator.current_stream().device.type == "npu"
    torch.accelerator.synchronize()


def test_streams_on_separate_queues_all_complete():
    streams = [torch.npu.Stream() for _ in range(4)]
    outs = []
    for i, s in enumerate(streams):
        with torch.npu.stream(s):
            t = torch.full((100,), float(i), device="npu")
            for _ in range(10):
                t = t + 1
            outs.append(t)
    torch.npu.synchronize()  # waits for every stream of the device
    for i, t in enumerate(outs):
        assert t.sum().item() == (i + 10) * 100


def test_stream_priority():
    s = torch.npu.Stream(priority=-1)
    assert s.priority in (-1, 0)
    assert torch.npu.Stream().priority == 0


@pytest.mark.parametrize("device_threads", ["0", "1"])
def test_interpreter_exit_with_pending_work_and_autograd_threads(device_threads):
    # Backward passes on several devices (on autograd's device threads with
    # VNPU_AUTOGRAD_DEVICE_THREADS=1, else on their callers) and a kernel
    # still queued at exit: the interpreter must exit cleanly (a teardown race
    # on the device threads used to abort with "terminate called without an
    # active exception"). Repeated because the race is not hit every time.
    code = """
        import threading
        import torch, torch_npu
        m0 = torch.nn.Linear(32, 32).npu()
        m1 = torch.nn.Linear(32, 32).to("npu:1")
        for _ in range(3):
            m0(torch.randn(8, 32, device="npu")).sum().backward()
            m1(torch.randn(8, 32, device="npu:1")).sum().backward()
        def worker():
            x = torch.randn(100, device="npu:2", requires_grad=True)
            (x * 2).sum().backward()
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        y = torch.randn(512, 512, device="npu") @ torch.randn(512, 512, device="npu")
        print("end")
    """
    for _ in range(3):
        r = run_python(code, VNPU_AUTOGRAD_DEVICE_THREADS=device_threads)
        assert r.returncode == 0, f"rc={r.returncode} {r.stderr[-2000:]}"
        assert r.stdout.strip() == "end"


def test_a_non_blocking_copy_to_pinned_memory_from_an_idle_stream_is_done_when_it_returns():
    # Note [A non_blocking copy to the host from an idle stream is done at once]
    # in csrc/ops/copy.cpp: programs read it at once (ZeroRedundancyOptimizer
    # pickles the state it consolidated with non_blocking=True).
    for n in (1, 3, 1000):
        x = torch.arange(float(n)).npu() * 3
        torch.npu.synchronize()
        y = x.to("cpu", non_blocking=True)
        assert y.is_pinned()
        assert torch.equal(y, torch.arange(float(n)) * 3)  # no sync in between


def test_a_non_blocking_copy_to_pinned_memory_behind_queued_kernels_stays_asynchronous():
    a = torch.randn(768, 768).npu()
    for _ in range(6):
        a = torch.tanh(a @ a)
    y = a[:2, :2].to("cpu", non_blocking=True)
    queued = not torch.npu.current_stream().query()
    torch.npu.synchronize()
    assert queued, "the copy waited for the kernels before it"
    assert_close(y, a[:2, :2].cpu())


def test_a_non_blocking_copy_to_the_host_reports_the_streams_error():
    x = torch.ones(2).npu()
    _bad_gather()
    while not torch.npu.current_stream().query():  # idle, the error recorded, nobody synchronized
        time.sleep(0.001)
    with pytest.raises(RuntimeError, match="gather"):
        x.to("cpu", non_blocking=True)
