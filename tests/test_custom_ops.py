"""torch_npu's custom operators (tensor_ops, boxes, dense and the activations):
each on npu against a plain-PyTorch formula on cpu, gradients where the real
operator has a backward, and the argument checks."""

import math

import pytest
import torch
import torch.nn.functional as F
import torch_npu
from torch.testing import assert_close


def rnd(*shape, seed=0, lo=None, hi=None):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    if lo is not None:
        t = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * (hi - lo) + lo
    return t


def npu(t):
    return t.to("npu")


def boxes(n, seed, size=10.0):
    xy = rnd(n, 2, seed=seed, lo=0, hi=size)
    wh = rnd(n, 2, seed=seed + 100, lo=1, hi=size)
    return torch.cat([xy, xy + wh], 1)


# --- layout and indexing -----------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.uint8, torch.int64])
def test_slice_and_indexing(dtype):
    x = torch.arange(60).reshape(3, 4, 5).to(dtype)
    got = torch_npu.npu_slice(npu(x), [1, 0, 2], [2, 3, 3])
    assert_close(got.cpu(), x[1:3, 0:3, 2:5])
    got = torch_npu.npu_indexing(npu(x), [0, 1, 0], [3, 4, 5], [2, 1, 2])
    assert_close(got.cpu(), x[0:3:2, 1:4, 0:5:2])
    # begin_mask / end_mask ignore the bounds, shrink_axis_mask selects one element.
    got = torch_npu.npu_indexing(npu(x), [2, 1, 7], [0, 3, 9], [1, 1, 1], begin_mask=0b100, end_mask=0b101,
                                 shrink_axis_mask=0b001)
    assert_close(got.cpu(), x[2, 1:3, :])


def test_slice_result_is_not_a_view():
    x = npu(torch.arange(6.0).reshape(2, 3))
    y = torch_npu.npu_slice(x, [0, 0], [2, 3])
    y.add_(1)
    assert_close(x.cpu(), torch.arange(6.0).reshape(2, 3))


def test_slice_and_indexing_bad_input():
    x = npu(torch.zeros(2, 3))
    with pytest.raises(RuntimeError, match="out of range for dimension 1"):
        torch_npu.npu_slice(x, [0, 2], [2, 2])
    with pytest.raises(RuntimeError, match="offsets has 1 entries"):
        torch_npu.npu_slice(x, [0], [2, 2])
    with pytest.raises(RuntimeError, match="ellipsis_mask and new_axis_mask are not supported on vNPU"):
        torch_npu.npu_indexing(x, [0, 0], [2, 3], [1, 1], ellipsis_mask=1)


def test_dtype_cast_and_its_gradient():
    x = rnd(3, 3).requires_grad_()
    xn = npu(x.detach()).requires_grad_()
    y = torch_npu.npu_dtype_cast(xn, torch.half)
    assert y.dtype == torch.half and "NpuDtypeCastBackward" in str(y.grad_fn)
    assert_close(y.cpu(), x.detach().half())
    (g,) = torch.autograd.grad(y, xn, torch.ones_like(y))
    assert g.grad_fn is None and g.dtype == torch.float32
    assert torch_npu._npu_dtype_cast(xn, torch.bfloat16).dtype == torch.bfloat16
    out = npu(torch.zeros(3, 3, dtype=torch.half))
    assert torch_npu.npu_dtype_cast_(out, xn.detach()) is out
    assert_close(out.cpu(), x.detach().half())


def test_broadcast_transpose_reshape():
    x = torch.tensor([[1], [2], [3]])
    assert_close(torch_npu.npu_broadcast(npu(x), [3, 3]).cpu(), x.expand(3, 3))
    y = rnd(5, 3, 6, 4, seed=1)
    got = torch_npu.npu_transpose(npu(y), [0, 3, 2, 1])
    assert got.is_contiguous()
    assert_close(got.cpu(), y.permute(0, 3, 2, 1))
    assert_close(torch_npu.npu_reshape(npu(y), [15, 24]).cpu(), y.reshape(15, 24))
    with pytest.raises(RuntimeError, match="is not a permutation"):
        torch_npu.npu_transpose(npu(y), [0, 1, 1, 2])


