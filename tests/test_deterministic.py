"""Deterministic mode on npu: torch.use_deterministic_algorithms(True).

New npu memory is filled as CUDA (and CPU) fill it under
torch.utils.deterministic.fill_uninitialized_memory: NaN for floating and
complex dtypes, the largest value for integers; ops without a deterministic
implementation raise (or warn with warn_only=True) with ATen's message.
"""

import contextlib

import pytest
import torch
import torch.utils.deterministic

import torch_npu  # noqa: F401


@contextlib.contextmanager
def deterministic(fill=True, warn_only=False):
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.utils.deterministic.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True, warn_only=warn_only)
    torch.utils.deterministic.fill_uninitialized_memory = fill
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.utils.deterministic.fill_uninitialized_memory = before[2]


DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.complex64, torch.int8, torch.uint8,
          torch.int32, torch.int64, torch.bool]

FACTORIES = {
    "empty": lambda device, dtype: torch.empty(3, 5, device=device, dtype=dtype),
    "empty_strided": lambda device, dtype: torch.empty_strided((3, 5), (1, 3), device=device, dtype=dtype),
    "empty_like": lambda device, dtype: torch.empty_like(torch.zeros(4, device=device, dtype=dtype)),
    "new_empty": lambda device, dtype: torch.zeros(1, device=device, dtype=dtype).new_empty(6),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("factory", FACTORIES, ids=str)
def test_new_memory_is_filled_like_cpu(factory, dtype):
    with deterministic():
        expected = FACTORIES[factory]("cpu", dtype)
        actual = FACTORIES[factory]("npu", dtype)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, rtol=0, atol=0)
    if dtype.is_floating_point or dtype.is_complex:
        assert torch.isnan(actual.cpu()).all()
    elif dtype != torch.bool:
        assert (actual.cpu() == torch.iinfo(dtype).max).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_resize_fills_only_the_new_memory(dtype):
    results = []
    for device in ("cpu", "npu"):
        with deterministic():
            t = torch.arange(4, device=device).to(dtype)
            t.resize_(3, 4)
        results.append(t.cpu())
    torch.testing.assert_close(results[1], results[0], equal_nan=True, rtol=0, atol=0)
    assert torch.equal(results[1].flatten()[:4], torch.arange(4).to(dtype))


def test_fill_only_in_deterministic_mode_with_fill_on():
    # A freed block is reused at once by the caching allocator: its old
    # contents show through unless the fill overwrote them.
    x = torch.full((1024,), 7.0, device="npu")
    del x
    assert torch.equal(torch.empty(1024, device="npu").cpu(), torch.full((1024,), 7.0))
    with deterministic(fill=False):
        x = torch.full((1024,), 7.0, device="npu")
        del x
        assert torch.equal(torch.empty(1024, device="npu").cpu(), torch.full((1024,), 7.0))
    with deterministic():
        x = torch.full((1024,), 7.0, device="npu")
        del x
        assert torch.isnan(torch.empty(1024, device="npu").cpu()).all()


def test_nondeterministic_ops_raise_and_warn_as_aten_does():
    def put(device):
        torch.zeros(8, device=device).put_(torch.tensor([1, 1], device=device), torch.ones(2, device=device))

    with deterministic():
        with pytest.raises(RuntimeError) as cpu_error:
            put("cpu")
        with pytest.raises(RuntimeError) as npu_error:
            put("npu")
    assert str(npu_error.value) == str(cpu_error.value)
    assert "does not have a deterministic implementation" in str(npu_error.value)
    with deterministic(warn_only=True):
        with pytest.warns(UserWarning, match="does not have a deterministic implementation"):
            put("npu")


def test_deterministic_results_match_cpu():
    torch.manual_seed(0)
    x, idx, src = torch.randn(50), torch.randint(0, 50, (200,)), torch.randn(200)
    with deterministic():
        for device in ("cpu", "npu"):
            out = torch.zeros(50, device=device).index_add_(0, idx.to(device), src.to(device))
            scatter = torch.zeros(50, device=device).scatter_add_(0, idx.to(device), src.to(device))
            if device == "cpu":
                expected = (out, scatter)
        assert torch.equal(out.cpu(), expected[0]) and torch.equal(scatter.cpu(), expected[1])


def test_a_big_reduction_gives_the_same_bits_whatever_the_host_is_doing():
    # Note [Deterministic team sizes]: the intra-op rule gives a kernel more
    # threads while a host thread is blocked on the device, and ATen's sum
    # splits by its team; in deterministic mode the host state is not read.
    x = torch.randn(64, 3, 64, 64, device="npu")
    with deterministic(fill=False):
        first = torch.sum(x)
        torch.npu.synchronize()
        sums = []
        for i in range(60):
            s = torch.sum(x)
            if i % 2:
                torch.npu.synchronize()  # the host blocks while the sum may still run
            sums.append(s)
        sums = torch.stack(sums).cpu()
    assert bool((sums == first.cpu()).all()), sums.unique()
