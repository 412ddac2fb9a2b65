"""Streams run concurrently and are ordered only by events, as on a real NPU."""

import contextlib

import pytest
import torch

import torch_npu


@contextlib.contextmanager
def held(stream):
    """Holds `stream` at a gate for the block: its later work waits until the
    block ends, with certainty (no sleeping and hoping).

    The first launch of an op signature runs on the caller once its stream
    drained (Note [Argument errors raise at the call] in csrc/launch/launch.h),
    which a held stream never does: the ops used inside are launched once
    beforehand."""
    x = torch.ones(4, device="npu")
    big = torch.ones(1 << 16, device="npu")
    for s in (stream, torch.npu.current_stream()):
        with torch.npu.stream(s):
            (x * 2, x * 3, x.clone(), x.fill_(1.0), x.add_(0), big * 2)
    torch.npu.synchronize()
    with torch.npu.stream(stream):
        gate = torch_npu._C._StreamGate()
    try:
        yield
    finally:
        gate.open()


def test_streams_run_concurrently():
    a, b = torch.npu.Stream(), torch.npu.Stream()
    x = torch.ones(4, device="npu")
    torch.npu.synchronize()
    with held(a):
        with torch.npu.stream(a):
            ya = x * 2
        with torch.npu.stream(b):
            yb = x * 3
        b.synchronize()
        # b finished its work while a is held: they do not share a queue.
        assert not a.query()
        assert torch.equal(yb.cpu(), torch.full((4,), 3.0))
    a.synchronize()
    assert torch.equal(ya.cpu(), torch.full((4,), 2.0))


def test_wait_event_orders_streams():
    a, b = torch.npu.Stream(), torch.npu.Stream()
    x = torch.zeros(4, device="npu")
    torch.npu.synchronize()
    with held(a):
        with torch.npu.stream(a):
            x.fill_(1.0)
            done = torch.npu.Event()
            done.record(a)
        with torch.npu.stream(b):
            b.wait_event(done)
            seen = x.clone()
        assert not b.query()  # b waits for a, which is held
    b.synchronize()
    assert torch.equal(seen.cpu(), torch.ones(4))


def test_without_wait_the_other_stream_does_not_see_the_result():
    a, b = torch.npu.Stream(), torch.npu.Stream()
    x = torch.zeros(4, device="npu")
    torch.npu.synchronize()
    with held(a):
        with torch.npu.stream(a):
            x.fill_(1.0)
        with torch.npu.stream(b):
            seen = x.clone()  # no wait: runs while a is held
        b.synchronize()
    assert torch.equal(seen.cpu(), torch.zeros(4))
    torch.npu.synchronize()
    assert torch.equal(x.cpu(), torch.ones(4))


def test_wait_stream():
    a, b = torch.npu.Stream(), torch.npu.Stream()
    x = torch.zeros(4, device="npu")
    torch.npu.synchronize()
    with held(a):
        with torch.npu.stream(a):
            x.add_(5)
        b.wait_stream(a)
        with torch.npu.stream(b):
            y = x * 2
        assert not b.query()
    b.synchronize()
    assert torch.equal(y.cpu(), torch.full((4,), 10.0))


def test_record_stream_delays_reuse():
    """A block freed after use on another stream is not handed out again
    until that stream's work is done."""
    a = torch.npu.Stream()
    x = torch.ones(1 << 16, device="npu")
    torch.npu.synchronize()
    with held(a):
        with torch.npu.stream(a):
            y = x * 2  # reads x on stream a, once a is released
        x.record_stream(a)
        ptr = x.data_ptr()
        del x
        z = torch.full((1 << 16,), 7.0, device="npu")  # same size, default stream
        assert z.data_ptr() != ptr
    torch.npu.synchronize()
    assert torch.equal(y.cpu(), torch.full((1 << 16,), 2.0))


def test_without_record_stream_the_block_is_reused_on_its_stream():
    # The contrast that makes the test above meaningful: with no record_stream
    # the freed block is handed out again at once to the same stream.
    x = torch.ones(1 << 16, device="npu")
    ptr = x.data_ptr()
    del x
    z = torch.full((1 << 16,), 7.0, device="npu")
    assert z.data_ptr() == ptr


