"""The rest of the tensor model on npu, differential against cpu.

Copy-on-write clones, lazy modules, window functions of size 0, legacy
storage types, share_memory, named tensors (absent from torch 2.13: npu
raises what cpu raises), and the single-process collectives nn.DataParallel
uses (torch._C._scatter, _broadcast_coalesced, _gather ...).
"""

import copy
import warnings

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.npu import comm


# --- copy-on-write (torch._lazy_clone) ---------------------------------------

@pytest.mark.parametrize("write", ["clone", "original"])
def test_lazy_clone_shares_until_written(write):
    results = {}
    for device in ("cpu", "npu"):
        x = torch.arange(6.0, device=device)
        x.add_(1)  # queued work before the clone
        y = torch._lazy_clone(x)
        assert torch._C._is_cow_tensor(x) and torch._C._is_cow_tensor(y)
        target = y if write == "clone" else x
        target.mul_(10)
        target[0] = -1
        assert not torch._C._is_cow_tensor(target)
        results[device] = (x.cpu(), y.cpu())
    assert torch.equal(results["npu"][0], results["cpu"][0])
    assert torch.equal(results["npu"][1], results["cpu"][1])


def test_lazy_clone_reads_do_not_copy_and_free_safely():
    x = torch.arange(1000.0, device="npu")
    y = torch._lazy_clone(x)
    # A kernel that reads the clone leaves it shared (as on cpu): the values are what cpu gives.
    assert torch.equal((y + 1).cpu(), torch.arange(1000.0) + 1)
    assert torch._C._is_cow_tensor(y)
    assert torch.equal(x.cpu(), torch.arange(1000.0))
    del x
    assert torch.equal(y.cpu(), torch.arange(1000.0))
    y.copy_(torch.zeros(1000))
    assert torch.equal(y.cpu(), torch.zeros(1000))
    s = torch.npu.Stream()
    z = torch._lazy_clone(y)
    z.record_stream(s)  # finds the shared block
    del y, z
    torch.npu.synchronize()


def test_copy_on_write_clones_stay_shared_when_read_and_split_when_written():
    # A kernel that only reads a lazy clone leaves it copy-on-write (ATen reads inputs through
    # const_data_ptr); one that writes it, in place or as out=, gives it its own memory first.
    t = torch.arange(4.0, device="npu")
    clone = t._lazy_clone()
    assert torch.equal((t + clone).cpu(), torch.arange(4.0) * 2)
    assert torch._C._is_cow_tensor(t) and torch._C._is_cow_tensor(clone)
    clone.add_(10)
    out = t._lazy_clone()
    torch.mul(t, 3, out=out)
    assert torch.equal(t.cpu(), torch.arange(4.0))
    assert torch.equal(clone.cpu(), torch.arange(4.0) + 10) and torch.equal(out.cpu(), torch.arange(4.0) * 3)


# --- lazy modules -------------------------------------------------------------

@pytest.mark.parametrize("make, shape", [
    (lambda: torch.nn.LazyLinear(3), (2, 4)),
    (lambda: torch.nn.LazyConv2d(4, 3), (1, 2, 6, 6)),
    (lambda: torch.nn.LazyConv1d(2, 2), (2, 3, 5)),
    (lambda: torch.nn.LazyConvTranspose2d(2, 3), (1, 3, 4, 4)),
    (lambda: torch.nn.LazyBatchNorm1d(), (3, 5)),
], ids=["linear", "conv2d", "conv1d", "conv_transpose2d", "batchnorm1d"])
def test_lazy_modules_materialise_on_npu(make, shape):
    torch.manual_seed(0)
    ref = make()
    x = torch.randn(shape)
    expected = ref(x)
    torch.manual_seed(0)
    module = make().npu()
    assert all(p.device.type == "npu" for p in module.parameters())
    actual = module(x.npu())
    assert not any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in module.parameters())
    assert all(p.device.type == "npu" for p in module.parameters())
    # Same shapes; values from the same CPU generator state differ only in
    # where they are drawn, so load the reference's values and compare outputs.
    module.load_state_dict(ref.state_dict())
    torch.testing.assert_close(module(x.npu()).cpu(), ref(x), rtol=1e-4, atol=1e-5)
    assert actual.shape == expected.shape


