"""Bad input raises at the call, with the same exception type as on the CPU.

Uses the error_inputs of PyTorch's OpInfo database: each is run on cpu and
on npu (without synchronising). Where cpu raises, npu must raise the same
exception type at the call -- not later on the stream, and never crash.
"""

import warnings

import pytest
import torch

import torch_npu  # noqa: F401

# Known, explained deviations: name -> reason.
EXPLAINED = {
    # gelu's meta function does not validate `approximate`; ATen checks it
    # in the kernel, which runs on the stream: the error surfaces at the
    # next synchronisation point instead.
    "nn.functional.gelu": "approximate is validated in stage 2",
}


def _error_cases():
    """(op, index, cpu error input, npu error input). The inputs are built on
    each device by the OpInfo itself, so aliasing between arguments (out=
    overlapping an input) is the same on both."""
    from torch.testing._internal.common_methods_invocations import op_db
    for op in op_db:
        try:
            cpu_inputs = list(op.error_inputs("cpu"))
            npu_inputs = list(op.error_inputs("npu"))
        except Exception:
            continue
        if len(cpu_inputs) != len(npu_inputs):
            continue
        for i, (cpu_input, npu_input) in enumerate(zip(cpu_inputs, npu_inputs)):
            yield op, i, cpu_input, npu_input


@pytest.mark.slow
def test_errors_raise_at_call_like_cpu():
    warnings.filterwarnings("ignore")
    failures, checked = [], 0
    for op, i, cpu_input, npu_input in _error_cases():
        sample = cpu_input.sample_input
        try:
            op(sample.input, *sample.args, **sample.kwargs)
            continue  # cpu accepts it; nothing to compare
        except Exception as e:
            cpu_error = type(e)
        npu_sample = npu_input.sample_input
        checked += 1
        try:
            op(npu_sample.input, *npu_sample.args, **npu_sample.kwargs)
        except Exception as e:
            if not isinstance(e, cpu_error) and op.name not in EXPLAINED:
                failures.append(f"{op.name}[{i}]: cpu raised {cpu_error.__name__}, npu {type(e).__name__}: {e}")
            continue
        try:
            torch.npu.synchronize()
        except Exception:
            pass
        if op.name not in EXPLAINED:
            failures.append(f"{op.name}[{i}]: cpu raised {cpu_error.__name__} at the call, npu did not")
    assert checked > 300
    assert not failures, "\n".join(failures)


def test_device_mismatch_on_synchronous_path():
    a = torch.randn(3).npu()
    with pytest.raises(RuntimeError, match="same device"):
        torch.dot(a, torch.randn(3))


def test_out_overlap_detected():
    x = torch.randn(10).npu()
    idx = torch.tensor([0, 1, 2]).npu()
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.index_select(x, 0, idx, out=x[:3])


def test_inplace_broadcast_mismatch_raises_at_call():
    x = torch.zeros(3, device="npu")
    with pytest.raises(RuntimeError, match="must match the size"):
        x.masked_fill_(torch.ones(4, dtype=torch.bool, device="npu"), 1.0)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.masked_fill_(torch.ones(2, 3, dtype=torch.bool, device="npu"), 1.0)
    assert torch.equal(x.cpu(), torch.zeros(3))  # untouched, device usable


def test_bad_inputs_never_break_the_device():
    bad = [
        lambda: torch.empty(2 ** 62, device="npu"),
        lambda: torch.randn(2, 3).npu() @ torch.randn(4, 5).npu(),
        lambda: torch.randn(3).npu().resize_(-1),
        lambda: torch.randn(4).npu().as_strided((10,), (1,)),
        lambda: torch.cat([torch.randn(2).npu(), torch.randn(3, 3).npu()]),
    ]
    for call in bad:
        with pytest.raises(RuntimeError):
            call()
    assert (torch.ones(3, device="npu") * 2).sum().item() == 6.0