def test_generic_stream_and_event_api():
    s = torch.Stream(device="npu")
    e = torch.Event(device="npu", enable_timing=True)
    e2 = torch.Event(device="npu", enable_timing=True)
    e.record(s)
    with torch.npu.stream(s):
        torch.npu._sleep(20_000)
    e2.record(s)
    e2.synchronize()
    assert e.query() and e2.query()
    assert e.elapsed_time(e2) >= 15.0  # milliseconds; the sleep alone is 20 ms
    assert s.device.type == "npu"


def test_event_elapsed_time_without_timing_raises():
    e1, e2 = torch.npu.Event(), torch.npu.Event()
    e1.record()
    e2.record()
    e2.synchronize()
    with pytest.raises(ValueError, match="enable_timing"):
        e1.elapsed_time(e2)


def test_event_elapsed_time_not_recorded_raises():
    e1, e2 = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    e2.record()
    with pytest.raises(ValueError, match="recorded"):
        e1.elapsed_time(e2)


def test_many_python_threads_devices_and_streams():
    """Eight Python threads, four devices, a pool stream each: results stay right."""
    import threading
    errors = []

    def work(i):
        try:
            device = f"npu:{i % 4}"
            torch.npu.set_device(i % 4)
            with torch.npu.stream(torch.npu.Stream()):
                base = torch.randn(64, 64)
                x = base.to(device)
                for _ in range(20):
                    x = torch.relu(x @ x.t() / 64)
                expected = base
                for _ in range(20):
                    expected = torch.relu(expected @ expected.t() / 64)
                torch.testing.assert_close(x.cpu(), expected, atol=1e-5, rtol=1e-4)
        except Exception as e:  # collected, asserted in the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_stream_record_event_keeps_npu_events():
    stream = torch.npu.Stream()
    made = stream.record_event()
    assert type(made) is torch.npu.Event
    given = torch.npu.Event(enable_timing=True)
    assert stream.record_event(given) is given
    assert repr(torch.npu.Event()) == "<torch_npu.npu.Event uninitialized>"
    assert repr(given).startswith("<torch_npu.npu.Event 0x") and given.npu_event == given.event_id
    assert "torch_npu.npu.Stream" in repr(stream)


def test_event_recorded_time_orders_markers_and_waits_for_them():
    stream = torch.npu.current_stream()
    first = torch.npu.Event(enable_timing=True)
    first.record(stream)
    torch.npu._sleep(20000)  # the second marker runs 20 ms after the first
    second = torch.npu.Event(enable_timing=True)
    second.record(stream)
    later = second.recorded_time()  # waits for the marker
    assert second.query()
    assert isinstance(later, int) and later - first.recorded_time() >= 19_000_000
    with pytest.raises(RuntimeError, match="must be recorded before"):
        torch.npu.Event(enable_timing=True).recorded_time()
    untimed = torch.npu.Event()
    untimed.record(stream)
    with pytest.raises(ValueError, match="enable_timing=True"):
        untimed.recorded_time()


def test_a_blocking_copy_to_the_device_is_done_when_it_returns():
    """As in real torch_npu and CUDA, `.npu()` waits for the stream and copies
    before returning, so another stream may use the tensor without a wait
    (Note [A blocking copy to the device is done when it returns])."""
    side = torch.npu.Stream()
    x = torch.ones(4, device="npu")
    for s in (side, torch.npu.current_stream()):  # first launches run on the caller: not these
        with torch.npu.stream(s):
            (torch.npu._sleep(10), x.fill_(5.0), x * 2, torch.ones(4).npu())
    torch.npu.synchronize()
    torch.npu._sleep(30_000)  # 30 ms of work ahead of the copy on the current stream
    assert not torch.npu.current_stream().query()
    x = torch.ones(4).npu()
    assert torch.npu.current_stream().query()  # the copy waited for it
    with torch.npu.stream(side):
        x.fill_(5.0)
        y = x * 2
    side.synchronize()
    assert torch.equal(y.cpu(), torch.full((4,), 10.0))
    assert torch.equal(x.cpu(), torch.full((4,), 5.0))