def test_stride_add_and_stride_copy():
    x1, x2 = rnd(2, 3, 2, 2, 16, seed=1), rnd(2, 2, 2, 2, 16, seed=2)
    got = torch_npu.npu_stride_add(npu(x1), npu(x2), 1, 0, 3)
    want = torch.zeros(2, 48, 2, 2, 16)
    want[:, :2] += x1[:, 1:]
    want[:, :2] += x2
    assert_close(got.cpu(), want)
    x = rnd(13, 23, seed=3)
    got = torch_npu.npu_stride_copy(npu(x), [10, 15], [1, 2], 1)
    assert_close(got.cpu(), x.reshape(-1).as_strided([10, 15], [1, 2], 1))


def test_sort_v2():
    x = rnd(3, 50, seed=4)
    assert_close(torch_npu.npu_sort_v2(npu(x), dim=-1, descending=True).cpu(), x.sort(-1, descending=True).values)
    assert_close(torch_npu.npu_sort_v2(npu(x), 0).cpu(), x.sort(0).values)


@pytest.mark.parametrize("depth", [3, 10])
def test_one_hot(depth):
    x = torch.randint(0, 5, (2, 3), generator=torch.Generator().manual_seed(0))
    got = torch_npu.npu_one_hot(npu(x), -1, depth, 2.5, -1)
    hot = F.one_hot(x, 10)[..., :depth].float()
    assert got.dtype == torch.float32
    assert_close(got.cpu(), hot * 2.5 + (1 - hot) * -1)


def test_scatter_writes_along_dim():
    x = torch.tensor([[1.6279, 0.1226], [0.9041, 1.0980]])
    got = torch_npu.npu_scatter(npu(x), npu(torch.tensor([0, 1], dtype=torch.int32)),
                                npu(torch.tensor([-1.1993, -1.5247])), 0)
    assert_close(got.cpu(), torch.tensor([[-1.1993, 0.1226], [0.9041, -1.5247]]))
    y = rnd(3, 4, 5, seed=5)
    idx = torch.randint(0, 5, (3, 4), generator=torch.Generator().manual_seed(1))
    upd = rnd(3, 4, seed=6)
    want = y.clone()
    for i in range(3):
        for j in range(4):
            want[i, j, idx[i, j]] = upd[i, j]
    assert_close(torch_npu.npu_scatter(npu(y), npu(idx), npu(upd), 2).cpu(), want)
    with pytest.raises(RuntimeError, match="the input without dimension 0"):
        torch_npu.npu_scatter(npu(y), npu(idx), npu(upd), 0)


@pytest.mark.parametrize("start,length", [(0, 1), (4, 8), (0, 16)])
def test_scatter_update(start, length):
    var = rnd(4, 8, 16, 64, seed=7)
    upd = rnd(4, 8, length, 64, seed=8)
    idx = torch.full((4,), start)
    want = var.clone()
    want[:, :, start:start + length] = upd
    vn = npu(var)
    assert_close(torch_npu.scatter_update(vn, npu(idx), npu(upd), -2).cpu(), want)
    assert_close(vn.cpu(), var)  # the out-of-place form leaves its input alone
    assert torch_npu.scatter_update_(vn, npu(idx), npu(upd), -2) is vn
    assert_close(vn.cpu(), want)


def test_one_and_pad():
    x = npu(rnd(2, 3))
    assert torch_npu.one_(x) is x and bool((x.cpu() == 1).all())
    y = rnd(2, 3, seed=9)
    assert_close(torch_npu.npu_pad(npu(y), [1, 2, 3, 4]).cpu(), F.pad(y, (3, 4, 1, 2)))
    with pytest.raises(RuntimeError, match="paddings should hold"):
        torch_npu.npu_pad(npu(y), [1, 2, 3])