def test_host_cache_calls_and_quantized_npu_tensors_never_crash():
    # Both used to kill the process (real test_accelerator.py, test_shape_ops.py).
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device="npu")
    torch.accelerator.memory.empty_host_cache()  # torch's host allocator of the npu device
    pinned = torch.arange(4.0).pin_memory()
    y = pinned.to("npu", non_blocking=True)
    torch.accelerator.memory.empty_host_cache()
    assert pinned.is_pinned() and y.tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(NotImplementedError, match="quantized tensors .* are not supported on npu by vNPU"):
        torch.quantize_per_tensor(x, 0.1, 5, torch.quint8)
    q = torch.quantize_per_tensor(x.cpu(), 0.1, 5, torch.quint8)  # on cpu it works, and stays there
    assert q.flip(0).dequantize().tolist() == [[3.0, 4.0], [1.0, 2.0]]


def test_a_host_tensor_among_npu_ones_gets_torch_npus_words():
    expected = (r"Expected all tensors to be on the same device\. Expected NPU tensor, please check whether the "
                r"input tensor device is correct\. \(found at least two devices, npu(:0)? and cpu")
    with pytest.raises(RuntimeError, match=expected):
        torch.add(torch.rand(2), torch.rand(2).npu())  # ATen's TensorIterator check, reworded
    with pytest.raises(RuntimeError, match=expected):
        torch.mm(torch.rand(2, 2), torch.rand(2, 2).npu())  # vNPU's own device check


def test_a_host_out_tensor_gets_torch_npus_words_on_every_route():
    # OpPreparation::check_tensor's words, whichever route the op takes; the
    # host tensor is left untouched.
    x = torch.randn(4, 16).npu()
    out = torch.full((4,), -7.0)
    calls = [
        lambda: torch.sum(x, dim=1, out=out),  # structured
        lambda: torch.add(x, x, out=torch.empty(4, 16)),  # structured, binary
        lambda: torch.logical_and(x, x, out=torch.empty(4, 16, dtype=torch.bool)),  # policy table
        lambda: torch.nonzero(x, out=torch.empty(0, dtype=torch.long)),  # synchronous
        lambda: torch.cat([x, x], out=torch.empty(8, 16)),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="output with device cpu doesn't match the desired device NPU"):
            call()
    assert bool((out == -7.0).all())


@pytest.mark.parametrize("fn", ["memory_allocated", "max_memory_allocated", "memory_reserved",
                                "reset_max_memory_allocated", "memory_stats"])
def test_memory_statistics_of_a_device_that_does_not_exist(fn):
    bad = torch.npu.device_count() + 1
    with pytest.raises(RuntimeError, match=f"Invalid device argument {bad}: did you call init"):
        getattr(torch.npu, fn)(device=f"npu:{bad}")
    with pytest.raises(RuntimeError, match=r"Invalid device ID[\s\S]+Check whether the device ID is valid"):
        torch.npu.set_device(bad)


def test_index_put_takes_uint8_masks_and_refuses_host_values():
    import warnings
    mask = torch.tensor([0, 1, 0, 1], dtype=torch.uint8)
    for accumulate in (True, False):
        expected = torch.ones(4, 3)
        got = torch.ones(4, 3).npu()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # uint8 masks are deprecated, on cpu as here
            expected.index_put_((mask,), torch.full((2, 3), 5.0), accumulate=accumulate)
            got.index_put_((mask.npu(),), torch.full((2, 3), 5.0).npu(), accumulate=accumulate)
        assert torch.equal(got.cpu(), expected)
    b = torch.zeros(5).npu()
    idx = torch.tensor([0, 1])  # host indices are fine
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.index_put_(b, (idx,), torch.tensor([1.0, 2.0]))
    torch.index_put_(b, (idx,), torch.tensor(3.0))  # a host scalar is fine
    assert b.cpu().tolist() == [3.0, 3.0, 0.0, 0.0, 0.0]
    # Index lists that do not broadcast: ATen's IndexError, reading and writing.
    a = torch.zeros(5, 5).npu()
    with pytest.raises(IndexError, match="shape mismatch"):
        a[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="shape mismatch"):
        a[[0, 1], [0, 1, 2]] = 0
