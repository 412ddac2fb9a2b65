"""Differential forward + backward tests for the ops a training loop needs.

Each case runs the same function on CPU tensors and on npu copies of them and
compares outputs and input gradients. The npu kernels are ATen's CPU kernels
run on stream workers, so float32 results should match closely; tolerances are
torch.testing's defaults unless the op accumulates in a different order.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close


def _to_npu(x):
    if isinstance(x, torch.Tensor):
        y = x.detach().npu()
        return y.requires_grad_(x.requires_grad)
    return x


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def check_fwd_bwd(fn, *inputs, atol=None, rtol=None, seed=0):
    """fn(*inputs) on cpu vs npu: outputs and gradients of float inputs."""
    cpu_in = [x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x
              for x in inputs]
    npu_in = [_to_npu(x) for x in cpu_in]
    out_c = _flat(fn(*cpu_in))
    out_n = _flat(fn(*npu_in))
    assert len(out_c) == len(out_n)
    tol = {} if atol is None else {"atol": atol, "rtol": rtol}
    for oc, on in zip(out_c, out_n):
        assert on.device.type == "npu"
        assert on.dtype == oc.dtype and on.shape == oc.shape
        assert_close(on.cpu(), oc, **tol)
    # Backward with the same random upstream gradient on both sides.
    diff_c = [o for o in out_c if o.requires_grad]
    diff_n = [o for o in out_n if o.requires_grad]
    if not diff_c:
        return out_n
    g = torch.Generator().manual_seed(seed)
    grads = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in diff_c]
    torch.autograd.backward(diff_c, grads)
    torch.autograd.backward(diff_n, [gr.npu() for gr in grads])
    for i, (xc, xn) in enumerate(zip(cpu_in, npu_in)):
        if isinstance(xc, torch.Tensor) and xc.requires_grad:
            assert xn.grad is not None, f"input {i} has no grad on npu"
            assert xn.grad.device.type == "npu"
            assert_close(xn.grad.cpu(), xc.grad, **tol, msg=lambda m: f"grad of input {i}: {m}")
    return out_n


def rnd(*shape, grad=True, seed=None, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed if seed is not None else hash(shape) % 1000)
    return torch.randn(shape, generator=g, dtype=dtype).requires_grad_(grad)


# --- matmul family -------------------------------------------------------------

MATMUL_CASES = {
    "mm": (torch.mm, lambda: (rnd(5, 7, seed=1), rnd(7, 3, seed=2))),
    "addmm": (torch.addmm, lambda: (rnd(3, seed=3), rnd(5, 7, seed=1), rnd(7, 3, seed=2))),
    "bmm": (torch.bmm, lambda: (rnd(4, 5, 6, seed=1), rnd(4, 6, 3, seed=2))),
    "matmul_broadcast": (torch.matmul, lambda: (rnd(2, 4, 5, 6, seed=1), rnd(6, 3, seed=2))),
    "matmul_vec": (torch.matmul, lambda: (rnd(5, 6, seed=1), rnd(6, seed=2))),
    "matmul_transposed": (lambda a, b: a.t() @ b.t(), lambda: (rnd(7, 5, seed=1), rnd(3, 7, seed=2))),
    "linear": (F.linear, lambda: (rnd(8, 16, seed=1), rnd(4, 16, seed=2), rnd(4, seed=3))),
    "linear_3d": (F.linear, lambda: (rnd(2, 8, 16, seed=1), rnd(4, 16, seed=2), rnd(4, seed=3))),
    "baddbmm": (lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2.0),
                lambda: (rnd(4, 5, 3, seed=0), rnd(4, 5, 6, seed=1), rnd(4, 6, 3, seed=2))),
    "einsum": (lambda a, b: torch.einsum("bij,bjk->bik", a, b),
               lambda: (rnd(2, 3, 4, seed=1), rnd(2, 4, 5, seed=2))),
}


@pytest.mark.parametrize("name", list(MATMUL_CASES))
def test_matmul_family(name):
    fn, make = MATMUL_CASES[name]
    check_fwd_bwd(fn, *make(), atol=1e-5, rtol=1e-4)


def test_matmul_half_and_bf16():
    for dtype in (torch.float16, torch.bfloat16):
        a, b = rnd(16, 32, grad=False, seed=1).to(dtype), rnd(32, 8, grad=False, seed=2).to(dtype)
        out = (a.npu() @ b.npu()).cpu()
        assert out.dtype == dtype
        assert_close(out, a @ b)


def test_addmm_with_a_float32_bias_and_half_matrices_returns_float32():
    # torch_npu's addmm (aclnnAddmm): self's dtype, the product kept in float32
    for dtype in (torch.float16, torch.bfloat16):
        a, b = rnd(16, 32, grad=False, seed=1).to(dtype), rnd(32, 8, grad=False, seed=2).to(dtype)
        for bias in (rnd(8, grad=False, seed=3), rnd(16, 8, grad=False, seed=4)):
            out = torch.addmm(bias.npu(), a.npu(), b.npu(), beta=0.5, alpha=1.25).cpu()
            assert out.dtype == torch.float32
            assert_close(out, 0.5 * bias + 1.25 * (a.float() @ b.float()), atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="same dtype"):  # other mixes stay refused, as on cpu
        torch.addmm(rnd(8, grad=False).half().npu(), rnd(4, 6, grad=False).npu(), rnd(6, 8, grad=False).npu())


# --- convolution ---------------------------------------------------------------

CONV_CASES = {
    "plain": dict(stride=1, padding=0, groups=1, bias=False),
    "bias_stride2": dict(stride=2, padding=0, groups=1, bias=True),
    "padding": dict(stride=1, padding=1, groups=1, bias=True),
    "groups2": dict(stride=1, padding=1, groups=2, bias=True),
    "depthwise": dict(stride=1, padding=1, groups=4, bias=False),
    "dilation": dict(stride=1, padding=2, groups=1, bias=True, dilation=2),
}


@pytest.mark.parametrize("name", list(CONV_CASES))
def test_conv2d(name):
    kw = dict(CONV_CASES[name])
    groups, bias = kw.pop("groups"), kw.pop("bias")
    x = rnd(2, 4, 9, 9, seed=1)
    w = rnd(8, 4 // groups, 3, 3, seed=2)
    b = rnd(8, seed=3) if bias else None
    check_fwd_bwd(lambda x, w, b: F.conv2d(x, w, b, groups=groups, **kw), x, w, b,
                  atol=1e-4, rtol=1e-4)


def test_conv_module_and_pool():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Conv2d(6, 4, 3, stride=2),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    net_n = copy.deepcopy(net).npu()
    x = rnd(2, 3, 16, 16, grad=False, seed=4)
    out_c, out_n = net(x), net_n(x.npu())
    assert_close(out_n.cpu(), out_c, atol=1e-5, rtol=1e-4)
    out_c.sum().backward()
    out_n.sum().backward()
    for (name, pc), pn in zip(net.named_parameters(), net_n.parameters()):
        assert_close(pn.grad.cpu(), pc.grad, atol=1e-4, rtol=1e-4, msg=name)


def test_conv3d():
    check_fwd_bwd(lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 2), padding=1),
                  rnd(1, 2, 5, 6, 6, seed=60), rnd(4, 2, 3, 3, 3, seed=61), rnd(4, seed=62),
                  atol=1e-4, rtol=1e-4)


def test_conv2d_channels_last():
    x = rnd(2, 3, 8, 8, grad=False, seed=63).to(memory_format=torch.channels_last).requires_grad_()
    w = rnd(6, 3, 3, 3, seed=64)
    out = check_fwd_bwd(lambda x, w: F.conv2d(x, w, padding=1), x, w, atol=1e-4, rtol=1e-4)
    assert out[0].is_contiguous(memory_format=torch.channels_last)


def test_conv1d_and_conv_transpose2d():
    check_fwd_bwd(lambda x, w: F.conv1d(x, w, padding=1), rnd(2, 3, 10, seed=1), rnd(5, 3, 3, seed=2),
                  atol=1e-5, rtol=1e-4)
    check_fwd_bwd(lambda x, w: F.conv_transpose2d(x, w, stride=2), rnd(1, 4, 5, 5, seed=1),
                  rnd(4, 2, 3, 3, seed=2), atol=1e-5, rtol=1e-4)


# --- activations, softmax, losses --------------------------------------------------

ACTIVATIONS = {
    "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1), "elu": F.elu, "softplus": F.softplus,
    "hardswish": F.hardswish, "mish": F.mish,
    "softmax": lambda x: F.softmax(x, dim=-1), "softmax_dim0": lambda x: F.softmax(x, dim=0),
    "log_softmax": lambda x: F.log_softmax(x, dim=1),
    "exp": torch.exp, "log_abs": lambda x: torch.log(x.abs() + 1), "sqrt_abs": lambda x: (x.abs() + 1).sqrt(),
    "rsqrt_abs": lambda x: (x.abs() + 1).rsqrt(), "pow": lambda x: x.pow(3), "sin": torch.sin,
    "clamp": lambda x: x.clamp(-0.5, 0.5),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation(name):
    check_fwd_bwd(ACTIVATIONS[name], rnd(6, 10, seed=5))


def test_activation_noncontiguous_input():
    x = rnd(10, 6, seed=6)
    check_fwd_bwd(lambda x: F.gelu(x.t()[:, ::2]), x)


LOSSES = {
    "cross_entropy": lambda x, t: F.cross_entropy(x, t),
    "cross_entropy_sum": lambda x, t: F.cross_entropy(x, t, reduction="sum"),
    "cross_entropy_smoothing": lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
    "cross_entropy_ignore": lambda x, t: F.cross_entropy(x, t, ignore_index=2),
    "nll_loss": lambda x, t: F.nll_loss(F.log_softmax(x, 1), t),
    "nll_loss_none": lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, reduction="none"),
    "mse_loss": lambda x, t: F.mse_loss(x, F.one_hot(t, 5).float()),
    "mse_loss_none": lambda x, t: F.mse_loss(x, F.one_hot(t, 5).float(), reduction="none"),
    "l1_loss": lambda x, t: F.l1_loss(x, F.one_hot(t, 5).float()),
    "smooth_l1": lambda x, t: F.smooth_l1_loss(x, F.one_hot(t, 5).float()),
    "huber": lambda x, t: F.huber_loss(x, F.one_hot(t, 5).float()),
    "bce_logits": lambda x, t: F.binary_cross_entropy_with_logits(x, F.one_hot(t, 5).float()),
    "kl_div": lambda x, t: F.kl_div(F.log_softmax(x, 1), F.softmax(x.detach() * 0.5, 1), reduction="batchmean"),
}


@pytest.mark.parametrize("loss", list(LOSSES.values()), ids=list(LOSSES))
def test_loss(loss):
    target = torch.tensor([0, 4, 2, 1, 2, 3, 0, 4])
    check_fwd_bwd(loss, rnd(8, 5, seed=7), target)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mse_loss_reduced_minimal(reduction):
    # Regression: the CPU out= kernel computes the unreduced loss and then
    # resizes the 0-dim output; that used to fail in stage 2 with "Trying to
    # resize storage that is not resizable".
    a, b = torch.randn(8, 5), torch.randn(8, 5)
    out = F.mse_loss(a.npu(), b.npu(), reduction=reduction)
    assert_close(out.cpu(), F.mse_loss(a, b, reduction=reduction))


def test_cross_entropy_3d_input():
    target = torch.randint(0, 4, (2, 6), generator=torch.Generator().manual_seed(0))
    check_fwd_bwd(lambda x, t: F.cross_entropy(x, t), rnd(2, 4, 6, seed=8), target)


# --- elementwise arithmetic --------------------------------------------------------

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2.5), "pow": lambda a, b: a.abs().pow(b),
    "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2,
    "lerp": lambda a, b: torch.lerp(a, b, 0.3), "hypot": torch.hypot,
}
SHAPES = {
    "same": ((4, 5), (4, 5)),
    "row_bcast": ((4, 5), (5,)),
    "col_bcast": ((4, 1), (1, 5)),
    "3d_bcast": ((2, 1, 5), (3, 1)),
    "scalar_tensor": ((4, 5), ()),
}


@pytest.mark.parametrize("shapes", list(SHAPES))
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_broadcast(op, shapes):
    sa, sb = SHAPES[shapes]
    check_fwd_bwd(BINARY[op], rnd(*sa, seed=1), rnd(*sb, seed=2))


PROMOTION = [
    (torch.int64, torch.float32), (torch.int32, torch.int64), (torch.float16, torch.float32),
    (torch.bfloat16, torch.float16), (torch.bool, torch.int32), (torch.uint8, torch.int8),
    (torch.float32, torch.float64),
]


@pytest.mark.parametrize("da,db", PROMOTION, ids=lambda d: str(d).replace("torch.", ""))
def test_type_promotion(da, db):
    a = (torch.arange(12).reshape(3, 4) % 5).to(da)
    b = (torch.arange(4) + 1).to(db)
    for fn in (torch.add, torch.mul, torch.maximum, torch.eq, torch.lt):
        rc, rn = fn(a, b), fn(a.npu(), b.npu())
        assert rn.dtype == rc.dtype, fn
        assert_close(rn.cpu(), rc)
    # Python scalars promote like on CPU.
    assert (a.npu() * 2.5).dtype == (a * 2.5).dtype
    assert_close((a.npu() + 1).cpu(), a + 1)
    assert (a.npu() / 2).dtype == (a / 2).dtype


def test_integer_division_semantics():
    a = torch.tensor([-7, 7, -8, 9])
    b = torch.tensor([2, -2, 3, 4])
    an, bn = a.npu(), b.npu()
    assert_close(torch.div(an, bn, rounding_mode="floor").cpu(), torch.div(a, b, rounding_mode="floor"))
    assert_close(torch.div(an, bn, rounding_mode="trunc").cpu(), torch.div(a, b, rounding_mode="trunc"))
    assert_close((an % bn).cpu(), a % b)
    assert_close(torch.fmod(an, bn).cpu(), torch.fmod(a, b))
    assert_close((an / bn).cpu(), a / b)


def test_out_variants():
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    out = torch.empty(0, device="npu")
    torch.add(a.npu(), b.npu(), out=out)
    assert out.shape == (4, 5)
    assert_close(out.cpu(), a + b)
    out2 = torch.empty(4, 5, device="npu")
    torch.mm(a.npu(), b.npu().t(), out=out2[:4, :4])
    assert_close(out2[:4, :4].cpu(), a @ b.t())


# --- reductions ----------------------------------------------------------------

REDUCTIONS = {
    "sum": lambda x: x.sum(), "sum_dim": lambda x: x.sum(1), "sum_keepdim": lambda x: x.sum(0, keepdim=True),
    "sum_dims": lambda x: x.sum((0, 2)), "mean": lambda x: x.mean(), "mean_dim": lambda x: x.mean(-1, keepdim=True),
    "max": lambda x: x.max(), "max_dim": lambda x: x.max(dim=1), "max_keepdim": lambda x: x.max(dim=2, keepdim=True),
    "min": lambda x: x.min(), "min_dim": lambda x: x.min(dim=0),
    "amax": lambda x: x.amax((1, 2)), "prod": lambda x: (x * 0.5).prod(1), "var": lambda x: x.var(1),
    "std": lambda x: x.std(), "norm": lambda x: x.norm(), "norm_dim": lambda x: x.norm(dim=2),
    "logsumexp": lambda x: x.logsumexp(1), "cumsum": lambda x: x.cumsum(1),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction(name):
    check_fwd_bwd(REDUCTIONS[name], rnd(3, 4, 5, seed=9), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_argmax_argmin(fn):
    x = rnd(4, 7, grad=False, seed=10)
    xn = x.npu()
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        rc, rn = getattr(x, fn)(**kw), getattr(xn, fn)(**kw)
        assert rn.dtype == torch.int64
        assert_close(rn.cpu(), rc)


def test_sort_topk():
    x = rnd(4, 9, grad=False, seed=11)
    xn = x.npu()
    vc, ic = x.sort(dim=1, descending=True)
    vn, in_ = xn.sort(dim=1, descending=True)
    assert_close(vn.cpu(), vc)
    assert_close(in_.cpu(), ic)
    tc, tic = x.topk(3, dim=1)
    tn, tin = xn.topk(3, dim=1)
    assert_close(tn.cpu(), tc)
    assert_close(tin.cpu(), tic)


# --- normalisation -----------------------------------------------------------------

def test_layer_norm():
    x, w, b = rnd(4, 6, 16, seed=12), rnd(16, seed=13), rnd(16, seed=14)
    check_fwd_bwd(lambda x, w, b: F.layer_norm(x, (16,), w, b, eps=1e-5), x, w, b, atol=1e-5, rtol=1e-4)
    check_fwd_bwd(lambda x: F.layer_norm(x, (6, 16)), rnd(4, 6, 16, seed=15), atol=1e-5, rtol=1e-4)


def test_group_norm():
    check_fwd_bwd(lambda x, w, b: F.group_norm(x, 2, w, b), rnd(2, 4, 5, 5, seed=16), rnd(4, seed=17),
                  rnd(4, seed=18), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dims", [1, 2])
def test_batch_norm_train_and_eval(dims):
    torch.manual_seed(0)
    bn_c = torch.nn.BatchNorm1d(6) if dims == 1 else torch.nn.BatchNorm2d(6)
    with torch.no_grad():
        bn_c.weight.uniform_(0.5, 1.5)
        bn_c.bias.uniform_(-0.5, 0.5)
    bn_n = copy.deepcopy(bn_c).npu()
    shape = (8, 6) if dims == 1 else (4, 6, 5, 5)
    # Train: uses batch statistics and updates running_mean/var (momentum 0.1).
    bn_c.train(), bn_n.train()
    for step in range(3):
        x = rnd(*shape, seed=20 + step)
        out_c = bn_c(x)
        out_n = bn_n(x.detach().npu().requires_grad_())
        assert_close(out_n.cpu(), out_c, atol=1e-5, rtol=1e-4)
        out_c.square().sum().backward()
        out_n.square().sum().backward()
    assert bn_n.num_batches_tracked.item() == bn_c.num_batches_tracked.item() == 3
    assert_close(bn_n.running_mean.cpu(), bn_c.running_mean, atol=1e-6, rtol=1e-5)
    assert_close(bn_n.running_var.cpu(), bn_c.running_var, atol=1e-6, rtol=1e-5)
    assert_close(bn_n.weight.grad.cpu(), bn_c.weight.grad, atol=1e-4, rtol=1e-4)
    assert_close(bn_n.bias.grad.cpu(), bn_c.bias.grad, atol=1e-4, rtol=1e-4)
    # Eval: uses running statistics, which are left untouched.
    bn_c.eval(), bn_n.eval()
    x = rnd(*shape, grad=False, seed=30)
    assert_close(bn_n(x.npu()).cpu(), bn_c(x), atol=1e-5, rtol=1e-4)
    assert_close(bn_n.running_mean.cpu(), bn_c.running_mean, atol=1e-6, rtol=1e-5)


# --- dropout -------------------------------------------------------------------

def test_dropout_p0_identity_and_p1_zeros():
    x = rnd(100, 10, seed=31).npu()
    assert_close(F.dropout(x, p=0.0, training=True).cpu(), x.detach().cpu())
    assert torch.count_nonzero(F.dropout(x, p=1.0, training=True)).item() == 0
    # Eval mode is the identity whatever p is.
    assert_close(F.dropout(x, p=0.7, training=False).cpu(), x.detach().cpu())


def test_dropout_train_mask_fraction_and_scale():
    torch.npu.manual_seed(1234)
    x = torch.ones(200_000, device="npu", requires_grad=True)
    y = F.dropout(x, p=0.3, training=True)
    kept = (y != 0)
    frac = kept.float().mean().item()
    assert abs(frac - 0.7) < 0.01
    # Survivors are scaled by 1/(1-p).
    assert_close(y[kept].cpu(), torch.full((int(kept.sum().item()),), 1 / 0.7))
    y.sum().backward()
    # Gradient follows the same mask.
    assert torch.equal((x.grad != 0).cpu(), kept.cpu())


def test_dropout_module_npu():
    torch.npu.manual_seed(0)
    m = torch.nn.Dropout(0.5).npu()
    y = m(torch.ones(10_000, device="npu"))
    assert 0.45 < (y == 0).float().mean().item() < 0.55
    m.eval()
    assert torch.equal(m(torch.ones(10, device="npu")).cpu(), torch.ones(10))


# --- embeddings, gather/scatter, cat/stack ---------------------------------------

def test_embedding():
    idx = torch.tensor([[0, 2, 4, 2], [9, 1, 0, 0]])
    check_fwd_bwd(lambda w, i: F.embedding(i, w), rnd(10, 6, seed=32), idx)
    # padding_idx rows get no gradient.
    w = rnd(10, 6, seed=33)
    (out,) = check_fwd_bwd(lambda w, i: F.embedding(i, w, padding_idx=0), w, idx)
    assert out.shape == (2, 4, 6)


def test_embedding_module():
    torch.manual_seed(0)
    emb_c = torch.nn.Embedding(20, 8)
    emb_n = copy.deepcopy(emb_c).npu()
    idx = torch.randint(0, 20, (4, 7), generator=torch.Generator().manual_seed(1))
    emb_c(idx).pow(2).sum().backward()
    emb_n(idx.npu()).pow(2).sum().backward()
    assert_close(emb_n.weight.grad.cpu(), emb_c.weight.grad)



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("padding_idx", [-1, 3])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding_dense_backward_is_atens(dtype, padding_idx, scale_grad_by_freq):
    # Float and double gradients are summed straight into the npu output (no
    # host temporary); they must equal ATen's bit for bit, repeated indices,
    # padding row and non-contiguous indices included.
    gen = torch.Generator().manual_seed(5)
    idx = torch.randint(0, 40, (300, 2), generator=gen).t()
    idx[0, :20] = 3
    grad = torch.randn(2, 300, 16, generator=gen).to(dtype)
    args = (40, padding_idx, scale_grad_by_freq)
    want = torch.ops.aten.embedding_dense_backward(grad, idx, *args)
    got = torch.ops.aten.embedding_dense_backward(grad.npu(), idx.npu(), *args)
    assert torch.equal(got.cpu(), want)
    if padding_idx >= 0:
        assert not got[padding_idx].any()


CAT_CASES = {
    "cat0": lambda a, b: torch.cat([a, b], 0),
    "cat1": lambda a, b: torch.cat([a, b, a], 1),
    "stack": lambda a, b: torch.stack([a, b], 1),
    "cat_noncontig": lambda a, b: torch.cat([a.t(), b.t()], 0),
    "hstack": lambda a, b: torch.hstack([a, b]),
}


@pytest.mark.parametrize("name", list(CAT_CASES))
def test_cat_stack(name):
    check_fwd_bwd(CAT_CASES[name], rnd(3, 4, seed=34), rnd(3, 4, seed=35))


def test_index_select_gather_scatter():
    x = rnd(5, 4, seed=36)
    idx = torch.tensor([4, 0, 0, 2])
    check_fwd_bwd(lambda x, i: x.index_select(0, i), x, idx)
    gidx = torch.tensor([[0, 1, 2, 3], [4, 3, 2, 1], [0, 0, 0, 0]])
    check_fwd_bwd(lambda x, i: x.gather(0, i), rnd(5, 4, seed=37), gidx)
    check_fwd_bwd(lambda x, i: x.gather(1, i.t()[:, :3] % 4), rnd(4, 4, seed=38), gidx)
    src = rnd(3, 4, seed=39)
    check_fwd_bwd(lambda x, s, i: x.scatter(0, i, s), rnd(5, 4, seed=40), src, gidx)
    check_fwd_bwd(lambda x, s, i: x.scatter_add(0, i, s), rnd(5, 4, seed=41), src, gidx)
    # scatter_reduce and index_add are used by GNNs/MoE routing.
    check_fwd_bwd(lambda x, s, i: x.index_add(0, i, s), rnd(5, 4, seed=42), rnd(4, 4, seed=43), idx)
    xc = torch.zeros(5)
    src1 = torch.arange(8.0)
    i1 = torch.tensor([0, 1, 1, 4, 4, 4, 2, 0])
    assert_close(xc.npu().scatter_reduce(0, i1.npu(), src1.npu(), "amax").cpu(),
                 xc.scatter_reduce(0, i1, src1, "amax"))


def test_advanced_indexing():
    x = rnd(6, 5, seed=44)
    rows, cols = torch.tensor([0, 5, 2]), torch.tensor([1, 1, 4])
    check_fwd_bwd(lambda x, r, c: x[r, c], x, rows, cols)
    check_fwd_bwd(lambda x, r: x[r][:, 1:3], rnd(6, 5, seed=45), rows)
    check_fwd_bwd(lambda x: x[..., [0, 2]], rnd(2, 3, 4, seed=46))


def test_misc_shape_ops():
    x = rnd(3, 4, seed=47)
    for fn in (lambda x: x.flip(0), lambda x: x.roll(1, 1), lambda x: x.repeat(2, 1),
               lambda x: x.tril(), lambda x: x.triu(1), lambda x: F.pad(x, (1, 2)),
               lambda x: x.masked_fill(x > 0, 0.0), lambda x: torch.where(x > 0, x, x * 0.1),
               lambda x: x.expand(2, 3, 4).sum(0), lambda x: F.normalize(x, dim=1),
               lambda x: F.interpolate(x[None, None], scale_factor=2, mode="bilinear")):
        check_fwd_bwd(fn, x.detach().clone().requires_grad_())


# --- recurrent layers ----------------------------------------------------------

# nn.LSTM/GRU on a PrivateUse1 device use the fused cell ops, as on CUDA
# (aten::_thnn_fused_lstm_cell / _thnn_fused_gru_cell), which have no CPU
# kernel for the fallback to run: the npu needs its own.
RNN_CASES = {
    "rnn_tanh": (lambda: torch.nn.RNN(8, 16, batch_first=True), (2, 5, 8)),
    "lstm": (lambda: torch.nn.LSTM(8, 16, num_layers=2, batch_first=True), (2, 5, 8)),
    "gru": (lambda: torch.nn.GRU(8, 16), (5, 2, 8)),
    "lstm_cell": (lambda: torch.nn.LSTMCell(8, 16), (2, 8)),
    "gru_cell": (lambda: torch.nn.GRUCell(8, 16), (2, 8)),
}


@pytest.mark.parametrize("make,shape", list(RNN_CASES.values()), ids=list(RNN_CASES))
def test_recurrent_layers(make, shape):
    torch.manual_seed(0)
    m_c = make()
    m_n = copy.deepcopy(m_c).npu()
    x = rnd(*shape, seed=50)
    out_c = m_c(x)
    out_n = m_n(x.detach().npu().requires_grad_())
    out_c = out_c[0] if isinstance(out_c, tuple) else out_c
    out_n = out_n[0] if isinstance(out_n, tuple) else out_n
    assert_close(out_n.cpu(), out_c, atol=1e-5, rtol=1e-4)
    out_c.sum().backward()
    out_n.sum().backward()
    for (name, pc), pn in zip(m_c.named_parameters(), m_n.parameters()):
        assert_close(pn.grad.cpu(), pc.grad, atol=1e-4, rtol=1e-4, msg=name)


def test_transformer_encoder_layer():
    torch.manual_seed(0)
    layer_c = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    layer_n = copy.deepcopy(layer_c).npu()
    x = rnd(2, 5, 16, grad=False, seed=51)
    out_c, out_n = layer_c(x), layer_n(x.npu())
    assert_close(out_n.cpu(), out_c, atol=1e-5, rtol=1e-4)
    out_c.sum().backward()
    out_n.sum().backward()
    for (name, pc), pn in zip(layer_c.named_parameters(), layer_n.parameters()):
        assert_close(pn.grad.cpu(), pc.grad, atol=1e-4, rtol=1e-4, msg=name)
    # Eval + no_grad takes PyTorch's fused fast path.
    layer_c.eval(), layer_n.eval()
    with torch.no_grad():
        assert_close(layer_n(x.npu()).cpu(), layer_c(x), atol=1e-5, rtol=1e-4)


def test_scaled_dot_product_attention():
    q, k, v = rnd(2, 4, 8, 16, seed=52), rnd(2, 4, 8, 16, seed=53), rnd(2, 4, 8, 16, seed=54)
    check_fwd_bwd(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v,
                  atol=1e-5, rtol=1e-4)


# --- optimizers ----------------------------------------------------------------

OPTIMIZERS = {
    "sgd": lambda p, fe: torch.optim.SGD(p, lr=0.1, foreach=fe),
    "sgd_momentum": lambda p, fe: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                  weight_decay=1e-2, foreach=fe),
    "adam": lambda p, fe: torch.optim.Adam(p, lr=1e-2, foreach=fe),
    "adam_amsgrad": lambda p, fe: torch.optim.Adam(p, lr=1e-2, amsgrad=True, foreach=fe),
    "adamw": lambda p, fe: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=fe),
    "rmsprop": lambda p, fe: torch.optim.RMSprop(p, lr=1e-2, foreach=fe),
}


def _train(model, make_opt, device, steps=4):
    opt = make_opt(model.parameters())
    g = torch.Generator().manual_seed(99)
    losses = []
    for _ in range(steps):
        x = torch.randn(16, 10, generator=g).to(device)
        y = torch.randint(0, 3, (16,), generator=g).to(device)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("foreach", [False, True], ids=["forloop", "foreach"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_matches_cpu(name, foreach):
    torch.manual_seed(0)
    model_c = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                  torch.nn.Linear(16, 3))
    model_n = copy.deepcopy(model_c).npu()
    make = lambda p: OPTIMIZERS[name](p, foreach)  # noqa: E731
    losses_c = _train(model_c, make, "cpu")
    losses_n = _train(model_n, make, "npu")
    assert_close(losses_n, losses_c, atol=1e-5, rtol=1e-5)
    for (pname, pc), pn in zip(model_c.named_parameters(), model_n.parameters()):
        assert pn.device.type == "npu"
        assert_close(pn.detach().cpu(), pc.detach(), atol=1e-5, rtol=1e-5, msg=pname)


def test_optimizer_state_on_npu():
    model = torch.nn.Linear(4, 2).npu()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randn(3, 4, device="npu")).sum().backward()
    opt.step()
    for state in opt.state.values():
        assert state["exp_avg"].device.type == "npu"
        assert state["exp_avg_sq"].device.type == "npu"


def test_foreach_ops_directly():
    xs = [rnd(3, grad=False, seed=i) for i in range(4)]
    ys = [rnd(3, grad=False, seed=10 + i) for i in range(4)]
    xn, yn = [x.npu() for x in xs], [y.npu() for y in ys]
    for a, b in zip(torch._foreach_add(xn, yn, alpha=2), torch._foreach_add(xs, ys, alpha=2)):
        assert_close(a.cpu(), b)
    torch._foreach_mul_(xn, 3.0)
    torch._foreach_mul_(xs, 3.0)
    for a, b in zip(xn, xs):
        assert_close(a.cpu(), b)
    for a, b in zip(torch._foreach_norm(xn), torch._foreach_norm(xs)):
        assert_close(a.cpu(), b)