def test_sign_bits_pack_unpack_round_trip():
    a = torch.tensor([5, 4, 3, 2, 0, -1, -2, 4, 3, 2, 1, 0, -1, -2], dtype=torch.float32)
    packed = torch_npu.npu_sign_bits_pack(npu(a), 2)
    assert packed.dtype == torch.uint8 and packed.cpu().tolist() == [[159], [15]]
    data = torch.randint(0, 256, (24,), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    for dtype in (torch.float16, torch.float32):
        got = torch_npu.npu_sign_bits_unpack(npu(data), 4, dtype)
        mask = 2 ** torch.arange(8, dtype=torch.uint8)
        want = ((data.unsqueeze(-1) & mask).ne(0).reshape(-1).to(dtype) - 0.5) * 2
        assert_close(got.cpu(), want.reshape(4, -1))
    signs = torch_npu.npu_sign_bits_unpack(torch_npu.npu_sign_bits_pack(npu(a[:8]), 1), 1, torch.float32)
    assert_close(signs.cpu().reshape(-1), torch.where(a[:8] >= 0, 1.0, -1.0))


@pytest.mark.parametrize("op,ref", [(torch_npu.npu_max, torch.max), (torch_npu.npu_min, torch.min)])
def test_max_min_dim_and_names(op, ref):
    x = rnd(2, 3, 4, 5, seed=10)
    for dim, keep in ((2, False), (3, True)):
        values, indices = op(npu(x), dim, keep)
        want = ref(x, dim, keep)
        assert indices.dtype == torch.int32
        assert_close(values.cpu(), want.values)
        assert_close(indices.cpu(), want.indices.int())
    named = npu(x)
    named.names = ("N", "C", "H", "W")
    values, indices = op(named, "H")
    assert_close(values.cpu(), ref(x, 2).values)
    xg, xr = npu(x).requires_grad_(), x.clone().requires_grad_()
    op(xg, 1)[0].sum().backward()
    ref(xr, 1).values.sum().backward()
    assert_close(xg.grad.cpu(), xr.grad)


def test_random_choice_with_mask():
    x = torch.zeros(4, 6, dtype=torch.bool)
    x[0, 1] = x[2, 3] = x[3, 5] = True
    coords, mask = torch_npu.npu_random_choice_with_mask(npu(x), 5, 7, 9)
    assert coords.dtype == torch.int32 and coords.shape == (5, 2) and mask.shape == (5,)
    assert mask.cpu().tolist() == [True, True, True, False, False]
    picked = {tuple(c) for c in coords.cpu()[:3].tolist()}
    assert picked == {(0, 1), (2, 3), (3, 5)}
    again, _ = torch_npu.npu_random_choice_with_mask(npu(x), 5, 7, 9)
    assert_close(again.cpu(), coords.cpu())  # fixed seeds: the same draw
    with pytest.raises(RuntimeError, match="should be bool"):
        torch_npu.npu_random_choice_with_mask(npu(x.float()))


# --- activations, losses, dense ----------------------------------------------------

def test_fast_gelu_and_backward():
    x = rnd(3, 16, 32, seed=11) * 4
    want = x * torch.sigmoid(1.702 * x)
    for fn in (torch_npu.fast_gelu, torch_npu.npu_fast_gelu):
        assert_close(fn(npu(x)).cpu(), want, atol=1e-5, rtol=1e-5)
    xr = x.clone().requires_grad_()
    g = rnd(*x.shape, seed=12)
    (want_dx,) = torch.autograd.grad(xr * torch.sigmoid(1.702 * xr), xr, g)
    assert_close(torch_npu.npu_fast_gelu_backward(npu(g), npu(x)).cpu(), want_dx, atol=1e-5, rtol=1e-5)
    xn = npu(x).requires_grad_()
    (dx,) = torch.autograd.grad(torch_npu.fast_gelu(xn), xn, npu(g))
    assert_close(dx.cpu(), want_dx, atol=1e-5, rtol=1e-4)


def test_mish_silu():
    x = rnd(5, 5, seed=13)
    assert_close(torch_npu.npu_mish(npu(x)).cpu(), x * torch.tanh(F.softplus(x)))
    xr = x.clone().requires_grad_()
    g = rnd(5, 5, seed=14)
    (want,) = torch.autograd.grad(F.mish(xr), xr, g)
    assert_close(torch_npu.npu_mish_backward(npu(g), npu(x)).cpu(), want, atol=1e-5, rtol=1e-5)
    assert_close(torch_npu.npu_silu(npu(x)).cpu(), x * torch.sigmoid(x))
    y = npu(x)
    assert torch_npu.npu_silu_(y) is y
    assert_close(y.cpu(), x * torch.sigmoid(x))


def test_softmax_cross_entropy_with_logits():
    logits, labels = rnd(64, 10, seed=15), torch.rand(64, 10, generator=torch.Generator().manual_seed(1))
    want = torch.sum(-labels * torch.log(torch.softmax(logits, 1)), 1)
    ln = npu(logits).requires_grad_()
    got = torch_npu.npu_softmax_cross_entropy_with_logits(ln, npu(labels))
    assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)
    got.sum().backward()
    lr = logits.clone().requires_grad_()
    torch.sum(-labels * F.log_softmax(lr, 1), 1).sum().backward()
    assert_close(ln.grad.cpu(), lr.grad, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="should be \\(N, C\\) of the same shape"):
        torch_npu.npu_softmax_cross_entropy_with_logits(ln, npu(labels[:, :5]))


