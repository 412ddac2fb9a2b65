"""NPU Sanitizer (torch_npu.npu._sanitizer): cross-stream races and reuse of
memory freed while another stream used it are raised with both stack traces;
properly synchronised programs run unchanged; off, it leaves no trace."""

import textwrap

import pytest
import torch
import torch.cuda._sanitizer as csan

import torch_npu
from torch_npu import _C
from torch_npu.npu import _sanitizer

from conftest import run_python

N = 4096  # floats: a block of its own, reused by the next request of this size


@pytest.fixture
def sanitizer():
    _sanitizer.npu_sanitizer.enable()
    yield _sanitizer.npu_sanitizer.event_handler
    _sanitizer.npu_sanitizer.disable()


def key(stream):
    return _sanitizer._stream_key(stream.device_index, stream.stream_id)


def only_error(raised):
    errors = raised.value.errors
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


def test_read_on_another_stream_without_sync_is_a_race(sanitizer, capsys):
    x = torch.ones(N, device="npu")  # WRITER LINE
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        with pytest.raises(csan.CUDASanitizerErrors) as raised:
            x + 1  # READER LINE
    error = only_error(raised)
    assert type(error) is csan.UnsynchronizedAccessError
    assert error.data_ptr == x.data_ptr()
    assert error.current_access.stream == key(side)
    assert error.current_access.type is csan.AccessType.READ
    assert error.previous_access.stream == key(torch.npu.default_stream())
    assert error.previous_access.type is csan.AccessType.WRITE
    text = str(error)
    assert text.startswith("============================\nCSAN detected a possible data race on tensor with data "
                           f"pointer {x.data_ptr()}\nAccess by stream {key(side)} during kernel:\naten::add")
    assert f"Previous access by stream 0 during kernel:" in text
    # Both stack traces, each ending in the line that made the access.
    current, previous = text.split("Previous access by stream")
    assert "READER LINE" in current and "WRITER LINE" not in current
    assert "WRITER LINE" in previous
    assert text in capsys.readouterr().err


def test_write_after_read_on_another_stream_is_a_race(sanitizer):
    x = torch.ones(N, device="npu")
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        y = x * 2  # reads x on `side`
    with pytest.raises(csan.CUDASanitizerErrors) as raised:
        x.zero_()  # the default stream overwrites x while `side` may still read it
    error = only_error(raised)
    assert error.current_access.type is csan.AccessType.WRITE
    assert error.previous_access.stream == key(side)
    # The sanitizer reports after the launch, as CUDA's does: the race really
    # ran, so y is 2 or 0 depending on which worker went first.
    torch.npu.synchronize()
    assert set(y.cpu().unique().tolist()) <= {0.0, 2.0}


def test_writes_on_two_streams_race(sanitizer):
    x = torch.empty(N, device="npu")
    a, b = torch.npu.Stream(), torch.npu.Stream()
    assert key(a) != key(b)
    for s in (a, b):
        s.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(a):
        x.fill_(1)
    with torch.npu.stream(b):
        with pytest.raises(csan.CUDASanitizerErrors) as raised:
            x.fill_(2)
    error = only_error(raised)
    assert (error.current_access.stream, error.previous_access.stream) == (key(b), key(a))


def test_record_stream_does_not_order_kernels(sanitizer):
    x = torch.ones(N, device="npu")
    side = torch.npu.Stream()
    x.record_stream(side)
    with torch.npu.stream(side):
        with pytest.raises(csan.CUDASanitizerErrors):
            x + 1


def _synchronise_by(how, producer, consumer):
    if how == "wait_stream":
        consumer.wait_stream(producer)
    elif how == "event":
        event = torch.npu.Event()
        event.record(producer)
        consumer.wait_event(event)
    elif how == "event.wait":
        event = torch.npu.Event()
        event.record(producer)
        event.wait(consumer)
    elif how == "event.synchronize":
        event = torch.npu.Event()
        event.record(producer)
        event.synchronize()
    elif how == "stream.synchronize":
        producer.synchronize()
    elif how == "device synchronize":
        torch.npu.synchronize()
    elif how == "event.query":  # polled until the host saw the work complete
        event = torch.npu.Event()
        event.record(producer)
        while not event.query():
            pass
    elif how == "stream.query":
        while not producer.query():
            pass
    else:
        raise AssertionError(how)


