"""The private stream and tensor APIs client libraries call on real torch_npu:
torch.npu._launch_host_func / _subscribe_report (a Python function run in
stream order), torch_npu._C._npu_setStream (set_stream's keyword form),
torch_npu._C._weak_ref_tensor (a view that does not own its memory) and
torch_npu.Format / get_npu_format."""

import sys

import pytest
import torch

import torch_npu


def test_a_host_function_runs_in_stream_order():
    calls = []
    s = torch.npu.Stream()
    torch.npu._subscribe_report(s)
    with torch.npu.stream(s):
        x = torch.ones(4, device="npu")
        x * 2  # a signature's first launch runs on the caller, after the stream drains
        s.synchronize()
        gate = torch_npu._C._StreamGate()  # holds the stream before the host function
        torch.npu._launch_host_func(s, lambda data: calls.append((data, s.query())), "payload")
        y = x * 2
    assert calls == []  # queued behind the gate
    gate.open()
    s.synchronize()
    # It ran with the later kernel still queued, and only once.
    assert calls == [("payload", False)]
    assert y.cpu().tolist() == [2.0] * 4
    torch.npu._unsubscribe_report(s)


def test_an_exception_in_a_host_function_is_reported_and_the_stream_goes_on():
    seen = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = lambda info: seen.append(info.exc_value)
    try:
        s = torch.npu.current_stream()

        def fails(_):
            raise ValueError("from the host function")

        torch.npu._launch_host_func(s, fails, None)
        z = torch.arange(3, device="npu") + 1
        torch.npu.synchronize()
    finally:
        sys.unraisablehook = old_hook
    assert [str(e) for e in seen] == ["from the host function"]
    assert z.cpu().tolist() == [1, 2, 3]


def test_a_captured_host_function_runs_at_each_replay():
    calls = []
    g = torch.npu.NPUGraph()
    x = torch.zeros(2, device="npu")
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        with torch.npu.graph(g, stream=s):
            x.add_(1)
            torch.npu._launch_host_func(torch.npu.current_stream(), calls.append, 7)
    torch.npu.synchronize()
    assert calls == []  # capture records, runs nothing
    g.replay()
    g.replay()
    torch.npu.synchronize()
    assert calls == [7, 7]
    assert x.cpu().tolist() == [2.0, 2.0]


def test_host_function_arguments_are_checked():
    s = torch.npu.current_stream()
    with pytest.raises(TypeError, match="fn should be callable"):
        torch.npu._launch_host_func(s, 3, None)
    with pytest.raises(TypeError, match="expected a torch.npu.Stream"):
        torch.npu._launch_host_func("stream", print, None)
    with pytest.raises(TypeError, match="expected a torch.npu.Stream"):
        torch.npu._subscribe_report(None)


def test_npu_set_stream_takes_the_stream_triple_by_keyword():
    s = torch.npu.Stream()
    before = torch.npu.current_stream()
    torch_npu._C._npu_setStream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    try:
        assert torch.npu.current_stream() == s
    finally:
        torch.npu.set_stream(before)
    with pytest.raises(ValueError, match="not the npu device type"):
        torch_npu._C._npu_setStream(stream_id=s.stream_id, device_index=0, device_type=1)


def test_weak_ref_tensor_views_the_same_memory_without_owning_it():
    base = torch.arange(12.0, device="npu").view(3, 4)
    view = base[1:, 1:3]
    torch.npu.synchronize()
    owners = torch._C._storage_Use_Count(base.untyped_storage()._cdata)
    weak = torch_npu._C._weak_ref_tensor(view)
    # It holds no reference to the original's storage.
    assert torch._C._storage_Use_Count(base.untyped_storage()._cdata) == owners
    assert weak.device == view.device and weak.dtype == view.dtype
    assert weak.shape == view.shape and weak.stride() == view.stride()
    assert weak.data_ptr() == view.data_ptr()
    assert torch.equal(weak.cpu(), view.cpu())
    weak.fill_(-1)  # writes reach the original
    assert base.cpu()[1:, 1:3].eq(-1).all()
    assert weak.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()


def test_get_npu_format_returns_a_format():
    t = torch.ones(16, 16, device="npu")
    assert torch_npu.get_npu_format(t) is torch_npu.Format.ND
    nz = torch_npu.npu_format_cast(t, 29)
    fmt = torch_npu.get_npu_format(nz)
    assert fmt == torch_npu.Format.FRACTAL_NZ == 29 and str(fmt) == "FRACTAL_NZ"
    assert torch_npu.Format(2).name == "ND"