def test_layer_norm_eval_linear_bmm():
    x, w, b = rnd(6, 4, seed=16), rnd(4, seed=17), rnd(4, seed=18)
    assert_close(torch_npu.npu_layer_norm_eval(npu(x), [4], npu(w), npu(b), 1e-5).cpu(),
                 torch.native_layer_norm(x, [4], w, b, 1e-5)[0], atol=1e-5, rtol=1e-5)
    wl, bl = rnd(3, 4, seed=19), rnd(3, seed=20)
    xn = npu(x).requires_grad_()
    out = torch_npu.npu_linear(xn, npu(wl), npu(bl))
    assert_close(out.cpu(), F.linear(x, wl, bl), atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert_close(xn.grad.cpu(), wl.sum(0).expand(6, 4), atol=1e-5, rtol=1e-5)
    a, m = rnd(10, 3, 4, seed=21), rnd(10, 4, 5, seed=22)
    assert_close(torch_npu.npu_bmmV2(npu(a), npu(m), []).cpu(), a @ m, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="does not match the product's shape"):
        torch_npu.npu_bmmV2(npu(a), npu(m), [10, 3, 6])


def test_convolutions():
    x, w, b = rnd(2, 4, 9, 9, seed=23), rnd(6, 4, 3, 3, seed=24), rnd(6, seed=25)
    want = F.conv2d(x, w, b, [1, 2], [1, 1], [1, 1], 1)
    for fn in (torch_npu.npu_conv2d, torch_npu.npu_convolution):
        assert_close(fn(npu(x), npu(w), npu(b), [1, 2], [1, 1], [1, 1], 1).cpu(), want, atol=1e-4, rtol=1e-4)
    x3, w3 = rnd(1, 2, 5, 5, 5, seed=26), rnd(3, 2, 3, 3, 3, seed=27)
    assert_close(torch_npu.npu_conv3d(npu(x3), npu(w3), None, [1, 1, 1], [0, 0, 0], [1, 1, 1], 1).cpu(),
                 F.conv3d(x3, w3), atol=1e-4, rtol=1e-4)
    wt = rnd(4, 2, 3, 3, seed=28)
    want = F.conv_transpose2d(x, wt, None, [2, 2], [1, 1], [1, 1], 1, [1, 1])
    for fn in (torch_npu.npu_conv_transpose2d, torch_npu.npu_convolution_transpose):
        assert_close(fn(npu(x), npu(wt), None, [1, 1], [1, 1], [2, 2], [1, 1], 1).cpu(), want,
                     atol=1e-4, rtol=1e-4)
    xn = npu(x).requires_grad_()
    torch_npu.npu_conv2d(xn, npu(w), None, [1, 1], [0, 0], [1, 1], 1).sum().backward()
    xr = x.clone().requires_grad_()
    F.conv2d(xr, w).sum().backward()
    assert_close(xn.grad.cpu(), xr.grad, atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="npu_conv2d: input should be NCHW"):
        torch_npu.npu_conv2d(npu(x3), npu(w3), None, [1, 1], [0, 0], [1, 1], 1)


# --- boxes -------------------------------------------------------------------------

def test_bounding_box_encode_decode_round_trip():
    anchors, gts = boxes(8, 1), boxes(8, 2)
    means, stds = [0.0, 0.0, 0.0, 0.0], [0.1, 0.1, 0.2, 0.2]
    deltas = torch_npu.npu_bounding_box_encode(npu(anchors), npu(gts), *means, *stds)
    pw, ph = anchors[:, 2] - anchors[:, 0] + 1, anchors[:, 3] - anchors[:, 1] + 1
    gw, gh = gts[:, 2] - gts[:, 0] + 1, gts[:, 3] - gts[:, 1] + 1
    dx = ((gts[:, 0] + gts[:, 2]) - (anchors[:, 0] + anchors[:, 2])) * 0.5 / pw
    assert_close(deltas.cpu()[:, 0], dx / 0.1, atol=1e-4, rtol=1e-4)
    assert_close(deltas.cpu()[:, 3], torch.log(gh / ph) / 0.2, atol=1e-4, rtol=1e-4)
    back = torch_npu.npu_bounding_box_decode(npu(anchors), deltas, *means, *stds, [100, 100], 16 / 1000)
    assert_close(back.cpu(), gts, atol=1e-3, rtol=1e-3)
    clipped = torch_npu.npu_bounding_box_decode(npu(anchors), deltas, *means, *stds, [4, 6], 16 / 1000)
    assert float(clipped[:, 0::2].max()) <= 5 and float(clipped[:, 1::2].max()) <= 3


@pytest.mark.parametrize("op", [torch_npu.npu_iou, torch_npu.npu_ptiou])
def test_iou_iof(op):
    b, g = boxes(5, 3), boxes(3, 4)
    lt = torch.max(b[None, :, :2], g[:, None, :2])
    rb = torch.min(b[None, :, 2:], g[:, None, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = lambda t: (t[:, 2] - t[:, 0]) * (t[:, 3] - t[:, 1])  # noqa: E731
    assert_close(op(npu(b), npu(g)).cpu(), inter / (area(g)[:, None] + area(b) - inter + 1e-7))
    assert_close(op(npu(b), npu(g), 1).cpu(), inter / (area(g)[:, None] + 1e-7))
    with pytest.raises(RuntimeError, match="should have shape \\(N, 4\\)"):
        op(npu(b[:, :3]), npu(g))


def _xywh_reference(p, g, kind):
    eps = 1e-10
    p1, p2 = p[:2] - p[2:] / 2, p[:2] + p[2:] / 2
    g1, g2 = g[:2] - g[2:] / 2, g[:2] + g[2:] / 2
    inter = (torch.min(p2, g2) - torch.max(p1, g1)).clamp(0).prod(0)
    union = p[2] * p[3] + g[2] * g[3] - inter + eps
    iou = inter / union
    c = torch.max(p2, g2) - torch.min(p1, g1)
    if kind == "giou":
        return iou - (c[0] * c[1] + eps - union) / (c[0] * c[1] + eps)
    rho2 = ((p[:2] - g[:2]) ** 2).sum(0)
    c2 = (c ** 2).sum(0) + eps
    if kind == "diou":
        return iou - rho2 / c2
    v = (4 / math.pi ** 2) * (torch.atan(g[2] / g[3]) - torch.atan(p[2] / p[3])) ** 2
    return iou - (rho2 / c2 + v * v / ((1 + eps) - iou + v))


@pytest.mark.parametrize("kind", ["giou", "diou", "ciou"])
def test_giou_diou_ciou_aligned_and_cross(kind):
    op = getattr(torch_npu, f"npu_{kind}")
    p, g = rnd(4, 16, seed=5, lo=1, hi=10), rnd(4, 16, seed=6, lo=1, hi=10)
    want = _xywh_reference(p, g, kind)
    pn, gn = npu(p).requires_grad_(), npu(g)
    got = op(pn, gn, trans=True, is_cross=False, mode=0)
    assert got.shape == ((16, 1) if kind == "giou" else (1, 16))
    assert_close(got.cpu().reshape(-1), want, atol=1e-5, rtol=1e-5)
    got.sum().backward()  # the real op has a backward: gradients flow to the boxes
    assert pn.grad is not None and bool(torch.isfinite(pn.grad).all())
    cross = op(npu(p[:, :5]), npu(g[:, :3]), trans=True, is_cross=True)
    assert cross.shape == ((5, 3) if kind == "giou" else (3, 5))
    pair = cross[1, 2] if kind == "giou" else cross[2, 1]
    assert_close(pair.cpu(), _xywh_reference(p[:, 1], g[:, 2], kind), atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="same number of boxes"):
        op(npu(p), npu(g[:, :3]), trans=True, is_cross=False)


def test_anchor_response_flags():
    gt = rnd(100, 4, seed=7, lo=0, hi=100)
    got = torch_npu.npu_anchor_response_flags(npu(gt), [60, 60], [2, 2], 9)
    cx = torch.floor((gt[:, 0] + gt[:, 2]) * 0.5 / 2).long()
    cy = torch.floor((gt[:, 1] + gt[:, 3]) * 0.5 / 2).long()
    want = torch.zeros(3600, dtype=torch.uint8)
    want[cy * 60 + cx] = 1
    assert got.dtype == torch.uint8
    assert_close(got.cpu(), want[:, None].expand(3600, 9).reshape(-1))


def test_yolo_boxes_encode():
    a, g = boxes(6, 8), boxes(6, 9)
    stride = torch.tensor([8.0, 8, 16, 16, 32, 32])
    got = torch_npu.npu_yolo_boxes_encode(npu(a), npu(g), npu(stride))
    cx = ((g[:, 0] + g[:, 2]) - (a[:, 0] + a[:, 2])) * 0.5 / stride + 0.5
    w = torch.log((g[:, 2] - g[:, 0]) / (a[:, 2] - a[:, 0]))
    assert_close(got.cpu()[:, 0], cx.clamp(1e-6, 1 - 1e-6))
    assert_close(got.cpu()[:, 2], w)


def test_grid_assign_positive():
    assigned = torch.zeros(4)
    overlaps = torch.tensor([[0.2, 0.9, 0.1, 0.3], [0.6, 0.1, 0.7, 0.3]])
    flags = torch.tensor([1, 1, 1, 0], dtype=torch.uint8)
    max_ov, argmax_ov = overlaps.max(0)
    gt_max, gt_arg = overlaps.max(1)
    got = torch_npu.npu_grid_assign_positive(npu(assigned), npu(overlaps), npu(flags), npu(max_ov),
                                             npu(argmax_ov.int()), npu(gt_max), npu(gt_arg.int()), 2, 0.65, 0.0,
                                             True)
    # box 1 (0.9, gt 0) and box 2 (0.7, gt 1) pass 0.65; then gt 0 claims box 1 and gt 1 box 2 again.
    assert got.cpu().tolist() == [0.0, 1.0, 2.0, 0.0]
    loose = torch_npu.npu_grid_assign_positive(npu(assigned), npu(overlaps), npu(flags), npu(max_ov),
                                               npu(argmax_ov.int()), npu(gt_max), npu(gt_arg.int()), 2, 0.5, 0.0,
                                               False)
    assert loose.cpu().tolist() == [2.0, 1.0, 2.0, 0.0]


def test_nms_v4():
    b = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 9, 9], [50, 50, 52, 52.]])
    s = torch.tensor([0.9, 0.8, 0.7, 0.95, 0.05])
    idx, n = torch_npu.npu_nms_v4(npu(b), npu(s), 4, npu(torch.tensor(0.5)), npu(torch.tensor(0.1)))
    assert idx.dtype == torch.int32 and int(n) == 2
    assert idx.cpu().tolist() == [3, 2]
    idx, n = torch_npu.npu_nms_v4(npu(b), npu(s), 4, npu(torch.tensor(0.5)), npu(torch.tensor(0.0)), True)
    assert idx.cpu().tolist() == [3, 2, 4, 0] and int(n) == 3