def test_a_non_blocking_copy_from_pageable_memory_is_queued_from_a_private_copy():
    torch.ones(4).to("npu", non_blocking=True)  # a first launch runs on the caller: not this one
    torch.npu.synchronize()
    with held(torch.npu.current_stream()):
        src = torch.ones(4)
        x = src.to("npu", non_blocking=True)
        src.fill_(7.0)  # the queued copy read a copy taken at the call
    torch.npu.synchronize()
    assert torch.equal(x.cpu(), torch.ones(4))


def test_the_raw_current_stream_is_the_aclrtstream_handle_everywhere():
    from torch._dynamo.device_interface import get_interface_for_device
    from torch_npu.utils._dynamo import _dynamo_register_interface_for_device
    _dynamo_register_interface_for_device()
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        for raw in (torch_npu._C._npu_getCurrentRawStream(0), torch_npu._C._npu_getCurrentRawStreamNoWait(0),
                    get_interface_for_device("npu").get_raw_stream(0)):
            assert raw == side.npu_stream
    assert torch_npu._C._npu_getCurrentRawStream(0) == torch.npu.default_stream().npu_stream


def test_stream_ids_have_torch_npus_layout_and_pools_per_priority():
    # Note [Stream ids] (csrc/core/npu_stream.cpp): (type << 5) | index, with
    # real torch_npu's types; 32 streams per priority pool, handed out in turn.
    assert torch.npu.default_stream().stream_id == 0
    normal = [torch.npu.Stream() for _ in range(33)]
    high = [torch.npu.Stream(priority=-1) for _ in range(33)]
    assert {s.stream_id >> 5 for s in normal} == {3} and {s.stream_id >> 5 for s in high} == {4}
    assert len({s.stream_id for s in normal}) == 32 and normal[32] == normal[0]  # the pool wraps around
    assert [s.priority for s in (normal[0], high[0], torch.npu.Stream(priority=1), torch.npu.Stream(priority=-2))] \
        == [0, -1, 0, -1]
    rebuilt = torch.npu.Stream(stream_id=high[3].stream_id, device_index=0, device_type=high[3].device_type)
    assert rebuilt == high[3] and rebuilt.priority == -1 and rebuilt.npu_stream == high[3].npu_stream
    with torch.npu.stream(high[3]):
        assert torch.npu.current_stream().stream_id == high[3].stream_id
        assert torch.npu.current_stream() == high[3]
    for bad in (99999, (4 << 5) | 32, 1, (2 << 5) | 4, (7 << 5)):
        with pytest.raises(RuntimeError, match="Invalid NPU stream id"):
            torch.npu.Stream(stream_id=bad, device_index=0, device_type=high[0].device_type)


def test_sync_launch_streams_run_work_as_it_is_launched():
    s = torch.npu.Stream(is_sync_launch=True)
    assert s.stream_id >> 5 == 2 and s.is_sync_launch and not torch.npu.Stream().is_sync_launch
    others = [torch.npu.SyncLaunchStream() for _ in range(4)]
    assert all(o.is_sync_launch for o in others) and others[3] == s  # 4 of them, in turn
    assert isinstance(others[0], torch.npu.Stream)
    x = torch.ones(1 << 16, device="npu")
    with held(torch.npu.current_stream()):  # an ordinary stream's work would wait here
        with torch.npu.stream(s):
            y = x * 3
            assert s.query()  # done before the launch returned
            assert torch.equal(y.cpu(), torch.full((1 << 16,), 3.0))
    # Rebuilding one from its id keeps its kind, as unpack3 does in torch_npu.
    again = torch.npu.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert again.is_sync_launch and again == s
    with pytest.raises(RuntimeError, match="Invalid device ID 99"):
        torch.npu.SyncLaunchStream(device=99)


def test_a_negative_or_float_device_gives_a_stream_on_the_current_device():
    # As torch.cuda.Stream (its device context ignores them), and real torch_npu.
    with torch.npu.device(1):
        for device in (-258, -128, -7, -1, -200.8, -0.2, 3.5):
            s = torch.npu.Stream(device)
            assert s.device_index == 1 and torch.npu.current_device() == 1, device
    with pytest.raises(RuntimeError, match="Invalid device string"):
        torch.npu.Stream("npu:x")