# --- window functions, storages, share_memory, named tensors -----------------

@pytest.mark.parametrize("window", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                    "kaiser_window"])
@pytest.mark.parametrize("size", [0, 1, 5])
def test_window_functions_match_cpu(window, size):
    for periodic in (True, False):
        expected = getattr(torch, window)(size, periodic=periodic)
        actual = getattr(torch, window)(size, periodic=periodic, device="npu")
        assert actual.device.type == "npu"
        torch.testing.assert_close(actual.cpu(), expected)


STORAGES = ["ByteStorage", "CharStorage", "ShortStorage", "IntStorage", "LongStorage", "HalfStorage",
            "FloatStorage", "DoubleStorage", "BFloat16Storage", "BoolStorage", "ComplexFloatStorage",
            "ComplexDoubleStorage"]


@pytest.mark.parametrize("name", STORAGES)
def test_legacy_storage_types(name):
    warnings.simplefilter("ignore")
    cls = getattr(torch.npu, name)
    cpu_cls = getattr(torch, name)
    s = cls(4)
    assert s.device.type == "npu" and s.dtype == cpu_cls.dtype and s.size() == 4
    assert isinstance(s, cls) and torch.is_storage(s)
    data = cpu_cls([1, 0, 1])
    n = cls(data.tolist())
    assert n.device.type == "npu" and n.tolist() == data.tolist()
    t = torch.zeros(3, dtype=cpu_cls.dtype, device="npu")
    assert isinstance(t.untyped_storage(), torch.UntypedStorage)
    assert isinstance(t.storage(), cls) and not isinstance(t.storage(), cpu_cls)
    assert isinstance(data.npu(), cls)
    with pytest.raises(RuntimeError, match="from_buffer: Not available for NPU storage"):
        cls.from_buffer(b"\x00" * 8)


def test_share_memory_on_npu_modules_is_a_no_op_like_cuda():
    m = torch.nn.Linear(3, 2).npu()
    before = [p.data_ptr() for p in m.parameters()]
    assert m.share_memory() is m
    assert [p.data_ptr() for p in m.parameters()] == before
    assert all(p.device.type == "npu" for p in m.parameters())


def test_named_tensor_factories_raise_what_cpu_raises():
    # torch 2.13 removed named tensors: the names= keyword is gone everywhere.
    for factory in (torch.zeros, torch.ones, torch.empty):
        with pytest.raises(TypeError) as cpu_error:
            factory((2, 3), names=("N", "C"))
        with pytest.raises(TypeError) as npu_error:
            factory((2, 3), names=("N", "C"), device="npu")
        assert str(npu_error.value) == str(cpu_error.value)


# --- DataParallel's collectives ----------------------------------------------

def test_scatter_gather_broadcast():
    x = torch.arange(24.0).view(6, 4).npu()
    parts = torch._C._scatter(x, [0, 1], None, 0, None)
    assert [p.device for p in parts] == [torch.device("npu", 0), torch.device("npu", 1)]
    assert parts[0].data_ptr() == x.data_ptr()  # already there: a view, as on CUDA
    assert torch.equal(torch.cat([p.cpu() for p in parts]), x.cpu())
    sized = torch._C._scatter(x, [1, 0, 1], [1, 2, 3], 0, None)
    assert [p.shape[0] for p in sized] == [1, 2, 3]
    g = torch._C._gather(list(parts), 0, 1)
    assert g.device == torch.device("npu", 1) and torch.equal(g.cpu(), x.cpu())
    assert torch._C._gather(list(parts), 0, -1).device.type == "cpu"
    b = torch._C._broadcast(x, [0, 1])
    assert b[0] is x and b[1].device.index == 1 and torch.equal(b[1].cpu(), x.cpu())
    coalesced = torch._C._broadcast_coalesced([x, x[0]], [0, 1], 1024)
    assert coalesced[0][0] is x and coalesced[1][1].device.index == 1
    out = [torch.empty(6, 4, device="npu:1")]
    torch._C._broadcast_out(x, out)
    assert torch.equal(out[0].cpu(), x.cpu())