def test_roi_align_matches_the_kernel_example():
    x = torch.arange(1.0, 37.0).reshape(1, 1, 6, 6)
    rois = torch.tensor([[0, -2.0, -2.0, 22.0, 22.0]])
    got = torch_npu.npu_roi_align(npu(x), npu(rois), 0.25, 3, 3, 2, 0)
    assert_close(got.cpu(), torch.tensor([[[[4.5, 6.5, 8.5], [16.5, 18.5, 20.5], [28.5, 30.5, 32.5]]]]))


def test_ps_roi_pooling_against_a_loop():
    group, out_dim = 3, 2
    x = torch.rand(2, out_dim * group * group, 12, 12, generator=torch.Generator().manual_seed(3))
    rois = torch.tensor([[[0], [3], [2], [9], [9]], [[1], [1], [4], [7], [11]]], dtype=torch.float32)
    got = torch_npu.npu_ps_roi_pooling(npu(x), npu(rois), 0.5, group, out_dim).cpu()
    assert got.shape == (2, out_dim, group, group)
    for r, box in enumerate(rois.transpose(1, 2).reshape(-1, 5)):
        sw, sh = round(float(box[1])) * 0.5, round(float(box[2])) * 0.5
        bw = max(round(float(box[3]) + 1) * 0.5 - sw, 0.1) / group
        bh = max(round(float(box[4]) + 1) * 0.5 - sh, 0.1) / group
        for c in range(out_dim):
            for ph in range(group):
                for pw in range(group):
                    hs, he = max(int(math.floor(ph * bh + sh)), 0), min(int(math.ceil((ph + 1) * bh + sh)), 12)
                    ws, we = max(int(math.floor(pw * bw + sw)), 0), min(int(math.ceil((pw + 1) * bw + sw)), 12)
                    chan = (c * group + ph) * group + pw
                    want = x[int(box[0]), chan, hs:he, ws:we].mean() if he > hs and we > ws else torch.tensor(0.)
                    assert_close(got[r, c, ph, pw], want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("activate_left", [False, True])
@pytest.mark.parametrize("approximate", [0, 1])
def test_geglu_grad_matches_autograd(approximate, activate_left):
    x = rnd(2, 10, 16, seed=30)
    xr = x.clone().requires_grad_()
    y, _ = torch_npu.npu_geglu(xr, -1, approximate, activate_left)
    dy = rnd(2, 10, 8, seed=31)
    (want,) = torch.autograd.grad(y, xr, dy)
    _, gelu = torch_npu.npu_geglu(npu(x), -1, approximate, activate_left)
    got = torch_npu.npu_geglu_grad(npu(dy), npu(x), gelu, -1, approximate, activate_left)
    assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)