SYNCS = ["wait_stream", "event", "event.wait", "event.synchronize", "stream.synchronize", "device synchronize",
         "event.query", "stream.query"]


@pytest.mark.parametrize("how", SYNCS)
def test_no_race_when_synchronised(sanitizer, how):
    """Producer on the default stream, consumer on a side stream and back:
    each hand-over ordered, so nothing is reported and the result is right."""
    main = torch.npu.current_stream()
    side = torch.npu.Stream()
    x = torch.arange(N, dtype=torch.float32, device="npu")
    _synchronise_by(how, main, side)
    with torch.npu.stream(side):
        y = x * 2
        y.add_(1)
    _synchronise_by(how, side, main)
    x.zero_()  # the side stream has finished reading x
    z = y + x
    assert torch.equal(z.cpu(), torch.arange(N, dtype=torch.float32) * 2 + 1)


def test_host_sync_of_an_item_orders_the_stream(sanitizer):
    x = torch.ones(N, device="npu")
    assert x.sum().item() == N  # waits for the default stream
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        y = x + 1
    torch.npu.synchronize()
    assert torch.equal(y.cpu(), torch.full((N,), 2.0))


def _use_on_side_stream_then_free(record_stream=False, wait_back=False):
    """x is allocated on the default stream and read on a side stream that is
    held (still busy) when x is freed; returns x's address, the side stream and
    the gate that holds it."""
    main = torch.npu.current_stream()
    side = torch.npu.Stream()
    x = torch.ones(N, device="npu")
    address = x.data_ptr()
    side.wait_stream(main)
    with torch.npu.stream(side):
        gate = _C._StreamGate()  # keeps the side stream's read of x in flight
        y = x * 2  # noqa: F841 (the read is the point)
    if record_stream:
        x.record_stream(side)
    if wait_back:
        main.wait_stream(side)
    del x
    return address, side, gate


# These frees also lack record_stream, which is reported as a warning when the
# memory comes back (tested below).
_FREED_WITHOUT_RECORD_STREAM = pytest.mark.filterwarnings("ignore:NPU Sanitizer:RuntimeWarning")


@_FREED_WITHOUT_RECORD_STREAM
def test_reuse_of_memory_freed_without_record_stream_is_detected(sanitizer):
    address, side, gate = _use_on_side_stream_then_free()
    with pytest.raises(csan.CUDASanitizerErrors) as raised:
        torch.zeros(N, device="npu")  # REUSE LINE: x's block, while `side` may still read it
    error = only_error(raised)
    assert isinstance(error, _sanitizer.UseOfFreedMemoryError)
    assert error.data_ptr == address
    assert error.current_access.type is csan.AccessType.WRITE
    assert error.previous_access.stream == key(side)
    assert error.previous_access.type is csan.AccessType.READ
    text = str(error)
    assert text.startswith("============================\nCSAN detected a possible data race on tensor with data "
                           f"pointer {address}")
    current, previous = text.split("Previous access by stream")
    assert "REUSE LINE" in current
    assert "y = x * 2" in previous  # the stack of the side stream's read
    assert "freed while stream" in text and "record_stream" in text
    gate.open()


