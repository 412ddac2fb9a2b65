"""Functional ops whose results' shapes follow from the arguments' shapes (op policies kScalar,
kReduction, kLikeArgument, kMetaShaped: Note [Results shaped by the Meta kernel] in
csrc/launch/boxed_kernel.cpp): queued like any kernel instead of draining the stream, so they can
be captured in NPU graphs; results, dtypes, errors and gradients equal the cpu's."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401
from torch_npu import _C

CASES = {
    "max": lambda t: t.max(),
    "min": lambda t: t.min(),
    "median": lambda t: t.median(),
    "nanmedian": lambda t: t.nanmedian(),
    "prod": lambda t: t.prod(dtype=torch.float64),
    "std.correction": lambda t: t.std(1, correction=0),
    "var.correction": lambda t: t.var(1, keepdim=True),
    "trace": lambda t: t.trace(),
    "roll": lambda t: t.roll((1, -2), (0, 1)),
    "take": lambda t: t.take(torch.tensor([0, 7, 11], device=t.device)),
    "searchsorted.Tensor": lambda t: torch.searchsorted(torch.arange(-2.0, 2.0, 0.25, device=t.device), t),
    "bucketize.Tensor": lambda t: torch.bucketize(t, torch.arange(-2.0, 2.0, 0.5, device=t.device), right=True),
    "mode": lambda t: torch.mode(t.round(), 1),
    "count_nonzero.dim_IntList": lambda t: torch.count_nonzero(t > 0, dim=1),
    "histc": lambda t: torch.histc(t, 7),
    "std.correction:all": lambda t: t.std(),
    "var.correction:keepdim-all": lambda t: t.var(None, keepdim=True),
    "mode:keepdim": lambda t: torch.mode(t.round(), 0, keepdim=True),
    "bucketize.Scalar": lambda t: torch.bucketize(0.3, t.flatten().sort().values),
    "nansum": lambda t: t.nansum(1),
    "dot": lambda t: torch.dot(t[0], t[1]),
    "vdot": lambda t: torch.vdot(t[0], t[2]),
    "floor_divide": lambda t: torch.floor_divide(t, t[0].abs() + 0.5),
    "angle": lambda t: torch.angle(t),
    "logit": lambda t: torch.logit(t.sigmoid(), eps=1e-6),
    "hardswish": lambda t: F.hardswish(t),
    "mse_loss": lambda t: F.mse_loss(t, t.flip(0)),
    "mse_loss:none": lambda t: F.mse_loss(t, t.flip(0), reduction="none"),
    "smooth_l1_loss:sum": lambda t: F.smooth_l1_loss(t, t.flip(1), reduction="sum", beta=0.5),
    "huber_loss": lambda t: F.huber_loss(t, t.flip(1), delta=0.7),
    "binary_cross_entropy": lambda t: F.binary_cross_entropy(t.sigmoid(), t.flip(0).sigmoid()),
    "binary_cross_entropy:none": lambda t: F.binary_cross_entropy(t.sigmoid(), t.flip(0).sigmoid(),
                                                                  weight=t[0].abs(), reduction="none"),
}


def _same(expected, got):
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for e, g in zip(expected, got):
        assert g.device.type == "npu" and g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g.cpu(), e, equal_nan=True)


@pytest.mark.parametrize("op", sorted(CASES))
def test_queued_and_equal_to_cpu(op):
    assert _C._op_route("aten::" + op.split(":")[0])[0] == "policy_table"
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    _same(CASES[op](x), CASES[op](x.npu()))


def test_reductions_of_a_zero_dim_tensor_and_channels_last_inputs():
    s = torch.tensor(3.5)
    _same(s.std(correction=0), s.npu().std(correction=0))
    for dim in (0, -1, [0]):  # a 0-dim self takes dim 0 / -1 and reduces to 0-dim
        _same(torch.count_nonzero(s, dim=dim), torch.count_nonzero(s.npu(), dim=dim))
        _same(s.var(dim, correction=0), s.npu().var(dim, correction=0))
    _same(torch.mode(s, 0), torch.mode(s.npu(), 0))
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    _same(x.roll(1, 2), x.npu().roll(1, 2))
    _same(x.var((1, 3), keepdim=True), x.npu().var((1, 3), keepdim=True))


def test_captured_in_an_npu_graph():
    # they used to drain the stream, which a capture refuses
    y = torch.randn(6, device="npu")
    graph, stream = torch.npu.NPUGraph(), torch.npu.Stream()
    with torch.npu.graph(graph, stream=stream):
        stats = (y.max(), y.std(0), y.roll(1))
    y.copy_(torch.arange(6.0))
    graph.replay()
    torch.npu.synchronize()
    assert stats[0].item() == 5.0 and stats[2].tolist() == [5.0, 0, 1, 2, 3, 4]
    torch.testing.assert_close(stats[1].cpu(), torch.arange(6.0).std(0))


def test_errors_raise_at_the_call_with_atens_words():
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim to be specified"):
        torch.empty(0, device="npu").max()
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.randn(3, device="npu").roll(1, 5)
    # a value error: raised by the first launch of a signature (run on the caller), else at the next sync
    with pytest.raises((IndexError, RuntimeError), match="out of range"):
        torch.randn(3, device="npu").take(torch.tensor([7], device="npu")).cpu()


def test_gradients_equal_cpu():
    t = torch.randn(4, 5, requires_grad=True)
    tn = t.detach().npu().requires_grad_()
    for f in (lambda u: u.std(1).sum(), lambda u: u.prod(), lambda u: u.median(), lambda u: u.max(),
              lambda u: u.roll(2, 1).pow(2).sum(), lambda u: u.var(0, keepdim=True).sum()):
        expected, = torch.autograd.grad(f(t), t)
        got, = torch.autograd.grad(f(tn), tn)
        torch.testing.assert_close(got.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_group_norm_training_equals_cpu(dtype):
    assert _C._op_route("aten::native_group_norm")[0] == "policy_table"
    assert _C._op_route("aten::native_group_norm_backward")[0] == "policy_table"
    torch.manual_seed(0)
    cpu = torch.nn.GroupNorm(4, 8)  # float32 parameters: with bfloat16 input, mean/rstd are float32 (ATen's rule)
    npu = torch.nn.GroupNorm(4, 8).npu()
    npu.load_state_dict(cpu.state_dict())
    x = torch.randn(3, 8, 5, 5).to(dtype)
    xc, xn = x.clone().requires_grad_(), x.npu().requires_grad_()
    yc, yn = F.group_norm(xc, 4, cpu.weight, cpu.bias), F.group_norm(xn, 4, npu.weight, npu.bias)
    assert yn.dtype == yc.dtype
    torch.testing.assert_close(yn.cpu(), yc)
    yc.float().square().sum().backward()
    yn.float().square().sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)
    torch.testing.assert_close(npu.weight.grad.cpu(), cpu.weight.grad, rtol=1e-4, atol=1e-4)
    out = torch.ops.aten.native_group_norm(x.npu(), npu.weight, npu.bias, 3, 8, 25, 4, 1e-5)
    ref = torch.ops.aten.native_group_norm(x, cpu.weight, cpu.bias, 3, 8, 25, 4, 1e-5)
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and o.shape == r.shape


def test_losses_that_do_not_broadcast_raise_atens_error():
    with pytest.raises(RuntimeError, match="must match the size of tensor"):
        F.mse_loss(torch.randn(3, 4, device="npu"), torch.randn(5, 4, device="npu"), reduction="none")


def test_group_norm_without_affine_parameters_gets_only_the_input_gradient():
    x = torch.randn(2, 6, 4)
    xc, xn = x.clone().requires_grad_(), x.npu().requires_grad_()
    F.group_norm(xc, 3).pow(3).sum().backward()
    F.group_norm(xn, 3).pow(3).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)


def test_shape_rules_of_their_own():
    x = torch.randn(2, 8, 3, 5)
    for op in ("pixel_shuffle", "pixel_unshuffle", "reflection_pad2d", "grid_sampler_2d", "cholesky"):
        assert _C._op_route("aten::" + op)[0] == "policy_table"
    _same(F.pixel_shuffle(x, 2), F.pixel_shuffle(x.npu(), 2))
    y = torch.randn(2, 3, 4, 6)
    _same(F.pixel_unshuffle(y, 2), F.pixel_unshuffle(y.npu(), 2))
    _same(F.pad(x, (1, 2, 2, 1), mode="reflect"), F.pad(x.npu(), (1, 2, 2, 1), mode="reflect"))
    _same(F.pad(x[0], (0, 3, 1, 0), mode="reflect"), F.pad(x[0].npu(), (0, 3, 1, 0), mode="reflect"))
    cl = x.to(memory_format=torch.channels_last)
    _same(F.pad(cl, (1, 1, 1, 1), mode="reflect"), F.pad(cl.npu(), (1, 1, 1, 1), mode="reflect"))
    grid = torch.rand(2, 4, 7, 2) * 2 - 1
    for mode in ("bilinear", "nearest"):
        _same(F.grid_sample(x, grid, mode=mode, align_corners=True),
              F.grid_sample(x.npu(), grid.npu(), mode=mode, align_corners=True))
    a = torch.randn(4, 4)
    spd = a @ a.T + 4 * torch.eye(4)
    _same(torch.linalg.cholesky(spd), torch.linalg.cholesky(spd.npu()))
    _same(torch.cholesky(spd), torch.cholesky(spd.npu()))
    _same(F.channel_shuffle(x, 4), F.channel_shuffle(x.npu(), 4))


def test_shape_rule_errors_use_atens_words_and_gradients_flow():
    with pytest.raises(RuntimeError, match="divisible by the square of upscale_factor"):
        F.pixel_shuffle(torch.randn(1, 6, 2, 2, device="npu"), 2)
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        F.pad(torch.randn(1, 1, 2, 2, device="npu"), (2, 2, 0, 0), mode="reflect")
    x = torch.randn(1, 4, 3, 3, requires_grad=True)
    xn = x.detach().npu().requires_grad_()
    for f in (lambda t: F.pixel_shuffle(t, 2), lambda t: F.pad(t, (1, 1, 2, 0), mode="reflect")):
        expected, = torch.autograd.grad(f(x).pow(2).sum(), x)
        got, = torch.autograd.grad(f(xn).pow(2).sum(), xn)
        torch.testing.assert_close(got.cpu(), expected)


def test_random_and_in_place_rows():
    torch.npu.manual_seed(3)
    a = torch.poisson(torch.full((1000,), 4.0, device="npu"))
    torch.npu.manual_seed(3)
    assert torch.equal(a, torch.poisson(torch.full((1000,), 4.0, device="npu")))  # the npu generator's draws
    assert abs(a.mean().item() - 4.0) < 0.3
    b = torch.binomial(torch.full((1000,), 10.0, device="npu"), torch.full((1,), 0.3, device="npu"))
    assert b.shape == (1000,) and abs(b.mean().item() - 3.0) < 0.3
    emb_cpu, emb_npu = torch.nn.Embedding(5, 3, max_norm=1.0), torch.nn.Embedding(5, 3, max_norm=1.0).npu()
    emb_npu.load_state_dict(emb_cpu.state_dict())
    idx = torch.tensor([0, 2, 2, 4])
    _same(emb_cpu(idx), emb_npu(idx.npu()))
    torch.testing.assert_close(emb_npu.weight.detach().cpu(), emb_cpu.weight.detach())  # renormed in place
    t = torch.randn(10) * 3
    _same(F.hardtanh_(t.clone()), F.hardtanh_(t.npu()))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_segmentation_cross_entropy_equals_cpu(reduction):
    assert _C._op_route("aten::nll_loss2d_forward")[0] == "policy_table"
    x = torch.randn(2, 5, 4, 6)
    y = torch.randint(0, 5, (2, 4, 6))
    y[0, 0, :3] = 255  # ignored pixels
    w = torch.rand(5) + 0.5
    xc, xn = x.clone().requires_grad_(), x.npu().requires_grad_()
    lc = F.cross_entropy(xc, y, weight=w, ignore_index=255, reduction=reduction)
    ln = F.cross_entropy(xn, y.npu(), weight=w.npu(), ignore_index=255, reduction=reduction)
    _same(lc, ln)
    lc.sum().backward()
    ln.sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                    dict(kernel_size=(2, 3, 2), stride=(1, 2, 2), ceil_mode=True),
                                    dict(kernel_size=2, dilation=2)])
def test_max_pool3d_with_indices_equals_cpu(kwargs):
    assert _C._op_route("aten::max_pool3d_with_indices")[0] == "policy_table"
    x = torch.randn(2, 3, 7, 8, 9)
    xc, xn = x.clone().requires_grad_(), x.npu().requires_grad_()
    oc, ic = F.max_pool3d(xc, return_indices=True, **kwargs)
    on, in_ = F.max_pool3d(xn, return_indices=True, **kwargs)
    _same((oc, ic), (on, in_))
    oc.pow(2).sum().backward()
    on.pow(2).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)
    with pytest.raises(RuntimeError, match="padding at most half the kernel|pad should be"):
        F.max_pool3d(x.npu(), kernel_size=2, padding=2)


def test_unfold_fold_grid_sample_backward_and_triangle_indices():
    for op in ("im2col", "col2im", "grid_sampler_2d_backward", "tril_indices", "triu_indices"):
        assert _C._op_route("aten::" + op)[0] == "policy_table"
    x = torch.randn(2, 3, 7, 8)
    for kw in (dict(kernel_size=2), dict(kernel_size=(3, 2), dilation=(1, 2), padding=1, stride=(2, 1))):
        cols = F.unfold(x, **kw)
        _same(cols, F.unfold(x.npu(), **kw))
        _same(F.fold(cols, (7, 8), **kw), F.fold(cols.npu(), (7, 8), **kw))
    _same(F.unfold(x[0], 3), F.unfold(x[0].npu(), 3))  # unbatched
    with pytest.raises(RuntimeError, match="calculated number of sliding blocks"):
        F.fold(torch.randn(1, 4, 5, device="npu"), (3, 4), 2)
    grid = torch.rand(2, 4, 5, 2) * 2 - 1
    xc, gc = x.clone().requires_grad_(), grid.clone().requires_grad_()
    xn, gn = x.npu().requires_grad_(), grid.npu().requires_grad_()
    F.grid_sample(xc, gc, align_corners=False).pow(2).sum().backward()
    F.grid_sample(xn, gn, align_corners=False).pow(2).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)
    torch.testing.assert_close(gn.grad.cpu(), gc.grad, rtol=1e-4, atol=1e-4)
    gn.grad = None  # only the grid's gradient asked for
    F.grid_sample(x.npu(), gn, align_corners=False).sum().backward()
    assert gn.grad is not None
    for args in ((4, 4), (3, 5, 1), (5, 3, -2), (0, 3)):
        _same(torch.tril_indices(*args), torch.tril_indices(*args, device="npu"))
        _same(torch.triu_indices(*args, dtype=torch.int32), torch.triu_indices(*args, dtype=torch.int32, device="npu"))


@pytest.mark.parametrize("make", [
    lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, fused=True),
    lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True, fused=True),
    lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, fused=True),
    lambda p: torch.optim.Adagrad(p, lr=1e-2, fused=True),
    lambda p: torch.optim.AdamW(p, lr=torch.tensor(1e-2), fused=True),
])
def test_fused_optimizer_steps_are_queued_and_equal_cpu(make):
    assert _C._op_route("aten::_fused_adamw_")[0] == "policy_table"
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    npu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).npu()
    npu.load_state_dict(cpu.state_dict())
    opt_cpu, opt_npu = make(cpu.parameters()), make(npu.parameters())
    for step in range(4):
        x = torch.randn(5, 6, generator=torch.Generator().manual_seed(step))
        for model, opt, data in ((cpu, opt_cpu, x), (npu, opt_npu, x.npu())):
            opt.zero_grad()
            model(data).pow(2).mean().backward()
            opt.step()
    for a, b in zip(cpu.parameters(), npu.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_histc_counts_integer_tensors_in_their_dtype_as_cuda(dtype):
    # ATen's CPU histogram takes floats only; CUDA's (and torch_npu's) count integers too.
    x = torch.randint(0, 50, (1000,), generator=torch.Generator().manual_seed(0)).to(dtype)
    counts = torch.histc(x.npu(), bins=10, min=0, max=49)
    assert counts.dtype == dtype
    assert torch.equal(counts.cpu().long(), torch.histc(x.float(), bins=10, min=0, max=49).long())
    out = torch.empty(10, dtype=dtype, device="npu")
    torch.histc(x.npu(), bins=10, min=0, max=49, out=out)
    assert torch.equal(out.cpu(), counts.cpu())
    with pytest.raises(RuntimeError, match="should have the same dtype"):
        torch.histc(x.npu(), bins=10, min=0, max=49, out=torch.empty(10, device="npu"))


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_repeat_interleave_is_recorded_whole_with_torch_npus_gradient(dim):
    # csrc/ops/repeat_interleave.cpp: autograd records the operator (its backward is
    # npu::repeat_interleave_backward_int), as real torch_npu's; gradients as on cpu.
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    a, b = x.clone().requires_grad_(), x.npu().requires_grad_()
    ya, yb = a.repeat_interleave(3, dim=dim), b.repeat_interleave(3, dim=dim)
    assert "RepeatInterleave" in yb.grad_fn.name() and torch.equal(yb.detach().cpu(), ya.detach())
    g = torch.randn(ya.shape, generator=torch.Generator().manual_seed(1))
    ya.backward(g)
    yb.backward(g.npu())
    torch.testing.assert_close(b.grad.cpu(), a.grad)


def test_repeat_interleave_under_functorch_transforms():
    # functorch refuses C++ autograd functions: under a transform ATen's composite runs instead.
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))

    def f(t):
        return t.repeat_interleave(2, dim=0).sin().sum()

    torch.testing.assert_close(torch.func.grad(f)(x.npu()).cpu(), torch.func.grad(f)(x))
    batched = torch.vmap(lambda t: t.repeat_interleave(2))(x.npu())
    assert torch.equal(batched.cpu(), torch.vmap(lambda t: t.repeat_interleave(2))(x))
