"""Tensors on the npu device: copies, views, in-place writes through views,
dtypes, data-dependent shapes, factories. Differential against CPU."""

import warnings

import pytest
import torch
from torch.testing import assert_close

NPU = torch.device("npu:0")

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64,
          torch.int64, torch.int32, torch.bool]


def _sample(dtype, shape=(4, 5), seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=dtype)


# --- copies ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_roundtrip_copy(dtype):
    cpu = _sample(dtype)
    n = cpu.to("npu")
    assert n.device == NPU and n.dtype == dtype
    assert_close(n.cpu(), cpu)


def test_npu_to_npu_copy_same_device():
    a = torch.randn(3, 4).npu()
    b = a.clone()
    a.add_(1)
    assert_close(b.cpu() + 1, a.cpu())
    c = torch.empty(3, 4, device="npu")
    c.copy_(a)
    assert_close(c.cpu(), a.cpu())


def test_npu0_to_npu1_copy():
    cpu = torch.randn(16, 8)
    a = cpu.to("npu:0")
    b = a.to("npu:1")
    assert b.device == torch.device("npu:1")
    assert_close(b.cpu(), cpu)
    # And back, through copy_ into an existing tensor.
    c = torch.zeros(16, 8, device="npu:0")
    c.copy_(b * 2)
    assert_close(c.cpu(), cpu * 2)


def test_copy_with_dtype_conversion():
    cpu = torch.randn(10) * 100
    n = cpu.npu()
    assert_close(n.to(torch.int32).cpu(), cpu.to(torch.int32))
    assert_close(n.half().cpu(), cpu.half())
    out = torch.empty(10, dtype=torch.float64, device="npu")
    out.copy_(cpu)  # H2D with conversion
    assert_close(out.cpu(), cpu.double())


def test_copy_noncontiguous():
    cpu = torch.randn(6, 8)
    n = cpu.npu()
    assert_close(n.t().cpu(), cpu.t())
    assert_close(n[:, ::3].cpu(), cpu[:, ::3])
    # H2D into a non-contiguous destination.
    dst = torch.zeros(8, 6, device="npu").t()
    dst.copy_(cpu)
    assert_close(dst.cpu(), cpu)
    # D2H into a non-contiguous destination.
    host = torch.zeros(8, 6).t()
    host.copy_(n)
    assert_close(host, cpu)


def test_copy_broadcast():
    dst = torch.zeros(3, 4, device="npu")
    dst.copy_(torch.arange(4.0))
    assert_close(dst.cpu(), torch.arange(4.0).expand(3, 4))


def test_pin_memory_and_non_blocking():
    cpu = torch.randn(1000)
    pinned = cpu.pin_memory()
    assert pinned.is_pinned()
    assert not cpu.is_pinned()
    n = pinned.to("npu", non_blocking=True)
    back = torch.empty(1000).pin_memory()
    back.copy_(n * 3, non_blocking=True)
    torch.npu.synchronize()
    assert_close(back, cpu * 3)


def test_non_blocking_from_pageable_is_still_correct():
    cpu = torch.randn(257)
    expected = cpu.clone()
    n = cpu.to("npu", non_blocking=True)
    # Pageable memory: non_blocking must not defer the read past the call,
    # since the caller may overwrite the host buffer at once (CUDA semantics).
    cpu.zero_()
    assert_close(n.cpu(), expected)


def test_item():
    assert torch.tensor(3.5).npu().item() == 3.5
    assert torch.tensor([7], dtype=torch.int64).npu().item() == 7
    assert torch.tensor(True).npu().item() is True
    assert (torch.arange(10).npu() * 3).sum().item() == 135
    with pytest.raises(RuntimeError):
        torch.ones(2).npu().item()


def test_repr():
    t = torch.tensor([1.0, 2.0]).npu()
    assert "device='npu:0'" in repr(t)
    assert repr(t) == repr(t.cpu())[:-1] + ", device='npu:0')"
    t1 = torch.tensor([1, 2], device="npu:1")
    assert "device='npu:1'" in repr(t1)
    assert "device='npu:0'" in str(torch.zeros(0, device="npu"))


# --- views -------------------------------------------------------------------------