def test_gather_to_the_host_waits_for_the_devices():
    # DataParallel's gather to the CPU (output_device=-1): the copies must have
    # landed before the host concatenates them, also from a busy device
    with torch.npu.device(1):
        torch.npu._sleep(50000)  # 50 ms of queued work before the fill
        late = torch.full((3,), 7.0, device="npu:1")
    g = torch._C._gather([torch.zeros(3, device="npu:0"), late], 0, -1)
    assert torch.equal(g, torch.tensor([0.0, 0, 0, 7, 7, 7]))
    out = torch.empty(6)
    with torch.npu.device(1):
        torch.npu._sleep(50000)
        late = torch.full((3,), 5.0, device="npu:1")
    torch._C._gather_out([torch.ones(3, device="npu:0"), late], out, 0)
    assert torch.equal(out, torch.tensor([1.0, 1, 1, 5, 5, 5]))


def test_collectives_bad_input():
    x = torch.ones(4, 2, device="npu")
    with pytest.raises(RuntimeError, match="Expected at least one device to scatter to"):
        torch._C._scatter(x, [], None, 0, None)
    with pytest.raises(RuntimeError, match="Expected chunk sizes to sum to 4"):
        torch._C._scatter(x, [0, 1], [1, 2], 0, None)
    with pytest.raises(RuntimeError, match="Expected devices and chunk_sizes to be of same length"):
        torch._C._scatter(x, [0, 1], [4], 0, None)
    with pytest.raises(RuntimeError, match="Expected at least one tensor to gather from"):
        torch._C._gather([], 0, 0)
    with pytest.raises(RuntimeError, match="has invalid shape"):
        torch._C._gather([x, torch.ones(4, 3, device="npu")], 0, 0)
    with pytest.raises(RuntimeError, match="All tensors must be on devices\\[0\\]"):
        torch._C._broadcast_coalesced([x], [1, 0], 1024)
    with pytest.raises(RuntimeError, match="to have same shape as the source"):
        torch._C._broadcast_out(x, [torch.empty(3, device="npu:1")])


def test_data_parallel_matches_a_single_device():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    model = copy.deepcopy(ref).npu()
    dp = torch.nn.DataParallel(model, device_ids=[0, 1, 2])
    opt, opt_ref = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "PyTorch is not compiled with NCCL support", as on any CPU build
        for step in range(3):
            x = torch.randn(9, 4)
            out, expected = dp(x.npu()), ref(x)
            assert out.device == torch.device("npu", 0)
            torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-6)
            for o, optim in ((out, opt), (expected, opt_ref)):
                optim.zero_grad()
                o.square().sum().backward()
                optim.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
    assert comm.scatter is torch._C._scatter


# --- where Ascend differs from ATen ------------------------------------------

def test_one_hot_takes_int32_indices_as_on_ascend():
    x = torch.tensor([[0, 3], [2, 1]])
    expected = torch.nn.functional.one_hot(x, 5)
    for dtype in (torch.int64, torch.int32):
        actual = torch.nn.functional.one_hot(x.to(dtype).npu(), 5)
        # op-plugin's kernel allocates the result with the indices' options
        assert actual.dtype == dtype and torch.equal(actual.cpu(), expected.to(dtype))
    assert torch.equal(torch.nn.functional.one_hot(x.int().npu()).cpu(), torch.nn.functional.one_hot(x).int())
    for bad in (lambda d: torch.nn.functional.one_hot(torch.tensor([1.0], device=d)),
                lambda d: torch.nn.functional.one_hot(torch.tensor([-1], device=d)),
                lambda d: torch.nn.functional.one_hot(torch.tensor([5], device=d), 3),
                lambda d: torch.nn.functional.one_hot(torch.tensor([], dtype=torch.long, device=d))):
        with pytest.raises(RuntimeError) as cpu_error:
            bad("cpu")
        with pytest.raises(RuntimeError) as npu_error:
            bad("npu")
        assert str(npu_error.value) == str(cpu_error.value)