@_FREED_WITHOUT_RECORD_STREAM
def test_reuse_of_a_merged_block_is_detected(sanitizer):
    """A freed block merges with its free neighbour: a bigger tensor at the
    neighbour's address covers x's memory, and still races with the read."""
    # A stream of our own with one fresh segment (blocks serve only their
    # stream), filled up: the merged block is then the only one that fits.
    torch.npu.synchronize()
    torch.npu.empty_cache()
    owner, side = torch.npu.Stream(), torch.npu.Stream()
    segment_floats = 2 * 1024 * 1024 // 4  # kSmallBuffer
    with torch.npu.stream(owner):
        before = torch.empty(N, device="npu")
        x = torch.ones(N, device="npu")
        # the rest of the segment, in small-pool requests (at most 1 MiB each)
        rest = [torch.empty(segment_floats // 2, device="npu"), torch.empty(segment_floats // 2 - 2 * N, device="npu")]
    if x.data_ptr() != before.data_ptr() + 4 * N or rest[1].data_ptr() != rest[0].data_ptr() + 2 * segment_floats:
        pytest.skip("the allocator did not place the blocks side by side in one segment")
    side.wait_stream(owner)
    with torch.npu.stream(side):
        gate = _C._StreamGate()
        y = x * 2  # noqa: F841
    try:
        address = before.data_ptr()
        del before, x  # x's block merges into the free block before it
        with torch.npu.stream(owner):
            try:
                z = torch.zeros(2 * N, device="npu")
            except csan.CUDASanitizerErrors as raised:
                errors = raised.errors
            else:
                if z.data_ptr() != address:
                    pytest.skip("the allocator served the request from another block")
                pytest.fail("reuse of x's memory inside a merged block was not detected")
    finally:
        gate.open()
    assert len(errors) == 1
    assert isinstance(errors[0], _sanitizer.UseOfFreedMemoryError)
    assert errors[0].data_ptr == address
    assert errors[0].previous_access.stream == key(side)


def test_reuse_after_record_stream_is_not_a_race(sanitizer):
    address, side, gate = _use_on_side_stream_then_free(record_stream=True)
    z = torch.zeros(N, device="npu")
    assert z.data_ptr() != address  # the allocator waits for `side` before handing x's block out
    gate.open()
    side.synchronize()
    w = torch.zeros(N, device="npu")  # x's memory may serve it now that `side` passed
    assert torch.equal((z + w).cpu(), torch.zeros(N))


def test_reuse_after_waiting_for_the_user_stream_is_not_a_race(sanitizer):
    address, side, gate = _use_on_side_stream_then_free(wait_back=True)
    gate.open()
    z = torch.zeros(N, device="npu")
    assert z.data_ptr() == address
    assert torch.equal(z.cpu(), torch.zeros(N))


@_FREED_WITHOUT_RECORD_STREAM
def test_wait_between_free_and_reuse_is_enough(sanitizer):
    address, side, gate = _use_on_side_stream_then_free()
    torch.npu.current_stream().wait_stream(side)
    gate.open()
    z = torch.zeros(N, device="npu")
    assert z.data_ptr() == address
    assert torch.equal(z.cpu(), torch.zeros(N))


def test_record_stream_returns_the_block_only_after_its_users(sanitizer, monkeypatch):
    """The deallocation the sanitizer sees is the block's return to the
    allocator: for a record_stream'd block, after the user stream passed."""
    freed = []
    original = sanitizer._handle_memory_deallocation

    def spy(data_ptr, stream=None, nbytes=1):
        freed.append(data_ptr)
        original(data_ptr, stream, nbytes)

    monkeypatch.setattr(sanitizer, "_handle_memory_deallocation", spy)
    address, side, gate = _use_on_side_stream_then_free(record_stream=True)
    torch.empty(N, device="npu")  # feeds the trace
    assert address not in freed, "reported while the side stream may still read it"
    gate.open()
    side.synchronize()
    torch.empty(N, device="npu")  # an allocation takes back what the side stream released
    assert freed.count(address) == 1


def test_disabled_sanitizer_leaves_no_trace():
    assert not _sanitizer.npu_sanitizer.enabled
    assert not _C._npu_trace_enabled()
    x = torch.ones(N, device="npu")
    # The host waits for x's fill, so the value read below is defined; nothing
    # orders the two streams, so the sanitizer, on, would report the read.
    torch.npu.synchronize()
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        y = x + 1  # a race, unreported when off
    event = torch.npu.Event()
    event.record()
    event.synchronize()
    torch.npu.synchronize()
    del x
    assert _C._drain_npu_trace() == []
    assert torch.equal(y.cpu(), torch.full((N,), 2.0))


def test_results_are_the_same_with_and_without_the_sanitizer():
    def step():
        torch.manual_seed(0)
        w = torch.randn(64, 64)
        x = torch.randn(32, 64)
        main = torch.npu.current_stream()
        side = torch.npu.Stream()
        wn, xn = w.to("npu"), x.to("npu")
        side.wait_stream(main)
        with torch.npu.stream(side):
            h = torch.relu(xn @ wn)
        main.wait_stream(side)
        return (h.softmax(-1) * 3).sum(0).cpu()

    off = step()
    _sanitizer.npu_sanitizer.enable()
    try:
        on = step()
    finally:
        _sanitizer.npu_sanitizer.disable()
    assert torch.equal(on, off)
    torch.manual_seed(0)
    w, x = torch.randn(64, 64), torch.randn(32, 64)
    assert torch.allclose(off, (torch.relu(x @ w).softmax(-1) * 3).sum(0), atol=1e-5)
    assert not _C._npu_trace_enabled()


RACE = """
    import torch, torch_npu
    from torch_npu.npu import _sanitizer
    print("enabled", _sanitizer.npu_sanitizer.enabled, flush=True)
    x = torch.ones(1024, device="npu")
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        y = x + 1
    torch.npu.synchronize()
    print("finished", y.sum().item(), flush=True)
"""


@pytest.mark.parametrize("value,on", [("1", True), ("0", False)])
def test_environment_variable_enables_it(value, on):
    r = run_python(RACE, timeout=120, TORCH_NPU_SANITIZER=value)
    if on:
        assert r.returncode != 0
        assert "enabled True" in r.stdout
        assert "CSAN detected a possible data race on tensor with data pointer" in r.stderr
        assert "CUDASanitizerErrors" in r.stderr
        assert "finished" not in r.stdout
    else:
        assert r.returncode == 0, r.stderr
        assert "enabled False" in r.stdout and "finished 2048.0" in r.stdout
        assert "CSAN" not in r.stderr


# torch_npu's record_stream check: a tensor used on a stream other than its
# allocation stream needs record_stream for that stream, unless the
# allocating stream waited for the use (wait_stream, an event, a device sync).

def _on(stream, fn):
    stream.wait_stream(torch.npu.default_stream())  # no data race: only record_stream is in question
    with torch.npu.stream(stream):
        return fn()


def _no_sync(x, s1, s2):
    _on(s1, lambda: x + 1)


def _two_streams(x, s1, s2):
    _on(s1, lambda: x + 1)
    _on(s2, lambda: x + 2)


def _recorded(x, s1, s2):
    x.record_stream(s1)
    _on(s1, lambda: x + 1)


def _allocating_stream_waits(x, s1, s2):
    _on(s1, lambda: x + 1)
    torch.npu.default_stream().wait_stream(s1)


def _allocating_stream_waits_event(x, s1, s2):
    def use():
        x + 1
        event = torch.npu.Event()
        event.record(s1)
        return event
    torch.npu.default_stream().wait_event(_on(s1, use))


def _device_sync(x, s1, s2):
    _on(s1, lambda: x + 1)
    torch.npu.synchronize()


def _use_after_the_wait(x, s1, s2):
    _allocating_stream_waits(x, s1, s2)
    _on(s1, lambda: x + 2)


def _use_after_the_event(x, s1, s2):
    _allocating_stream_waits_event(x, s1, s2)
    _on(s1, lambda: x + 2)


def _view_used(x, s1, s2):
    view = x[10:50]
    _on(s1, lambda: view + 1)


def _base_recorded_view_used(x, s1, s2):
    x.record_stream(s1)
    view = x[10:50]
    _on(s1, lambda: view + 1)


def _view_recorded_base_used(x, s1, s2):
    x[10:50].record_stream(s1)
    _on(s1, lambda: x + 1)


def _same_stream(x, s1, s2):
    x + 1


@pytest.mark.parametrize("scenario,warned", [
    (_no_sync, 1), (_two_streams, 2), (_recorded, 0), (_allocating_stream_waits, 0),
    (_allocating_stream_waits_event, 0), (_device_sync, 0), (_use_after_the_wait, 1), (_use_after_the_event, 1),
    (_view_used, 1), (_base_recorded_view_used, 0), (_view_recorded_base_used, 0), (_same_stream, 0),
], ids=lambda v: v.__name__.strip("_") if callable(v) else str(v))
def test_missing_record_stream_is_reported(sanitizer, scenario, warned):
    x = torch.randn(100, device="npu")
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    scenario(x, s1, s2)
    found = sanitizer.flush_record_stream_warnings()
    assert len(found) == warned, [str(w) for w in found]
    # Findings name streams by their aclrtStream handles, as real torch_npu's do.
    assert {w.usage_stream for w in found} <= {int(s1.npu_stream), int(s2.npu_stream)}
    default = int(torch.npu.default_stream().npu_stream)
    assert all(w.data_ptr == x.untyped_storage().data_ptr() and w.allocation_stream == default for w in found)
    if found:
        assert "record_stream" in str(found[0]) and "Last use on stream" in str(found[0])


def test_record_stream_covers_only_its_stream(sanitizer):
    x = torch.randn(100, device="npu")
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    x.record_stream(s1)
    _two_streams(x, s1, s2)
    assert [w.usage_stream for w in sanitizer.flush_record_stream_warnings()] == [int(s2.npu_stream)]


@pytest.mark.parametrize("record_new", [False, True])
def test_a_new_allocation_starts_with_no_record_stream(sanitizer, record_new):
    s = torch.npu.Stream()
    x = torch.randn(100, device="npu")
    x.record_stream(s)
    del x
    torch.npu.synchronize()
    y = torch.randn(100, device="npu")
    if record_new:
        y.record_stream(s)
    _on(s, lambda: y + 1)
    found = sanitizer.flush_record_stream_warnings()
    assert len(found) == (0 if record_new else 1)


def test_missing_record_stream_is_kept_when_the_memory_comes_back(sanitizer):
    s = torch.npu.Stream()
    x = torch.randn(100, device="npu")
    address = x.data_ptr()
    _on(s, lambda: x + 1)
    del x
    with pytest.warns(RuntimeWarning, match="without record_stream"):
        found = sanitizer.record_stream_errors  # analyses the free first
    assert [w.data_ptr for w in found] == [address]
    assert [w.data_ptr for w in sanitizer.flush_record_stream_warnings()] == [address]
    assert sanitizer.record_stream_errors == []


@pytest.mark.skipif(torch.npu.device_count() < 2, reason="needs two npu devices")
def test_streams_of_another_device_are_told_apart(sanitizer):
    with torch.npu.device(1):
        side = torch.npu.Stream()
        x = torch.ones(N, device="npu:1")
        torch.npu.synchronize(0)  # the other device: orders nothing here
        with torch.npu.stream(side):
            with pytest.raises(csan.CUDASanitizerErrors) as raised:
                x + 1
        error = only_error(raised)
        assert (error.current_access.stream, error.previous_access.stream) == (key(side), key(torch.npu.default_stream(1)))
        assert key(torch.npu.default_stream(1)) != key(torch.npu.default_stream(0))
        y = torch.ones(N, device="npu:1")
        torch.npu.synchronize(1)
        with torch.npu.stream(side):
            z = y + 1
        torch.npu.current_stream().wait_stream(side)  # z.cpu() reads on npu:1's current stream
    assert torch.equal(z.cpu(), torch.full((N,), 2.0))


def test_the_stream_check_is_torch_npus_module_split_with_runtime_events_as_callbacks(sanitizer, monkeypatch):
    from torch_npu.npu import _stream_check
    from torch_npu.utils import _npu_trace
    assert _sanitizer.npu_sanitizer.mode == _sanitizer.SanitizerMode.STREAM
    assert isinstance(sanitizer, _stream_check.NPURecordStreamHandler)
    assert isinstance(_sanitizer.npu_sanitizer.dispatch, _stream_check.NPUSanitizerDispatchMode)
    seen = []
    _npu_trace.register_callback_for_npu_memory_allocation(lambda ptr, stream, nbytes: seen.append((ptr, nbytes)),
                                                           "test")
    x = torch.empty(N, device="npu")  # the dispatch mode delivers the allocation before analysing empty
    assert (x.untyped_storage().data_ptr(), N * 4) in [(p, n) for p, n in seen]
    _sanitizer.npu_sanitizer.disable()
    assert _npu_trace.NPUMemoryAllocationCallbacks.callback_list == []  # a stopped tool leaves no callbacks


def test_the_kernel_check_needs_its_debug_path(monkeypatch):
    monkeypatch.delenv("ASCEND_OPP_DEBUG_PATH", raising=False)
    with pytest.warns(UserWarning, match="ASCEND_OPP_DEBUG_PATH is not set"):
        assert _sanitizer.npu_sanitizer.enable_kernel_check() is False


KERNEL_CHECK = """
    import os, torch, torch_npu
    a = torch.ones(3, device="npu")
    b = a + 1
    print("values", b.cpu().tolist())
    kernels = "opp_debug_path/built-in/op_impl/ai_core/tbe/kernel"
    print("package", os.path.islink(kernels), os.path.realpath(kernels) == os.path.realpath(os.environ["DBG"] +
          "/built-in/op_impl/ai_core/tbe/kernel"), os.path.exists("opp_debug_path/vendors/custom/op.so"),
          os.environ["ASCEND_OPP_PATH"] == os.path.abspath("opp_debug_path"), os.environ["ASCEND_LAUNCH_BLOCKING"])
    torch.ones(2, device="npu")[torch.tensor([5], device="npu")]  # an error raises at its operator
"""


def test_the_kernel_check_traces_each_operator_synchronously_and_builds_the_debug_package(tmp_path):
    opp, dbg, run = tmp_path / "opp", tmp_path / "dbg", tmp_path / "run"
    (opp / "vendors" / "custom").mkdir(parents=True)
    (opp / "vendors" / "custom" / "op.so").write_text("x")
    (dbg / "built-in" / "op_impl" / "ai_core" / "tbe" / "kernel").mkdir(parents=True)
    run.mkdir()
    code = f"import os; os.chdir({str(run)!r})\n" + textwrap.dedent(KERNEL_CHECK)
    r = run_python(code, timeout=120, TORCH_NPU_SANITIZER="1", ASCEND_OPP_PATH=str(opp),
                   ASCEND_OPP_DEBUG_PATH=str(dbg), DBG=str(dbg))
    out = r.stdout
    assert "====== Start acl operator aten.add.Tensor" in out and "====== aten.add.Tensor python stack info:" in out
    stack = out.split("====== aten.add.Tensor python stack info:")[1].split("======")[0]
    assert 'File "<string>", line 5' in stack  # the user's line, `b = a + 1`
    assert "values [2.0, 2.0, 2.0]" in out and "package True True True True 1" in out
    assert r.returncode != 0 and "index" in r.stderr.lower()  # the bad index raised at its operator
    assert "====== Start acl operator aten.index.Tensor" in out
    assert not (run / "opp_debug_path").exists()  # removed at exit


@pytest.fixture
def debug_package(tmp_path, monkeypatch):
    """An operator package, a debug kernel build and a run folder; the
    environment the manager redirects is restored afterwards."""
    opp, dbg, run = tmp_path / "opp", tmp_path / "dbg", tmp_path / "run"
    (opp / "built-in" / "op_impl" / "ai_core" / "tbe" / "kernel").mkdir(parents=True)
    (opp / "built-in" / "op_impl" / "ai_core" / "tbe" / "kernel" / "release.o").write_text("r")
    (dbg / "built-in" / "op_impl" / "ai_core" / "tbe" / "kernel").mkdir(parents=True)
    (dbg / "built-in" / "op_impl" / "ai_core" / "tbe" / "kernel" / "debug.o").write_text("d")
    run.mkdir()
    monkeypatch.chdir(run)
    monkeypatch.setenv("ASCEND_OPP_PATH", str(opp))
    monkeypatch.setenv("ASCEND_OPP_DEBUG_PATH", str(dbg))
    monkeypatch.delenv("ASCEND_LAUNCH_BLOCKING", raising=False)
    return opp, dbg, run


def test_the_debug_package_replaces_an_earlier_copy_and_clearing_spares_the_debug_kernels(debug_package):
    from torch_npu.npu._kernel_check import KernelPathManager

    opp, dbg, run = debug_package
    manager = KernelPathManager()
    copy = run / "opp_debug_path"
    kernels = copy / "built-in" / "op_impl" / "ai_core" / "tbe" / "kernel"
    assert sorted(p.name for p in kernels.iterdir()) == ["debug.o"]  # the release kernel is not in the copy
    (copy / "stale.txt").write_text("from an earlier run")
    manager.make_opp_debug_path()
    assert not (copy / "stale.txt").exists() and kernels.is_symlink()
    manager.clear_debug_env()
    assert not copy.exists() and not (run / "opp_debug.lock").exists()
    assert (dbg / "built-in" / "op_impl" / "ai_core" / "tbe" / "kernel" / "debug.o").exists()
    assert (opp / "built-in" / "op_impl" / "ai_core" / "tbe" / "kernel" / "release.o").exists()


def test_a_rank_that_finds_the_directory_locked_leaves_the_package_to_the_holder(debug_package, capsys):
    import fcntl
    import os

    from torch_npu.npu._kernel_check import KernelPathManager

    _, _, run = debug_package
    with open(run / "opp_debug.lock", "w") as other_rank:  # flock conflicts between open files, even in one process
        fcntl.flock(other_rank, fcntl.LOCK_EX)
        manager = KernelPathManager()
    assert "[WARNING] Permission denied to execute" in capsys.readouterr().out
    assert not (run / "opp_debug_path").exists()
    assert os.environ["ASCEND_OPP_PATH"] == manager.opp_debug_path and os.environ["ASCEND_LAUNCH_BLOCKING"] == "1"


def test_a_missing_operator_package_is_reported_and_nothing_is_built(debug_package, monkeypatch, capsys):
    from torch_npu.npu._kernel_check import KernelPathManager

    _, _, run = debug_package
    monkeypatch.setenv("ASCEND_OPP_PATH", str(run / "nowhere"))
    KernelPathManager()
    assert "[ERROR] ASCEND_OPP_PATH is not exists." in capsys.readouterr().out
    assert not (run / "opp_debug_path").exists()


def test_erase_stream_takes_back_a_recorded_stream_and_ignores_unknown_memory():
    from torch_npu.npu._stream_check import NPURecordStreamHandler, NPUTensorInfo

    handler = NPURecordStreamHandler()
    handler._handle_memory_allocation(4096, stream=1)
    handler._handle_record_stream(4096, 2)
    handler._handle_record_stream(4096, 3)
    handler._handle_erase_stream(4096, 2)
    assert handler._npu_tensors[4096] == NPUTensorInfo(allocation_stream=1, recorded_streams={3})
    handler._handle_erase_stream(8192, 2)  # a late erase for memory already freed
    assert 8192 not in handler._npu_tensors


def test_a_factorys_output_is_written_by_its_stream_and_its_input_is_not_read():
    # Real torch_npu's sanitizer counts a factory's fresh output as written
    # (CSAN counts it as metadata only): a use on another stream without a
    # wait is then a race on it.
    from torch_npu.npu._stream_check import NPUArgumentHandler

    a = torch.ones(5, 3, device="npu")
    handler = NPUArgumentHandler()
    schema = torch.ops.aten.empty_like.default._schema
    handler.parse_inputs(schema, (a,), {}, is_factory=True)
    out = torch.empty_like(a)
    handler.parse_outputs(schema, out, is_factory=True)
    assert handler.dataptrs_read == set()
    assert handler.dataptrs_written == {out.data_ptr()} == handler.outputs