VIEW_FNS = {
    "view": lambda t: t.view(4, 6),
    "reshape": lambda t: t.reshape(-1),
    "as_strided": lambda t: t.as_strided((3, 3), (5, 2), 1),
    "permute": lambda t: t.permute(2, 0, 1),
    "transpose": lambda t: t.transpose(0, 2),
    "slice_steps": lambda t: t[::2, 1:, ::3],
    "neg_index": lambda t: t[-1, :, -2],
    "expand": lambda t: t[:, :1, :].expand(2, 5, 4),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "squeeze": lambda t: t[:, :1].squeeze(1),
    "narrow": lambda t: t.narrow(2, 1, 2),
    "select": lambda t: t.select(1, 2),
    "diagonal": lambda t: t.diagonal(0, 1, 2),
    "t": lambda t: t[0].t(),
    "unfold": lambda t: t.unfold(2, 2, 1),
    "unbind": lambda t: t.unbind(1)[1],
    "split": lambda t: t.split(2, dim=1)[1],
    "chunk": lambda t: t.chunk(2, dim=2)[1],
    "flatten": lambda t: t.flatten(1),
    "view_dtype": lambda t: t.view(torch.int32),
    "real_view": lambda t: t.movedim(0, -1),
    "contiguous_then_view": lambda t: t.transpose(0, 1).contiguous().view(-1, 2),
}


@pytest.mark.parametrize("name", list(VIEW_FNS))
def test_view_matches_cpu(name):
    cpu = torch.randn(2, 3, 4)
    n = cpu.npu()
    fn = VIEW_FNS[name]
    vc, vn = fn(cpu), fn(n)
    assert vn.device == NPU
    assert vn.shape == vc.shape and vn.stride() == vc.stride()
    assert vn.storage_offset() == vc.storage_offset()
    assert_close(vn.cpu(), vc)
    # Arithmetic on the (possibly non-contiguous) view agrees too.
    if vc.dtype.is_floating_point:
        assert_close((vn * 2 + 1).cpu(), vc * 2 + 1)


def test_views_share_storage():
    n = torch.zeros(4, 4, device="npu")
    v = n[1:3, ::2]
    assert v.untyped_storage().data_ptr() == n.untyped_storage().data_ptr()
    assert v._base is n


def test_view_of_noncontiguous_raises_like_cpu():
    with pytest.raises(RuntimeError, match="view"):
        torch.randn(3, 4).npu().t().view(12)


INPLACE_VIEW_CASES = {
    "slice_fill": lambda b: b[1:3].fill_(7),
    "step_mul": lambda b: b[:, ::2].mul_(10),
    "select_add": lambda b: b.select(1, 1).add_(5),
    "transpose_copy": lambda b: b.t()[0].copy_(torch.arange(4.0, device=b.device)),
    "diag_zero": lambda b: b.diagonal().zero_(),
    "setitem_scalar": lambda b: b.__setitem__((slice(None), 2), -1.0),
    "setitem_tensor": lambda b: b.__setitem__((0,), torch.arange(4.0, device=b.device) * 3),
    "bool_mask_set": lambda b: b.__setitem__(b > 0.5, 0.0),
    "index_put": lambda b: b.index_put_((torch.tensor([0, 3], device=b.device),),
                                        torch.tensor(9.0, device=b.device)),
    "view_relu": lambda b: torch.relu_(b.view(2, 8)),
    "as_strided_add": lambda b: b.as_strided((2, 2), (4, 1), 5).add_(100),
    "clamp_narrow": lambda b: b.narrow(0, 2, 2).clamp_(min=0.0),
}


@pytest.mark.parametrize("name", list(INPLACE_VIEW_CASES))
def test_inplace_on_view_writes_through(name):
    cpu = torch.randn(4, 4)
    n = cpu.npu()
    INPLACE_VIEW_CASES[name](cpu)
    INPLACE_VIEW_CASES[name](n)
    assert_close(n.cpu(), cpu)


def test_inplace_on_view_with_autograd():
    # Views + in-place under autograd rebase the graph (CopySlices).
    x_c = torch.randn(4, 3, requires_grad=True)
    x_n = x_c.detach().npu().requires_grad_()

    def f(x):
        y = x * 2
        y[1:3].mul_(x[1:3])
        y[:, 0].exp_()
        return y.sum()

    f(x_c).backward()
    f(x_n).backward()
    assert_close(x_n.grad.cpu(), x_c.grad)