def test_masked_softmax_with_rel_pos_bias():
    x, bias, mask = rnd(1, 2, 3, 4, 4, seed=32), rnd(1, 1, 3, 4, 4, seed=33), rnd(1, 2, 1, 4, 4, seed=34)
    got = torch_npu.npu_masked_softmax_with_rel_pos_bias(npu(x), npu(mask), npu(bias))
    assert_close(got.cpu(), torch.softmax(x + mask + bias, -1), atol=1e-6, rtol=1e-5)
    got = torch_npu.npu_masked_softmax_with_rel_pos_bias(npu(x), None, npu(bias), scale_value=0.5)
    assert_close(got.cpu(), torch.softmax(0.5 * x + bias, -1), atol=1e-6, rtol=1e-5)


def test_anti_quant_int8_and_packed_int4():
    x = torch.randint(-127, 128, (10, 100), dtype=torch.int8, generator=torch.Generator().manual_seed(0))
    scale, offset = rnd(100, seed=35), rnd(100, seed=36)
    for dtype in (torch.float16, torch.bfloat16):
        got = torch_npu.npu_anti_quant(npu(x), npu(scale), offset=npu(offset), dst_dtype=dtype)
        assert got.dtype == dtype
        assert_close(got.cpu(), ((x.float() + offset) * scale).to(dtype))
    packed = torch.tensor([[0x76543210, -0x789ABCE0]], dtype=torch.int32)  # nibbles 0..7, then 0, 2, 3, ..., 8
    got = torch_npu.npu_anti_quant(npu(packed), npu(torch.ones(16)))
    nibbles = [(int(v) >> (4 * i)) & 0xF for v in packed[0].tolist() for i in range(8)]
    want = torch.tensor([n - 16 if n >= 8 else n for n in nibbles], dtype=torch.float16).reshape(1, 16)
    assert_close(got.cpu(), want)
    with pytest.raises(RuntimeError, match="should be int8 or int32"):
        torch_npu.npu_anti_quant(npu(x.float()), npu(scale))
