"""torch_npu.op_plugin.backward: each explicit backward operator against torch.autograd.grad
of the matching forward (float64 on cpu, and on npu), the dropout bit masks, the small
training helpers against plain loops, schemas, bad input, FakeTensor and torch.compile."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import DEVICES, rnd

OPS = torch.ops.npu
D = torch.float64


def grads(fn, inputs, grad_out):
    """torch.autograd.grad of fn(*inputs) for every input, against grad_out."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    return torch.autograd.grad(out, leaves, grad_out, allow_unused=True)


def to(dev, *ts):
    return [t.to(dev) if isinstance(t, torch.Tensor) else t for t in ts]


# --- schemas -------------------------------------------------------------------------

SCHEMAS = [
    "npu_gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor",
    "npu_silu_backward(Tensor grad_output, Tensor x0, Tensor x1) -> Tensor",
    "npu_dropout_backward(Tensor grad_output, Tensor mask, float p) -> Tensor",
    "npu_max_backward(Tensor grad, int dim, Tensor indices, SymInt[] sizes, bool keepdim) -> Tensor",
    "npu_ciou_backward(Tensor grad, Tensor bboxes, Tensor gtboxes, Tensor? atan_sub, bool trans=False, "
    "bool is_cross=True, int mode=0) -> (Tensor, Tensor)",
    "_npu_ciou(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=True, int mode=0, "
    "bool atan_sub_flag=False) -> (Tensor, Tensor)",
    "kl_div_backward(Tensor grad_output, Tensor self, Tensor target, int reduction=Mean, *, "
    "bool log_target=False) -> Tensor",
    "npu_confusion_transpose_backward(Tensor grad, int[] perm, SymInt[] shape, bool transpose_first) -> Tensor",
    "npu_bmm_v2_mat1_backward(Tensor grad, Tensor mat1, Tensor mat2, SymInt[] size) -> Tensor",
    "npu_layernorm_grad(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean, Tensor rstd, "
    "Tensor? weight, Tensor? bias) -> (Tensor, Tensor, Tensor)",
    "npu_dtype_cast_backward(Tensor grad, ScalarType dtype, int? grad_dtype=None, int? input_dtype=None) -> Tensor",
    "npu_conv_transpose2d_backward(Tensor input, Tensor grad_output, Tensor weight, int[] padding, "
    "int[] output_padding, int[] stride, int[] dilation, int groups, bool[3] output_mask) "
    "-> (Tensor, Tensor, Tensor)",
    "_conv_depthwise2d_backward(Tensor grad_output, Tensor self, Tensor weight, int[2] kernel_size, int[2] stride, "
    "int[2] padding, int[2] dilation, bool[2] output_mask) -> (Tensor grad_input, Tensor grad_weight)",
    "npu_dropout_gen_mask(int[] size, float p, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None) -> Tensor",
    "_npu_dropout_gen_mask.Tensor(Tensor self, int[] size, float p, int seed, int offset, *, bool? parallel=True, "
    "bool? sync=None) -> Tensor",
    "npu_attn_softmax_backward_(Tensor(a!) self, Tensor grad_output, Tensor values) -> Tensor(a!)",
    "npu_sim_exponential_(Tensor(a!) self, float lambd=1, *, Generator? generator=None) -> Tensor(a!)",
    "_amp_foreach_non_finite_check(Tensor[] scaled_grads) -> bool",
    "npu_gru_backward(Tensor? grady, Tensor? gradh, Tensor input, Tensor weight_input, Tensor weight_hidden, "
    "Tensor bias_input, Tensor bias_hidden, Tensor seq_length, Tensor hx, Tensor y_output, Tensor h_output, "
    "Tensor output_updata, Tensor output_reset, Tensor output_new, Tensor hidden_new) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    "stft_backward(Tensor grad_output, Tensor self, int n_fft, int? hop_length=None, int? win_length=None, "
    "Tensor? window=None, bool normalized=False, bool? onesided=None, bool? return_complex=None) -> Tensor",
    "_npu_index_add_(Tensor(a!) self, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor(a!)",
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_schema_is_op_plugins(schema):
    name = schema.split("(", 1)[0]
    packet, _, overload = name.partition(".")
    op = getattr(getattr(OPS, packet), overload or "default")
    assert str(op._schema) == str(torch._C.parse_schema("npu::" + schema))
    assert callable(getattr(torch_npu, packet))


# --- activations -----------------------------------------------------------------------

@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_silu_backward(dev, approximate):
    x, g = rnd(3, 5, seed=1, dtype=D), rnd(3, 5, seed=2, dtype=D)
    want = grads(lambda t: F.gelu(t, approximate=approximate), [x], g)[0]
    got = torch_npu.npu_gelu_backward(*to(dev, g, x), approximate=approximate)
    assert got.device.type == dev
    assert_close(got.cpu(), want)
    want = grads(F.silu, [x], g)[0]
    assert_close(torch_npu.npu_silu_backward(*to(dev, g, x, F.silu(x))).cpu(), want)


# --- dropout ---------------------------------------------------------------------------

def unpack(mask, n):
    bits = [(int(b) >> k) & 1 for b in mask.cpu().tolist() for k in range(8)]
    return torch.tensor(bits[:n], dtype=D)


@pytest.mark.parametrize("dev", DEVICES)
def test_gen_mask_layout_and_do_mask(dev):
    mask = torch_npu.npu_dropout_gen_mask([17, 19], 0.4, dtype=torch.float32, device=dev)
    assert mask.dtype == torch.uint8 and mask.device.type == dev
    assert mask.shape == (math.ceil(17 * 19 / 128) * 128 // 8,)
    assert int(mask[math.ceil(17 * 19 / 8):].sum()) == 0  # bytes past the elements are zero
    keep = unpack(mask, 17 * 19)
    assert 0.4 < float(keep.mean()) < 0.8
    # A mask with known bits: byte 0b00000101 keeps elements 0 and 2.
    known = torch.zeros(16, dtype=torch.uint8)
    known[0] = 5
    x = rnd(4, seed=3, dtype=D)
    out, mask_out = torch_npu.npu_dropout_do_mask(*to(dev, x, known), 0.5)
    assert_close(out.cpu(), torch.stack([x[0] * 2, x[1] * 0, x[2] * 2, x[3] * 0]))
    assert torch.equal(mask_out.cpu(), known)


@pytest.mark.parametrize("dev", DEVICES)
def test_npu_dropout_round_trip_and_backward(dev):
    x = rnd(6, 7, seed=4, dtype=D).to(dev).requires_grad_(True)
    out, mask = torch_npu._npu_dropout(x, 0.3)
    keep = unpack(mask, 42).view(6, 7)
    assert_close(out.detach().cpu(), x.detach().cpu() * keep / 0.7)
    g = rnd(6, 7, seed=5, dtype=D).to(dev)
    (auto,) = torch.autograd.grad(out, x, g)
    explicit = torch_npu.npu_dropout_backward(g, mask, 0.3)
    assert_close(explicit.cpu(), auto.cpu())
    assert_close(explicit.cpu(), g.cpu() * keep / 0.7)


def test_dropout_gen_mask_seeded():
    x = torch.zeros(17, 19)
    full = torch_npu._npu_dropout_gen_mask(x.npu(), [17, 19], 0.0, 1, 0, parallel=False).cpu()
    n_bytes = math.ceil(17 * 19 / 8)
    assert full.shape == (48,) and full[:n_bytes].eq(255).all() and full[n_bytes:].eq(0).all()
    a = torch_npu._npu_dropout_gen_mask(x, [17, 19], 0.7, 2, 100, parallel=True)
    b = torch_npu._npu_dropout_gen_mask(x, [17, 19], 0.7, 2, 100, parallel=False)
    c = torch_npu._npu_dropout_gen_mask(x, [17, 19], 0.7, 3, 100)
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("dev", DEVICES)
def test_byte_mask_dropout(dev):
    x = rnd(5, 8, seed=6, dtype=D).to(dev)
    out, mask = torch_npu._dropout_with_byte_mask(x, 0.25)
    assert mask.dtype == torch.uint8 and mask.shape == x.shape
    assert_close(out.cpu(), x.cpu() * mask.cpu().to(D) / 0.75)
    g = rnd(5, 8, seed=7, dtype=D).to(dev)
    assert_close(torch_npu._dropout_with_byte_mask_backward(g, mask, 0.25).cpu(), g.cpu() * mask.cpu().to(D) / 0.75)
    assert torch.equal(torch_npu.dropout_with_byte_mask(x, 0.25, False).cpu(), x.cpu())


@pytest.mark.parametrize("dev", DEVICES)
def test_dropout_with_add_softmax_backward(dev):
    x, x1 = rnd(2, 3, 4, seed=8, dtype=D), rnd(2, 3, 4, seed=9, dtype=D)
    mask = (rnd(2, 3, 4, seed=10, lo=0, hi=1) > 0.3).to(torch.uint8)
    g = rnd(2, 3, 4, seed=11, dtype=D)
    alpha, prob = 0.5, 0.2
    want = grads(lambda a, b: torch.softmax(a * alpha + b, -1) * mask.to(D) / (1 - prob), [x, x1], g)
    soft = torch.softmax(x * alpha + x1, -1)
    d_self, d_x1 = torch_npu.npu_dropout_with_add_softmax_backward(*to(dev, g, mask, soft), alpha, prob, -1)
    assert_close(d_self.cpu(), want[0])
    assert_close(d_x1.cpu(), want[1])


def test_dropout_bad_input():
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        torch_npu._npu_dropout(torch.ones(3), 1.5)
    with pytest.raises(RuntimeError, match="torch.uint8"):
        torch_npu.npu_dropout_backward(torch.ones(3), torch.ones(16), 0.5)
    with pytest.raises(RuntimeError, match="too few"):
        torch_npu.npu_dropout_do_mask(torch.ones(300), torch.zeros(16, dtype=torch.uint8), 0.5)
    with pytest.raises(RuntimeError, match="floating-point"):
        torch_npu.npu_dropout_backward(torch.ones(3, dtype=torch.int32), torch.zeros(16, dtype=torch.uint8), 0.5)


# --- reductions and indexing ----------------------------------------------------------------

@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_gather_backward(dev, keepdim):
    x = rnd(3, 4, 5, seed=12, dtype=D)
    for reduce, op in ((torch.max, torch_npu.npu_max_backward), (torch.min, torch_npu.npu_min_backward)):
        vals, idx = reduce(x, 1, keepdim=keepdim)
        g = rnd(*vals.shape, seed=13, dtype=D)
        want = grads(lambda t: reduce(t, 1, keepdim=keepdim)[0], [x], g)[0]
        got = op(*to(dev, g), 1, *to(dev, idx.int()), list(x.shape), keepdim)
        assert_close(got.cpu(), want)
    index = torch.tensor([[0, 2, 2], [1, 0, 3]])
    src = rnd(2, 4, seed=14, dtype=D)
    g = rnd(2, 3, seed=15, dtype=D)
    want = grads(lambda t: torch.gather(t, 1, index), [src], g)[0]
    assert_close(torch_npu.npu_gather_backward(*to(dev, g), [2, 4], 1, *to(dev, index), False).cpu(), want)


@pytest.mark.parametrize("dev", DEVICES)
def test_repeat_interleave_backward(dev):
    x = rnd(3, 4, seed=16, dtype=D)
    for dim in (None, 0, 1, -1):
        g = rnd(*torch.repeat_interleave(x, 3, dim=dim).shape, seed=17, dtype=D)
        want = grads(lambda t: torch.repeat_interleave(t, 3, dim=dim), [x], g)[0]
        assert_close(torch_npu.repeat_interleave_backward_int(*to(dev, g, x), 3, dim).cpu(), want)
    reps = torch.tensor([2, 0, 1, 3])
    g = rnd(3, 6, seed=18, dtype=D)
    want = grads(lambda t: torch.repeat_interleave(t, reps, dim=1), [x], g)[0]
    assert_close(torch_npu.repeat_interleave_backward_tensor(*to(dev, g, x, reps), 1).cpu(), want)
    flat_reps = torch.arange(12) % 3
    g = rnd(int(flat_reps.sum()), seed=19, dtype=D)
    want = grads(lambda t: torch.repeat_interleave(t, flat_reps), [x], g)[0]
    assert_close(torch_npu.repeat_interleave_backward_tensor(*to(dev, g, x, flat_reps)).cpu(), want)


@pytest.mark.parametrize("dev", DEVICES)
def test_index_add_and_masked_fill_range(dev):
    x, src = rnd(5, 3, seed=20, dtype=D), rnd(4, 3, seed=21, dtype=D)
    idx = torch.tensor([4, 0, 4, 2])
    want = x.clone()
    for r, i in enumerate(idx.tolist()):
        want[i] += 2.0 * src[r]
    assert_close(torch_npu._npu_index_add(*to(dev, x, idx, src), alpha=2.0).cpu(), want)
    y = x.clone().to(dev)
    assert torch_npu._npu_index_add_(y, *to(dev, idx, src), alpha=2.0) is y
    assert_close(y.cpu(), want)
    # npu_masked_fill_range against real torch_npu's test loop.
    base = rnd(4, 3, 9, seed=22)
    start = torch.tensor([[0, 2, 1], [5, 6, 7]], dtype=torch.int32)
    end = torch.tensor([[3, 4, 2], [6, 9, 8]], dtype=torch.int32)
    value = torch.tensor([7.0, -1.0])
    for axis in (0, 1, 2):
        want = base.clone()
        for i in range(2):
            for j in range(3):
                for k in range(int(start[i, j]), int(end[i, j])):
                    if k >= base.shape[axis]:
                        continue
                    if axis == 0:
                        want[k] = value[i]
                    elif axis == 1:
                        want[:, k] = value[i]
                    else:
                        want[j, :, k] = value[i]
        got = torch_npu.npu_masked_fill_range(*to(dev, base, start, end, value), axis)
        assert torch.equal(got.cpu(), want)


# --- losses -----------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:reduction")
@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_loss_backwards(dev, reduction):
    names = {0: "none", 1: "mean", 2: "sum"}
    x, t = rnd(3, 4, seed=23, dtype=D), rnd(3, 4, seed=24, dtype=D)
    g = rnd(3, 4, seed=25, dtype=D) if reduction == 0 else torch.tensor(0.7, dtype=D)
    red = names[reduction]
    want = grads(lambda a, b: F.l1_loss(a, b, reduction=red), [x, t], g)[0]
    assert_close(torch_npu.l1_loss_backward(*to(dev, g, x, t), reduction).cpu(), want)
    logp, target = F.log_softmax(x, -1), torch.softmax(t, -1)
    for log_target, tg in ((False, target), (True, target.log())):
        want = grads(lambda a, b: F.kl_div(a, b, reduction=red, log_target=log_target), [logp, tg], g)
        assert_close(torch_npu.kl_div_backward(*to(dev, g, logp, tg), reduction, log_target=log_target).cpu(),
                     want[0])
        assert_close(torch_npu.kl_div_target_backward(*to(dev, g, logp, tg), reduction,
                                                      log_target=log_target).cpu(), want[1])
    labels = rnd(3, 4, seed=26, lo=0, hi=1, dtype=D)
    w, pw = rnd(4, seed=27, lo=0.5, hi=2, dtype=D), rnd(4, seed=28, lo=0.5, hi=2, dtype=D)
    for weight, pos_weight in ((None, None), (w, pw)):
        want = grads(lambda a: F.binary_cross_entropy_with_logits(a, labels, weight, reduction=red,
                                                                  pos_weight=pos_weight), [x], g)[0]
        got = torch_npu.npu_binary_cross_entropy_with_logits_backward(*to(dev, g, x, labels, weight, pos_weight),
                                                                      reduction)
        assert_close(got.cpu(), want)


@pytest.mark.parametrize("dev", DEVICES)
def test_softmax_cross_entropy_backward(dev):
    x, labels, g = rnd(3, 5, seed=29, dtype=D), rnd(3, 5, seed=30, lo=0, hi=1, dtype=D), rnd(3, seed=31, dtype=D)
    want = grads(lambda a: -(labels * torch.log_softmax(a, 1)).sum(1), [x], g)[0]
    assert_close(torch_npu.npu_softmax_cross_entropy_with_logits_backward(*to(dev, g, x, labels)).cpu(), want)


# --- matmul and layout ---------------------------------------------------------------------------

@pytest.mark.parametrize("dev", DEVICES)
def test_linear_and_bmm_v2_backward(dev):
    x, w = rnd(2, 3, 4, seed=32, dtype=D), rnd(5, 4, seed=33, dtype=D)
    g = rnd(2, 3, 5, seed=34, dtype=D)
    want = grads(lambda a, b: a @ b.t(), [x, w], g)
    dx, dw = torch_npu.npu_linear_backward(*to(dev, g, x, w))
    assert_close(dx.cpu(), want[0])
    assert_close(dw.cpu(), want[1])
    cases = [((2, 3, 4), (4, 5)), ((1, 3, 4), (2, 4, 5)), ((4,), (2, 4, 5)), ((2, 3, 4), (4,)), ((3, 4), (2, 4, 5))]
    for s1, s2 in cases:
        a, b = rnd(*s1, seed=35, dtype=D), rnd(*s2, seed=36, dtype=D)
        g = rnd(*torch.matmul(a, b).shape, seed=37, dtype=D)
        want = grads(torch.matmul, [a, b], g)
        ga = torch_npu.npu_bmm_v2_mat1_backward(*to(dev, g, a, b), list(a.shape))
        gb = torch_npu.npu_bmm_v2_mat2_backward(*to(dev, g, a, b), list(b.shape))
        assert_close(ga.cpu(), want[0])
        assert_close(gb.cpu(), want[1])


def test_matmul_double_backward():
    a, b = rnd(2, 3, 4, seed=38, dtype=D), rnd(4, 5, seed=39, dtype=D)
    g = rnd(2, 3, 5, seed=40, dtype=D)
    gga, ggb = rnd(2, 3, 4, seed=41, dtype=D), rnd(4, 5, seed=42, dtype=D)
    leaves = [t.clone().requires_grad_(True) for t in (g, a, b)]
    ga, gb = torch.autograd.grad(torch.matmul(leaves[1], leaves[2]), leaves[1:], leaves[0], create_graph=True)
    want = torch.autograd.grad((ga, gb), leaves, (gga, ggb))
    got = torch_npu.matmul_double_backward(gga, ggb, g, a, b, [True, True, True])
    for w_, g_ in zip(want, got):
        assert_close(g_, w_)
    got = torch_npu.matmul_double_backward(gga, None, g, a, b, [True, False, True])
    assert got[1] is None


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("transpose_first", [True, False])
def test_confusion_transpose_backward(dev, transpose_first):
    if transpose_first:  # permute (2, 3, 4, 5) by perm, reshape to (2, 5, 12)
        x, perm, shape = rnd(2, 3, 4, 5, seed=43, dtype=D), [0, 3, 1, 2], [2, 5, 12]
    else:  # reshape (2, 5, 12) to (2, 5, 3, 4), permute
        x, perm, shape = rnd(2, 5, 12, seed=43, dtype=D), [0, 2, 1, 3], [2, 5, 3, 4]
    out = torch_npu.npu_confusion_transpose(x, perm, shape, transpose_first)
    g = rnd(*out.shape, seed=44, dtype=D)
    want = grads(lambda t: torch_npu.npu_confusion_transpose(t, perm, shape, transpose_first), [x], g)[0]
    got = torch_npu.npu_confusion_transpose_backward(*to(dev, g), perm, list(x.shape), not transpose_first)
    assert_close(got.cpu(), want)


# --- normalisation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dev", DEVICES)
def test_layernorm_grad_and_renorm(dev):
    x, w, b = rnd(3, 4, 6, seed=45, dtype=D), rnd(6, seed=46, dtype=D), rnd(6, seed=47, dtype=D)
    g = rnd(3, 4, 6, seed=48, dtype=D)
    want = grads(lambda a, c, d: F.layer_norm(a, [6], c, d, 1e-5), [x, w, b], g)
    mean = x.mean(-1)
    rstd = 1 / torch.sqrt(x.var(-1, unbiased=False) + 1e-5)
    got = torch_npu.npu_layernorm_grad(*to(dev, g, x), [6], *to(dev, mean, rstd, w, b))
    for w_, g_ in zip(want, got):
        assert_close(g_.cpu(), w_)
    x = rnd(4, 3, 5, seed=49, dtype=D)
    g = rnd(4, 3, 5, seed=50, dtype=D)
    for p in (1, 2, 3.5):
        want = grads(lambda t: torch.renorm(t, p, 1, 1.5), [x], g)[0]
        assert_close(torch_npu.npu_renorm_backward(*to(dev, g, x), p, 1, 1.5).cpu(), want)


@pytest.mark.parametrize("dev", DEVICES)
def test_sync_batch_norm_stats(dev):
    xs = [rnd(2, 3, 4, seed=51 + r, dtype=D) for r in range(3)]
    stats = [torch_npu.batch_norm_reduce(x.to(dev), 1e-5) for x in xs]
    for x, (s, sq) in zip(xs, stats):
        assert s.dtype == torch.float32
        assert_close(s.cpu().double(), x.sum((0, 2)), atol=1e-5, rtol=1e-5)
        assert_close(sq.cpu().double(), (x * x).sum((0, 2)), atol=1e-5, rtol=1e-5)
    sums = torch.stack([s for s, _ in stats])
    squares = torch.stack([q for _, q in stats])
    counts = torch.full((3,), 8.0, device=dev)
    rm, rv = torch.zeros(3, device=dev), torch.ones(3, device=dev)
    mean, invstd = torch_npu.batch_norm_gather_stats_update(xs[0].float().to(dev), sums, squares, rm, rv, 0.1,
                                                            1e-5, counts)
    all_x = torch.cat(xs, 0).transpose(0, 1).reshape(3, -1)
    assert_close(mean.cpu().double(), all_x.mean(1), atol=1e-5, rtol=1e-5)
    assert_close(invstd.cpu().double(), 1 / torch.sqrt(all_x.var(1, unbiased=False) + 1e-5), atol=1e-4, rtol=1e-4)
    assert_close(rm.cpu().double(), 0.1 * all_x.mean(1), atol=1e-5, rtol=1e-5)
    assert_close(rv.cpu().double(), 0.9 + 0.1 * all_x.var(1, unbiased=True), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("normalize_type", [0, 1])
def test_normalize_batch(normalize_type):
    x, seq = rnd(3, 2, 6, seed=54, dtype=D), torch.tensor([4, 6, 2], dtype=torch.int32)
    want = torch.empty_like(x)
    for i in range(3):
        part = x[i, :, :int(seq[i])]
        if normalize_type == 0:
            want[i] = (x[i] - part.mean(1, keepdim=True)) / (part.std(1, keepdim=True) + 1e-5)
        else:
            want[i] = (x[i] - part.mean()) / (part.std() + 1e-5)
    assert_close(torch_npu.npu_normalize_batch(x.npu(), seq.npu(), normalize_type).cpu(), want)


# --- softmax and attention ------------------------------------------------------------------------------

@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("fixed", [False, True])
def test_scaled_masked_softmax_backward(dev, fixed):
    x, g = rnd(2, 2, 4, 4, seed=55), rnd(2, 2, 4, 4, seed=56)
    mask = rnd(2, 1, 4, 4, seed=57, lo=0, hi=1) > 0.6
    masked = torch.ones(4, 4, dtype=torch.bool).triu(1) if fixed else mask
    want = grads(lambda t: torch.softmax((t.double() * 0.5).masked_fill(masked, -10000.0), -1), [x], g.double())[0]
    y = torch_npu.npu_scaled_masked_softmax(x, mask, 0.5, fixed)
    got = torch_npu.npu_scaled_masked_softmax_backward(*to(dev, g, y, mask), 0.5, fixed)
    assert got.dtype == torch.float32
    assert_close(got.cpu().double(), want.double(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dev", DEVICES)
def test_attn_softmax_in_place(dev):
    logits, go, v = rnd(2, 3, 4, seed=58, dtype=D), rnd(2, 3, 5, seed=59, dtype=D), rnd(2, 4, 5, seed=60, dtype=D)
    want = grads(lambda t: torch.softmax(t, -1) @ v, [logits], go)[0]
    buf = logits.clone().to(dev)
    assert torch_npu.npu_attn_softmax_(buf) is buf
    assert_close(buf.cpu(), torch.softmax(logits, -1))
    torch_npu.npu_attn_softmax_backward_(buf, *to(dev, go, v))
    assert_close(buf.cpu(), want)


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("keep_prob", [1.0, 0.7])
def test_fused_attention_score_backward(dev, keep_prob):
    b, n, s, d = 2, 2, 3, 4
    q, k, v = (rnd(b, n, s, d, seed=61 + i, dtype=D) for i in range(3))
    mask_add = rnd(b, 1, s, s, seed=64, dtype=D)
    keep = (rnd(b, n, s, s, seed=65, lo=0, hi=1) < keep_prob).to(torch.uint8)

    def forward(q_, k_, v_):
        probs = torch.softmax(q_ @ k_.transpose(-1, -2) * 0.3 + mask_add, -1)
        if keep_prob < 1:
            probs = probs * keep.to(D) / keep_prob
        return (probs @ v_).permute(0, 2, 1, 3).reshape(b * s, n * d)

    g = rnd(b * s, n * d, seed=66, dtype=D)
    want = grads(forward, [q, k, v], g)
    probs = torch.softmax(q @ k.transpose(-1, -2) * 0.3 + mask_add, -1)
    got = torch_npu.npu_fused_attention_score_backward(*to(dev, g, probs, q, k, v, keep.reshape(-1)), 0.3, keep_prob)
    for w_, g_ in zip(want, got):
        assert_close(g_.cpu(), w_)
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        torch_npu.npu_fused_attention_score_backward(g, probs, q, k, v, keep, 0.3, keep_prob, dx_transpose=True)


# --- casts ------------------------------------------------------------------------------------------

def test_dtype_cast_backward():
    g = rnd(3, 4, seed=67, dtype=torch.float16).npu()
    out = torch_npu.npu_dtype_cast_backward(g, torch.float32)
    assert out.dtype == torch.float32 and torch.equal(out.cpu(), g.cpu().float())
    assert torch_npu._npu_dtype_cast_backward(g, torch.bfloat16).dtype == torch.bfloat16
    assert torch_npu.npu_dtype_cast_backward(g, torch.float32, torch_npu.float16, None).dtype == torch.float32
    codes = torch_npu.npu_dtype_cast(g, torch_npu.hifloat8)  # a HiFloat8 gradient, read as grad_dtype says
    out = torch_npu.npu_dtype_cast_backward(codes, torch.float32, torch_npu.hifloat8)
    assert torch.equal(out.cpu(), torch_npu._hifloat8.decode(codes.cpu()))
    with pytest.raises(RuntimeError, match="int4 is not supported on vNPU"):
        torch_npu.npu_dtype_cast_backward(g, torch.float32, torch_npu.int4)


# --- convolutions -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dev", DEVICES)
def test_conv_backwards(dev):
    x, w, bias = rnd(2, 4, 7, 6, seed=68, dtype=D), rnd(6, 2, 3, 3, seed=69, dtype=D), rnd(6, seed=70, dtype=D)

    def conv(a, c, d):
        return F.conv2d(a, c, d, (2, 1), (1, 0), (1, 2), 2)

    g = rnd(*conv(x, w, bias).shape, seed=71, dtype=D)
    want = grads(conv, [x, w, bias], g)
    for op in (torch_npu.npu_conv2d_backward, torch_npu.npu_convolution_backward):
        got = op(*to(dev, x, g, w), [2, 1], [1, 0], [1, 2], 2, [True, True, True])
        for w_, g_ in zip(want, got):
            assert_close(g_.cpu(), w_)
    got = torch_npu.npu_conv2d_backward(*to(dev, x, g, w), [2, 1], [1, 0], [1, 2], 2, [True, False, False])
    assert got[1] is None and got[2] is None
    # transposed: weight (in, out / groups, kh, kw)
    wt, bt = rnd(4, 3, 3, 2, seed=72, dtype=D), rnd(6, seed=73, dtype=D)

    def tconv(a, c, d):
        return F.conv_transpose2d(a, c, d, (2, 2), (1, 0), (1, 0), 2, (1, 1))

    g = rnd(*tconv(x, wt, bt).shape, seed=74, dtype=D)
    want = grads(tconv, [x, wt, bt], g)
    for op in (torch_npu.npu_conv_transpose2d_backward, torch_npu.npu_convolution_transpose_backward):
        got = op(*to(dev, x, g, wt), [1, 0], [1, 0], [2, 2], [1, 1], 2, [True, True, True])
        for w_, g_ in zip(want, got):
            assert_close(g_.cpu(), w_)
    # 3-D, depthwise, dilated, slow transposed
    x3, w3 = rnd(1, 2, 4, 4, 4, seed=75, dtype=D), rnd(3, 2, 2, 2, 2, seed=76, dtype=D)
    g3 = rnd(*F.conv3d(x3, w3).shape, seed=77, dtype=D)
    want = grads(lambda a, c: F.conv3d(a, c), [x3, w3], g3)
    got = torch_npu.npu_conv3d_backward(*to(dev, x3, g3, w3), [1], [0], [1], 1, [True, True, True])
    assert_close(got[0].cpu(), want[0])
    assert_close(got[1].cpu(), want[1])
    wt3 = rnd(2, 3, 2, 2, 2, seed=78, dtype=D)
    g3 = rnd(*F.conv_transpose3d(x3, wt3, stride=2).shape, seed=79, dtype=D)
    want = grads(lambda a, c: F.conv_transpose3d(a, c, stride=2), [x3, wt3], g3)
    got = torch_npu.npu_conv_transpose3d_backward(*to(dev, x3, g3, wt3), [0], [0], [2], [1], 1, [True, True, False])
    assert_close(got[0].cpu(), want[0])
    assert_close(got[1].cpu(), want[1])
    wd = rnd(4, 1, 3, 3, seed=80, dtype=D)
    g = rnd(*F.conv2d(x, wd, None, 1, 1, 1, 4).shape, seed=81, dtype=D)
    want = grads(lambda a, c: F.conv2d(a, c, None, 1, 1, 1, 4), [x, wd], g)
    got = torch_npu._conv_depthwise2d_backward(*to(dev, g, x, wd), [3, 3], [1, 1], [1, 1], [1, 1], [True, True])
    assert len(got) == 2
    assert_close(got[0].cpu(), want[0])
    assert_close(got[1].cpu(), want[1])
    wf = rnd(5, 4, 3, 3, seed=82, dtype=D)
    g = rnd(*F.conv2d(x, wf, None, 1, 2, 2).shape, seed=83, dtype=D)
    want = grads(lambda a, c: F.conv2d(a, c, None, 1, 2, 2), [x, wf], g)
    got = torch_npu.slow_conv_dilated2d_backward(*to(dev, g, x, wf), [3, 3], [1, 1], [2, 2], [2, 2],
                                                 [True, True, True])
    assert_close(got[0].cpu(), want[0])
    assert_close(got[1].cpu(), want[1])
    assert_close(got[2].cpu(), g.sum((0, 2, 3)))
    wt = rnd(4, 5, 3, 3, seed=84, dtype=D)
    g = rnd(*F.conv_transpose2d(x, wt, None, 2, 1, 1).shape, seed=85, dtype=D)
    want = grads(lambda a, c: F.conv_transpose2d(a, c, None, 2, 1, 1), [x, wt], g)
    got = torch_npu.slow_conv_transpose2d_backward(*to(dev, g, x, wt), [3, 3], [2, 2], [1, 1], [1, 1], [1, 1],
                                                   [True, True, False])
    assert_close(got[0].cpu(), want[0])
    assert_close(got[1].cpu(), want[1])


def test_conv_backward_bad_input():
    x, w = torch.ones(1, 2, 5, 5), torch.ones(3, 2, 3, 3)
    g = torch.ones(1, 3, 3, 3)
    with pytest.raises(RuntimeError, match="spatial dimensions"):
        torch_npu.npu_conv3d_backward(x, g, w, [1], [0], [1], 1, [True, True, True])
    with pytest.raises(RuntimeError, match="kernel_size"):
        torch_npu.slow_conv_dilated2d_backward(g, x, w, [2, 2], [1, 1], [0, 0], [1, 1], [True, True, True])
    with pytest.raises(RuntimeError, match="stride should have 2 entries"):
        torch_npu.npu_conv2d_backward(x, g, w, [1, 1, 1], [0], [1], 1, [True, True, True])


# --- boxes -------------------------------------------------------------------------------------------

def boxes(n, seed):
    xy = rnd(2, n, seed=seed, lo=0, hi=5, dtype=D)
    wh = rnd(2, n, seed=seed + 1, lo=1, hi=4, dtype=D)
    return torch.cat((xy, xy + wh))


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("is_cross", [False, True])
def test_iou_family_backward(dev, is_cross):
    b1, b2 = boxes(3, 86), boxes(3, 88)
    for fwd, bwd in ((torch_npu.npu_giou, torch_npu.npu_giou_backward),
                     (torch_npu.npu_diou, torch_npu.npu_diou_backward),
                     (torch_npu.npu_ciou, torch_npu.npu_ciou_backward)):
        out = fwd(b1, b2, False, is_cross, 0)
        g = rnd(*out.shape, seed=90, dtype=D)
        want = grads(lambda a, c: fwd(a, c, False, is_cross, 0), [b1, b2], g)
        if bwd is torch_npu.npu_ciou_backward:
            got = bwd(*to(dev, g, b1, b2), None, False, is_cross, 0)
        else:
            got = bwd(*to(dev, g, b1, b2), False, is_cross, 0)
        assert_close(got[0].cpu(), want[0])
        assert_close(got[1].cpu(), want[1])
    overlap, atan_sub = torch_npu._npu_ciou(*to(dev, b1, b2), False, True, 0, True)
    assert overlap.shape == atan_sub.shape == (3, 3)
    assert_close(overlap.cpu(), torch_npu.npu_ciou(b1, b2, False, True, 0))
    w1, h1 = b1[2] - b1[0], b1[3] - b1[1]
    w2, h2 = b2[2] - b2[0], b2[3] - b2[1]
    assert_close(atan_sub.cpu(), torch.atan(w2 / h2)[:, None] - torch.atan(w1 / h1)[None, :])


@pytest.mark.parametrize("dev", DEVICES)
def test_roi_backwards(dev):
    x = rnd(2, 8, 6, 6, seed=91, dtype=D)
    rois = torch.tensor([[[0.0, 0.0], [0.5, 0.0], [0.5, 1.0], [4.0, 5.0], [5.0, 3.0]]], dtype=D)
    out = torch_npu.npu_ps_roi_pooling(x[:1], rois, 1.0, 2, 2)
    g = rnd(*out.shape, seed=92, dtype=D)
    want = grads(lambda t: torch_npu.npu_ps_roi_pooling(t, rois, 1.0, 2, 2), [x[:1]], g)[0]
    got = torch_npu.npu_ps_roi_pooling_backward(*to(dev, g, rois), 1.0, 2, 2, [6, 6])
    assert got.shape == (1, 8, 6, 6)
    assert_close(got.cpu(), want)
    rois5 = torch.tensor([[0, 0.5, 0.5, 4.0, 3.5], [1, 1.0, 0.0, 5.0, 5.0]], dtype=D)
    for mode in (0, 1):
        out = torch_npu.npu_roi_align(x, rois5, 1.0, 2, 3, 2, mode)
        g = rnd(*out.shape, seed=93, dtype=D)
        want = grads(lambda t: torch_npu.npu_roi_align(t, rois5, 1.0, 2, 3, 2, mode), [x], g)[0]
        got = torch_npu.npu_roi_alignbk(*to(dev, g, rois5), list(x.shape), 3, 2, 1.0, 2, mode)
        assert_close(got.cpu(), want)


# --- recurrent ---------------------------------------------------------------------------------------------

def last_step_only(shape, seed):
    g = torch.zeros(shape, dtype=D)
    g[-1] = rnd(*shape[1:], seed=seed, dtype=D)
    return g


@pytest.mark.parametrize("dev", DEVICES)
def test_lstm_backward(dev):
    t, b, i_size, h = 3, 2, 4, 3
    x, w, bias = rnd(t, b, i_size, seed=94, dtype=D), rnd(i_size + h, 4 * h, seed=95, dtype=D), rnd(4 * h, seed=96,
                                                                                                    dtype=D)
    h0, c0 = rnd(1, b, h, seed=97, dtype=D), rnd(1, b, h, seed=98, dtype=D)
    mask = torch.zeros(0, dtype=D)

    def fwd(*a):
        return torch_npu.npu_lstm(a[0], a[1], a[2], mask, a[3], a[4], True, 1, 0.0, True, False, False, False, False)

    outs = fwd(x, w, bias, h0, c0)
    gy, gh, gc = rnd(t, b, h, seed=99, dtype=D), last_step_only((t, b, h), 100), last_step_only((t, b, h), 101)
    want = grads(lambda *a: fwd(*a)[:3], [x, w, bias, h0, c0], (gy, gh, gc))
    got = torch_npu.npu_lstm_backward(*to(dev, gy, gh, gc, x, w, bias, h0, c0, *outs))
    for w_, g_ in zip(want, got):
        assert_close(g_.cpu(), w_)
    # one cell, with its two biases
    wi, wh = rnd(i_size, 4 * h, seed=102, dtype=D), rnd(h, 4 * h, seed=103, dtype=D)
    bi, bh = rnd(4 * h, seed=104, dtype=D), rnd(4 * h, seed=105, dtype=D)
    xc, hc, cc = x[0], h0[0], c0[0]
    outs = torch_npu.npu_lstm_cell(xc, wi, wh, hc, cc, bi, bh)
    gy, gh, gc = (rnd(b, h, seed=106 + s, dtype=D) for s in range(3))
    want = grads(lambda *a: torch_npu.npu_lstm_cell(a[0], a[1], a[2], a[5], a[6], a[3], a[4])[:3],
                 [xc, wi, wh, bi, bh, hc, cc], (gy, gh, gc))
    got = torch_npu.npu_lstm_cell_backward(*to(dev, gy, gh, gc, xc, wi, wh, hc, cc, *outs))
    for w_, g_ in zip(want, got):
        assert_close(g_.cpu(), w_)


@pytest.mark.parametrize("dev", DEVICES)
def test_gru_backward(dev):
    t, b, i_size, h = 3, 2, 4, 3
    x, hx = rnd(t, b, i_size, seed=110, dtype=D), rnd(1, b, h, seed=111, dtype=D)
    wi, wh = rnd(i_size, 3 * h, seed=112, dtype=D), rnd(h, 3 * h, seed=113, dtype=D)
    bi, bh = rnd(3 * h, seed=114, dtype=D), rnd(3 * h, seed=115, dtype=D)
    seq = torch.full((b,), t, dtype=torch.int32)

    def fwd(x_, hx_, wi_, wh_, bi_, bh_):
        return torch_npu.npu_gru(x_, hx_, wi_, wh_, bi_, bh_, seq, True, 1, 0.0, True, False, False)

    outs = fwd(x, hx, wi, wh, bi, bh)
    gy, gh = rnd(t, b, h, seed=116, dtype=D), last_step_only((t, b, h), 117)
    want = grads(lambda *a: fwd(*a)[:2], [x, hx, wi, wh, bi, bh], (gy, gh))
    got = torch_npu.npu_gru_backward(*to(dev, gy, gh, x, wi, wh, bi, bh, seq, hx, *outs))
    order = [2, 3, 0, 4, 5, 1]  # (d wi, d wh, d x, d bi, d bh, d hx)
    for g_, k in zip(got, order):
        assert_close(g_.cpu(), want[k])


# --- FFT -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("n", [6, 7])
def test_fft_backwards(dev, n):
    x = rnd(3, n, seed=118, dtype=D)
    for onesided in (True, False):
        out = torch.ops.aten._fft_r2c(x, [0, 1], 2, onesided)
        g = torch.complex(rnd(*out.shape, seed=119, dtype=D), rnd(*out.shape, seed=120, dtype=D))
        want = grads(lambda t: torch.ops.aten._fft_r2c(t, [0, 1], 2, onesided), [x], g)[0]
        assert_close(torch_npu.fft_r2c_backward(*to(dev, g), [0, 1], 2, onesided, n).cpu(), want)
    half = n // 2 + 1
    z = torch.complex(rnd(3, half, seed=121, dtype=D), rnd(3, half, seed=122, dtype=D))
    g = rnd(3, n, seed=123, dtype=D)
    want = grads(lambda t: torch.ops.aten._fft_c2r(t, [1], 1, n), [z], g)[0]
    assert_close(torch_npu.fft_c2r_backward(*to(dev, g), [1], 1).cpu(), want)


def test_stft_backward():
    x, win = rnd(2, 32, seed=124, dtype=D), torch.hann_window(8, dtype=D)
    out = torch.stft(x, 8, 4, 8, win, return_complex=True)
    g = torch.complex(rnd(*out.shape, seed=125, dtype=D), rnd(*out.shape, seed=126, dtype=D))
    want = grads(lambda t: torch.stft(t, 8, 4, 8, win, return_complex=True), [x], g)[0]
    assert_close(torch_npu.stft_backward(g, x, 8, 4, 8, win, False, None, True), want)
    got = torch_npu.stft_backward(torch.view_as_real(g), x, 8, 4, 8, win, False, None, False)
    assert_close(got, want)


# --- misc ----------------------------------------------------------------------------------------------

def test_sim_exponential_and_non_finite_check():
    x = torch.zeros(4000).npu()
    gen = torch.Generator().manual_seed(0)
    cpu = torch.zeros(4000)
    assert torch_npu.npu_sim_exponential_(cpu, 2.0, generator=gen) is cpu
    assert float(cpu.min()) >= 0 and abs(float(cpu.mean()) - 0.5) < 0.05
    assert torch_npu.npu_sim_exponential_(x, 2.0) is x and float(x.cpu().min()) >= 0
    with pytest.raises(RuntimeError, match="lambd > 0"):
        torch_npu.npu_sim_exponential_(x, 0.0)
    ok = [torch.ones(3).npu(), torch.zeros(2, 2).npu()]
    assert torch_npu._amp_foreach_non_finite_check(ok) is False
    assert torch_npu._amp_foreach_non_finite_check(ok + [torch.tensor([1.0, float("nan")]).npu()]) is True
    assert torch_npu._amp_foreach_non_finite_check([torch.tensor([float("-inf")])]) is True


def test_bad_input():
    with pytest.raises(RuntimeError, match="approximate"):
        torch_npu.npu_gelu_backward(torch.ones(2), torch.ones(2), approximate="fast")
    with pytest.raises(RuntimeError, match="reduction"):
        torch_npu.l1_loss_backward(torch.ones(()), torch.ones(2), torch.ones(2), 3)
    with pytest.raises(RuntimeError, match="permutation"):
        torch_npu.npu_confusion_transpose_backward(torch.ones(2, 3), [0, 0], [3, 2], True)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch_npu.npu_bmm_v2_mat1_backward(torch.ones(2, 2), torch.ones(2, 3), torch.ones(4, 2), [2, 3])
    with pytest.raises(RuntimeError, match="indices should be int32 or int64"):
        torch_npu.npu_max_backward(torch.ones(2), 0, torch.ones(2), [3, 2], False)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        torch_npu.npu_layernorm_grad(torch.ones(2, 3), torch.ones(2, 3), [4], torch.ones(2), torch.ones(2), None,
                                     None)
    with pytest.raises(RuntimeError, match="normalize_type"):
        torch_npu.npu_normalize_batch(torch.ones(2, 3, 4), torch.ones(2, dtype=torch.int32), 2)
    with pytest.raises(RuntimeError, match="value dtype"):
        torch_npu.npu_masked_fill_range(torch.ones(2, 3), torch.zeros(1, 2, dtype=torch.int32),
                                        torch.ones(1, 2, dtype=torch.int32), torch.ones(1, dtype=torch.int32), 1)
    with pytest.raises(RuntimeError, match="output_grad should have shape"):
        torch_npu.npu_ps_roi_pooling_backward(torch.ones(1, 2, 2, 2), torch.ones(1, 5, 2), 1.0, 2, 2, [4, 4])


# --- tracing -----------------------------------------------------------------------------------------------

def test_fake_tensor_shapes():
    with FakeTensorMode():
        g, x = torch.empty(4, 6), torch.empty(4, 6)
        assert torch_npu.npu_gelu_backward(g, x).shape == (4, 6)
        mask = torch_npu.npu_dropout_gen_mask([4, 6], 0.1, device="cpu")
        assert mask.shape == (16,) and mask.dtype == torch.uint8
        assert torch_npu.npu_dropout_backward(g, mask, 0.1).shape == (4, 6)
        dx, dw, db = torch_npu.npu_conv2d_backward(torch.empty(1, 2, 5, 5), torch.empty(1, 3, 3, 3),
                                                   torch.empty(3, 2, 3, 3), [1, 1], [0, 0], [1, 1], 1,
                                                   [True, True, True])
        assert dx.shape == (1, 2, 5, 5) and dw.shape == (3, 2, 3, 3) and db.shape == (3,)
        d1, d2 = torch_npu.npu_giou_backward(torch.empty(3, 1), torch.empty(4, 3), torch.empty(4, 3))
        assert d1.shape == d2.shape == (4, 3)


def test_torch_compile():
    def f(g, a, b):
        da = torch_npu.npu_bmm_v2_mat1_backward(g, a, b, list(a.shape))
        return da, torch_npu.npu_silu_backward(g, g, g)

    a, b = rnd(2, 3, 4, seed=127), rnd(4, 3, seed=128)
    g = rnd(2, 3, 3, seed=129)
    got = torch.compile(f, backend="eager", fullgraph=True)(g, a, b)
    want = f(g, a, b)
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("dropout_prob", [0.0, 0.25])
def test_multi_head_attention_backward(dev, dropout_prob):
    b, t, s, heads, d = 2, 3, 4, 2, 3
    e = heads * d
    query, key, value = rnd(b * t, e, seed=130, dtype=D), rnd(b * s, e, seed=131, dtype=D), rnd(b * s, e, seed=132,
                                                                                                 dtype=D)
    ws = [rnd(e, e, seed=133 + i, dtype=D) for i in range(4)]
    bs = [rnd(e, seed=137 + i, dtype=D) for i in range(4)]
    mask_add = rnd(b, 1, t, s, seed=141, dtype=D)
    keep = (rnd(b, heads, t, s, seed=142, lo=0, hi=1) >= dropout_prob).to(torch.uint8)

    def fwd(wq, wk, wv, wo, q_, k_, v_, bq, bk, bv, bo):
        return torch_npu.npu_multi_head_attention(q_, k_, v_, wq, wk, wv, mask_add, wo, bq, bk, bv, bo, keep, heads,
                                                  d, s, t, dropout_prob, False)

    inputs = [*ws[:3], ws[3], query, key, value, *bs]
    outs = fwd(*inputs)
    g = rnd(b * t, e, seed=143, dtype=D)
    want = grads(lambda *a: fwd(*a)[0], inputs, g)
    got = torch_npu.npu_multi_head_attention_backward(
        *to(dev, query, key, value, ws[0], ws[1], ws[2], ws[3], bs[0], bs[1], bs[2], bs[3], outs[2], outs[3],
            outs[4], outs[5], outs[6], outs[7], g, outs[1]), heads, d, s, t, dropout_prob, False)
    assert len(got) == 11
    for w_, g_ in zip(want, got):
        assert_close(g_.cpu(), w_)