def test_resize_():
    n = torch.arange(6.0).npu()
    n.resize_(2, 3)
    assert n.shape == (2, 3)
    assert_close(n.cpu(), torch.arange(6.0).view(2, 3))
    n.resize_(4, 5)  # grows the storage; the first 6 values are kept
    assert n.shape == (4, 5)
    assert_close(n.flatten()[:6].cpu(), torch.arange(6.0))
    n.resize_(0)
    assert n.numel() == 0


def test_set_():
    src = torch.arange(12.0).npu()
    t = torch.empty(0, device="npu")
    t.set_(src.untyped_storage(), 2, (2, 3), (3, 1))
    assert_close(t.cpu(), torch.arange(12.0)[2:8].view(2, 3))
    src[2] = -1
    assert t[0, 0].item() == -1  # shares memory
    u = torch.empty(0, device="npu")
    u.set_(src)
    assert_close(u.cpu(), src.cpu())


def test_resize_as_and_empty_strided():
    e = torch.empty_strided((2, 3), (1, 2), device="npu")
    assert e.stride() == (1, 2) and e.device == NPU
    a = torch.empty(0, device="npu").resize_as_(torch.empty(3, 7))
    assert a.shape == (3, 7)


# --- edge shapes -------------------------------------------------------------------

def test_zero_size_tensors():
    n = torch.empty(0, 3, device="npu")
    assert n.numel() == 0 and n.shape == (0, 3)
    assert n.sum().item() == 0.0
    assert (n + 1).shape == (0, 3)
    assert torch.cat([n, torch.ones(2, 3, device="npu")]).shape == (2, 3)
    assert_close(torch.mm(torch.empty(2, 0, device="npu"), torch.empty(0, 3, device="npu")).cpu(),
                 torch.zeros(2, 3))
    assert n.cpu().shape == (0, 3)
    with pytest.raises((RuntimeError, IndexError)):
        torch.zeros(0, device="npu").max()  # like CPU: no identity for max


def test_zero_dim_tensors():
    a = torch.tensor(2.5, device="npu")
    assert a.dim() == 0 and a.shape == ()
    b = torch.randn(3, 3).npu()
    assert_close((b * a).cpu(), b.cpu() * 2.5)
    assert (a + a).item() == 5.0
    # A CPU 0-dim tensor may join an npu op (as a scalar), like CUDA allows.
    c = b + torch.tensor(1.0)
    assert c.device == NPU
    assert_close(c.cpu(), b.cpu() + 1)


# --- dtypes ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64,
                                   torch.int64, torch.int32], ids=str)
def test_arith_per_dtype(dtype):
    a, b = _sample(dtype, seed=1), _sample(dtype, seed=2)
    if not dtype.is_floating_point:
        b = b.abs() + 1
    an, bn = a.npu(), b.npu()
    for fn in (torch.add, torch.sub, torch.mul, torch.maximum, torch.minimum):
        assert_close(fn(an, bn).cpu(), fn(a, b))
    assert_close((an // bn).cpu(), a // b)
    assert_close(an.sum().cpu(), a.sum())
    assert_close(an.abs().cpu(), a.abs())


def test_bool_ops():
    a, b = _sample(torch.bool, seed=1), _sample(torch.bool, seed=2)
    an, bn = a.npu(), b.npu()
    assert_close((an & bn).cpu(), a & b)
    assert_close((an | bn).cpu(), a | b)
    assert_close((~an).cpu(), ~a)
    assert an.any().item() == a.any().item()
    assert an.all().item() == a.all().item()
    assert an.sum().item() == a.sum().item()


def test_dtype_preserved_by_ops():
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.randn(3, dtype=dtype, device="npu")
        assert (x * 2).dtype == dtype
        assert torch.matmul(x.view(3, 1), x.view(1, 3)).dtype == dtype


# --- data-dependent shapes -----------------------------------------------------------

def test_nonzero():
    cpu = torch.tensor([[0, 1, 0], [2, 0, 3]])
    n = cpu.npu()
    assert_close(n.nonzero().cpu(), cpu.nonzero())
    nz = torch.nonzero(n, as_tuple=True)
    for a, b in zip(nz, torch.nonzero(cpu, as_tuple=True)):
        assert a.device == NPU
        assert_close(a.cpu(), b)


def test_masked_select_and_bool_indexing():
    cpu = torch.randn(5, 6)
    n = cpu.npu()
    assert_close(n.masked_select(n > 0).cpu(), cpu.masked_select(cpu > 0))
    assert_close(n[n > 0].cpu(), cpu[cpu > 0])
    rows = torch.tensor([True, False, True, True, False])
    assert_close(n[rows.npu()].cpu(), cpu[rows])
    # The result feeds further async work correctly.
    assert_close((n[n > 0] * 2).sum().cpu(), (cpu[cpu > 0] * 2).sum())


def test_unique():
    cpu = torch.tensor([3, 1, 2, 3, 3, 1, 7])
    n = cpu.npu()
    u, inv, cnt = torch.unique(n, sorted=True, return_inverse=True, return_counts=True)
    uc, invc, cntc = torch.unique(cpu, sorted=True, return_inverse=True, return_counts=True)
    assert_close(u.cpu(), uc)
    assert_close(inv.cpu(), invc)
    assert_close(cnt.cpu(), cntc)
    uc2, cntc2 = torch.unique_consecutive(cpu, return_counts=True)
    u2, cnt2 = torch.unique_consecutive(n, return_counts=True)
    assert_close(u2.cpu(), uc2)
    assert_close(cnt2.cpu(), cntc2)


def test_data_dependent_after_async_writes():
    # nonzero must see the result of queued in-place work, not stale memory.
    n = torch.zeros(1000, device="npu")
    for i in range(0, 1000, 100):
        n[i:i + 3].add_(1)
    assert n.nonzero().numel() == 30


# --- comparisons ---------------------------------------------------------------------

def test_comparisons():
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    b[0] = a[0]
    an, bn = a.npu(), b.npu()
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        r = getattr(torch, op)(an, bn)
        assert r.dtype == torch.bool
        assert_close(r.cpu(), getattr(torch, op)(a, b))
    assert_close((an > 0.5).cpu(), a > 0.5)
    assert torch.equal(an, an.clone())
    assert not torch.equal(an, bn)
    assert torch.allclose(an, an + 1e-9)
    assert_close(torch.isclose(an, bn).cpu(), torch.isclose(a, b))
    assert_close(torch.where(an > bn, an, bn).cpu(), torch.where(a > b, a, b))


def test_nan_inf():
    cpu = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    n = cpu.npu()
    assert_close(torch.isnan(n).cpu(), torch.isnan(cpu))
    assert_close(torch.isinf(n).cpu(), torch.isinf(cpu))
    assert_close(torch.isfinite(n).cpu(), torch.isfinite(cpu))
    assert_close(torch.nan_to_num(n).cpu(), torch.nan_to_num(cpu))


# --- factories -----------------------------------------------------------------------

def test_factories():
    cases = {
        "zeros": lambda d: torch.zeros(2, 3, device=d),
        "ones": lambda d: torch.ones(2, 3, dtype=torch.int32, device=d),
        "full": lambda d: torch.full((2, 2), 3.5, device=d),
        "arange": lambda d: torch.arange(0, 10, 3, device=d),
        "arange_float": lambda d: torch.arange(0.0, 1.0, 0.125, device=d),
        "linspace": lambda d: torch.linspace(-1, 1, 7, device=d),
        "logspace": lambda d: torch.logspace(0, 2, 5, device=d),
        "eye": lambda d: torch.eye(3, 4, device=d),
        "tensor": lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
        "zeros_like": lambda d: torch.zeros_like(torch.ones(3, device=d)),
        "ones_like": lambda d: torch.ones_like(torch.ones(3, device=d)),
        "full_like": lambda d: torch.full_like(torch.ones(3, device=d), 2),
        "tril_indices": lambda d: torch.tril_indices(3, 3, device=d),
    }
    for name, fn in cases.items():
        n = fn("npu")
        c = fn("cpu")
        assert n.device == NPU, name
        assert n.dtype == c.dtype, name
        assert_close(n.cpu(), c, msg=name)


def test_empty_like_and_new_methods():
    base = torch.ones(2, 3, dtype=torch.float16, device="npu")
    e = torch.empty_like(base)
    assert e.shape == (2, 3) and e.dtype == torch.float16 and e.device == NPU
    assert base.new_zeros(4).device == NPU
    assert_close(base.new_full((2,), 5.0).cpu(), torch.full((2,), 5.0, dtype=torch.float16))
    assert base.new_tensor([1, 2]).device == NPU


def test_random_factories():
    torch.npu.manual_seed(0)
    r = torch.rand(1000, device="npu")
    assert r.device == NPU
    assert 0.0 <= r.min().item() and r.max().item() < 1.0
    assert 0.4 < r.mean().item() < 0.6
    rn = torch.randn(4000, device="npu")
    assert abs(rn.mean().item()) < 0.1
    assert 0.9 < rn.std().item() < 1.1
    ri = torch.randint(3, 9, (1000,), device="npu")
    assert ri.dtype == torch.int64
    assert ri.min().item() >= 3 and ri.max().item() <= 8
    assert len(torch.unique(ri)) == 6
    p = torch.randperm(50, device="npu")
    assert_close(p.sort().values.cpu(), torch.arange(50))
    assert torch.rand(3, device="npu:2").device == torch.device("npu:2")


def test_factories_with_default_device():
    with torch.device("npu"):
        t = torch.ones(3)
    assert t.device == NPU


# --- device mixing -------------------------------------------------------------------

@pytest.mark.parametrize("other", ["cpu", "npu:1"])
def test_mixed_devices_raise(other):
    a = torch.ones(3, device="npu:0")
    b = torch.ones(3, device=other)
    with pytest.raises(RuntimeError, match="same device"):
        a + b
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(a.view(3, 1), b.view(1, 3))
    with pytest.raises(RuntimeError, match="same device"):
        torch.cat([a, b])


def test_legacy_tensor_types():
    t = torch.npu.FloatTensor([1.0, 2.0])
    assert t.device.type == "npu" and t.dtype == torch.float32
    assert torch.npu.HalfTensor(2).dtype == torch.float16
    assert torch.npu.BFloat16Tensor(2).dtype == torch.bfloat16
    assert torch.npu.LongTensor([1]).dtype == torch.int64
    # size= as torch's legacy constructors take it (Megatron's tests: torch.cuda.LongTensor(size=(b, s)))
    sized = torch.npu.LongTensor(size=(2, 3))
    assert sized.shape == (2, 3) and sized.dtype == torch.int64 and sized.device.type == "npu"
    assert torch.LongTensor(size=(2, 3)).shape == sized.shape
    with pytest.raises(TypeError, match="either positionally or as size="):
        torch.npu.LongTensor(2, size=(2, 3))
    # A torch.Size is sizes, not data, as for torch.FloatTensor(t.size()).
    like = torch.npu.FloatTensor(torch.zeros(4, 2).size())
    assert like.shape == torch.FloatTensor(torch.zeros(4, 2).size()).shape == (4, 2)
    # Tensor.type takes the class as CUDA's (the string form too), and the class names itself as CUDA's does
    x = torch.randn(2, 2, dtype=torch.float64)
    for target in (torch.npu.FloatTensor, "torch.npu.FloatTensor"):
        moved = x.type(target)
        assert moved.dtype == torch.float32 and moved.device.type == "npu" and moved.type() == "torch.npu.FloatTensor"
    assert repr(torch.npu.IntTensor) == "<class 'torch.npu.IntTensor'>"


# --- serialization -------------------------------------------------------------

def test_save_load_roundtrip():
    import io
    base = torch.randn(4, 6)
    n = base.npu()
    payload = {"t": n, "view": n[1:, ::2], "i": torch.arange(5, device="npu:1")}
    buf = io.BytesIO()
    torch.save(payload, buf)
    for loc, dev in ((None, "npu:0"), ("cpu", "cpu"), ("npu", "npu:0"), ("npu:2", "npu:2")):
        buf.seek(0)
        loaded = torch.load(buf, map_location=loc)
        assert str(loaded["t"].device) == dev
        assert_close(loaded["t"].cpu(), base)
        assert_close(loaded["view"].cpu(), base[1:, ::2])
        # A view and its base are saved once and stay aliased after loading.
        assert loaded["view"].untyped_storage().data_ptr() == loaded["t"].untyped_storage().data_ptr()
    buf.seek(0)
    assert str(torch.load(buf)["i"].device) == "npu:1"


# --- CPU index tensors into npu tensors ------------------------------------------

# PyTorch's index/index_put (device_check: NoCheck) move CPU index tensors to
# self's device, so on CUDA `x_cuda[cpu_indices]` and `x_cuda[cpu_mask] = v`
# work; migrated code relies on it.
def test_index_with_cpu_long_indices():
    cpu = torch.randn(5, 4)
    idx = torch.tensor([4, 0, 2])
    assert_close(cpu.npu()[idx].cpu(), cpu[idx])
    assert_close(cpu.npu()[:, idx[1:]].cpu(), cpu[:, idx[1:]])


def test_index_with_cpu_bool_mask():
    cpu = torch.randn(5, 4)
    mask = torch.tensor([True, False, True, False, True])
    assert_close(cpu.npu()[mask].cpu(), cpu[mask])


def test_index_put_with_cpu_indices():
    cpu = torch.zeros(6)
    n = cpu.npu()
    idx = torch.tensor([1, 4])
    cpu[idx] = 3.0
    n[idx] = 3.0
    assert_close(n.cpu(), cpu)


def test_mm_with_out_dtype_matches_cpu_in_fp32():
    # aten::mm.dtype(_out) has no CPU kernel in ATen (CUDA only); npu composes it.
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    out = torch.empty(5, 3, device="npu")
    torch.mm(a.npu(), b.npu(), out_dtype=torch.float32, out=out)
    torch.testing.assert_close(out.cpu(), a @ b)
    widened = torch.mm(a.half().npu(), b.half().npu(), out_dtype=torch.float32)
    assert widened.dtype == torch.float32
    torch.testing.assert_close(widened.cpu(), a.half().float() @ b.half().float(), rtol=1e-3, atol=1e-3)
    with pytest.raises(RuntimeError, match="out_dtype must be the same as input dtype or fp32"):
        torch.mm(a.npu(), b.npu(), out_dtype=torch.float16)


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_a_uint8_mask_warns_once_per_indexing_call_as_on_cpu(device):
    # Stage 2 of index reruns its meta function, and index_put_'s dry run its
    # kernel: neither repeats the deprecation warning the call already gave.
    # The second round's index_put_ is queued (its signature passed once): its
    # warning still comes on the caller (Note [A boxed kernel warns in its dry run]).
    mask = torch.zeros(10, dtype=torch.uint8, device=device)
    y = torch.ones(10, 10, device=device)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y.index_put_((mask,), y[mask], accumulate=True)
            torch.npu.synchronize()
        assert [str(w.message).startswith("indexing with dtype torch.uint8 is now deprecated") for w in caught] == \
            [True, True]


def test_indices_that_do_not_broadcast_raise_index_error_at_the_call_not_later():
    a = torch.zeros(5, 5, device="npu")
    with pytest.raises(IndexError, match="shape mismatch"):
        a[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="shape mismatch"):
        a[[0, 1], [0, 1, 2]] = 0
    torch.npu.synchronize()  # nothing left failing on the stream
    assert torch.equal(a.cpu(), torch.zeros(5, 5))


def test_isin_of_a_scalar_is_a_0_dim_answer_as_on_cpu():
    # The structured meta function sizes it (0,); ATen's CPU kernel resizes
    # it to 0-dim, so it takes the synchronous native path.
    test = torch.tensor([1.0, 5.0, 3.0])
    for element, invert in ((5, False), (4.0, False), (4.0, True)):
        want = torch.isin(element, test, invert=invert)
        got = torch.isin(element, test.npu(), invert=invert)
        assert got.shape == want.shape == torch.Size([])
        assert got.device.type == "npu" and got.item() == want.item()


def test_addcmul_refuses_a_cpu_scalar_as_self_or_tensor1_as_on_cuda():
    a, b = torch.rand(2, 2, device="npu"), torch.rand(2, 2, device="npu")
    scalar = torch.tensor(2.0)
    with pytest.raises(RuntimeError, match="CPU Scalar support for tensor1 argument is not supported when calling "
                                           "addcmul on NPU tensors. However, CPU Scalar support for tensor2"):
        torch.addcmul(a, scalar, b, value=0.5)
    with pytest.raises(RuntimeError, match="CPU Scalar support for self argument"):
        torch.addcmul(scalar, a, b)
    with pytest.raises(RuntimeError, match="CPU Scalar support for tensor1 argument"):
        a.clone().addcmul_(scalar, b)
    # as tensor2 it is supported, as on CUDA
    assert torch.allclose(torch.addcmul(a, b, scalar, value=0.5).cpu(), a.cpu() + 0.5 * b.cpu() * 2.0)
