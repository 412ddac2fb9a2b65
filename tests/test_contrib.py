"""torch_npu.contrib.function / .module: each member against its plain-PyTorch
formula (or the same computation on cpu), with gradients and bad input."""

import math
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

import torch_npu
from torch_npu.contrib import function as cf
from torch_npu.contrib import module as cm

NPU = "npu:0"


def rnd(*shape, seed=0, dtype=torch.float32, low=None, high=None):
    g = torch.Generator().manual_seed(seed)
    if low is not None:
        return (torch.rand(*shape, generator=g) * (high - low) + low).to(dtype)
    return torch.randn(*shape, generator=g).to(dtype)


def random_boxes(n, seed, size=100.):
    """(n, 4) well-formed corner boxes."""
    xy = rnd(n, 2, seed=seed, low=0, high=size)
    wh = rnd(n, 2, seed=seed + 1, low=1, high=size / 2)
    return torch.cat([xy, xy + wh], 1)


# --- package -------------------------------------------------------------------

def test_package_import_is_lazy_and_transfer_to_npu_unchanged():
    code = ("import sys, torch_npu.contrib.transfer_to_npu, torch; "
            "mods = sorted(m for m in sys.modules if m.startswith('torch_npu.contrib')); "
            "print(mods); print(torch.cuda.is_available is torch.npu.is_available)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-2] == "['torch_npu.contrib', 'torch_npu.contrib.transfer_to_npu']"
    assert lines[-1] == "True"


def test_package_exports_real_torch_npu_names():
    import torch_npu.contrib as contrib
    for name in contrib.__all__:
        assert getattr(contrib, name) is not None
    assert contrib.npu_ptiou is contrib.npu_iou and contrib.Swish is contrib.SiLU
    assert contrib.DCNv2 is contrib.ModulatedDeformConv and contrib.NpuFairseqDropout is contrib.NpuCachedDropout
    from torch_npu.contrib.function import dropout_with_byte_mask  # noqa: F401
    from torch_npu.contrib.module import DropoutWithByteMask, FastBatchNorm1d  # noqa: F401
    import torch_npu.contrib.function._matmul_transpose as private
    assert private.MatmulApply is cf.matmul_transpose.__self__
    with pytest.raises(AttributeError):
        contrib.no_such_member


# --- IoU family ------------------------------------------------------------------

def ref_iou(b1, b2):
    lt = torch.max(b1[:, None, :2], b2[None, :, :2])
    rb = torch.min(b1[:, None, 2:], b2[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = lambda b: (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])  # noqa: E731
    return inter / (area(b1)[:, None] + area(b2)[None, :] - inter)


def xywh_to_xyxy(b):  # rows
    return torch.cat([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], 1)


@pytest.mark.parametrize("mode", ["iou", "ptiou"])
def test_npu_iou_pairs_and_normalized(mode):
    b1, b2 = random_boxes(7, 1), random_boxes(5, 3)
    out = cf.npu_iou(b1.to(NPU), b2.to(NPU), mode=mode)
    assert out.shape == (7, 5) and out.device.type == "npu"
    assert_close(out.cpu(), ref_iou(b1, b2), atol=1e-4, rtol=1e-4)
    scaled = cf.npu_iou(b1.to(NPU) / 100., b2.to(NPU) / 100., mode=mode, is_normalized=True,
                        normalized_scale=100.)
    assert_close(scaled.cpu(), ref_iou(b1, b2), atol=1e-4, rtol=1e-4)
    # integer boxes are promoted, as in real torch_npu
    ints = cf.npu_iou(b1.round().long().to(NPU), b2.round().long().to(NPU), mode=mode)
    assert ints.dtype == torch.float32
    assert cf.npu_ptiou is cf.npu_iou


def test_npu_iou_values_of_real_test():
    box1 = torch.FloatTensor([[10, 55, 85, 160]]).to(NPU)
    box2 = torch.FloatTensor([[18, 45, 80, 130], [38, 85, 70, 230]]).to(NPU)
    assert_close(cf.npu_iou(box1, box2, mode="iou").cpu(), torch.tensor([[0.5474, 0.2373]]),
                 atol=1e-4, rtol=1e-4)


def test_npu_iou_bad_mode():
    with pytest.raises(ValueError, match="mode"):
        cf.npu_iou(torch.zeros(1, 4), torch.zeros(1, 4), mode="giou")


def ref_giou(b1, b2):  # corner rows, one-to-one
    lt, rb = torch.max(b1[:, :2], b2[:, :2]), torch.min(b1[:, 2:], b2[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = lambda b: (b[:, 2:] - b[:, :2]).prod(-1)  # noqa: E731
    union = area(b1) + area(b2) - inter
    enclose = (torch.max(b1[:, 2:], b2[:, 2:]) - torch.min(b1[:, :2], b2[:, :2])).prod(-1)
    return (inter / union - (enclose - union) / enclose)[:, None]


def test_npu_giou_values_and_grad():
    b1 = torch.cat([rnd(6, 2, seed=1, low=0, high=50), rnd(6, 2, seed=2, low=5, high=30)], 1)
    b2 = torch.cat([rnd(6, 2, seed=3, low=0, high=50), rnd(6, 2, seed=4, low=5, high=30)], 1)
    a = b1.clone().to(NPU).requires_grad_()
    out = cf.npu_giou(a, b2.to(NPU))
    r = b1.clone().requires_grad_()
    ref = ref_giou(xywh_to_xyxy(r), xywh_to_xyxy(b2))
    assert out.shape == (6, 1)
    assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-4)
    out.sum().backward()
    ref.sum().backward()
    assert_close(a.grad.cpu(), r.grad, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="shape"):
        cf.npu_giou(torch.zeros(3, 4), torch.zeros(2, 4))


def ref_diou_ciou(b1, b2, eps=1e-9):  # (4, n) xywh columns, one-to-one
    x1, y1, x2, y2 = b1[0] - b1[2] / 2, b1[1] - b1[3] / 2, b1[0] + b1[2] / 2, b1[1] + b1[3] / 2
    gx1, gy1, gx2, gy2 = b2[0] - b2[2] / 2, b2[1] - b2[3] / 2, b2[0] + b2[2] / 2, b2[1] + b2[3] / 2
    inter = (torch.min(x2, gx2) - torch.max(x1, gx1)).clamp(0) * (torch.min(y2, gy2) - torch.max(y1, gy1)).clamp(0)
    w1, h1, w2, h2 = x2 - x1, y2 - y1, gx2 - gx1, gy2 - gy1
    iou = inter / (w1 * h1 + w2 * h2 - inter + eps)
    c2 = (torch.max(x2, gx2) - torch.min(x1, gx1)) ** 2 + (torch.max(y2, gy2) - torch.min(y1, gy1)) ** 2 + eps
    rho2 = ((gx1 + gx2 - x1 - x2) ** 2 + (gy1 + gy2 - y1 - y2) ** 2) / 4
    v = 4 / math.pi ** 2 * (torch.atan(w2 / h2) - torch.atan(w1 / h1)) ** 2
    alpha = v / (1 - iou + v)
    return (iou - rho2 / c2)[None], (iou - rho2 / c2 - alpha * v)[None]


def test_npu_diou_ciou_values_and_grad():
    b1 = torch.cat([rnd(2, 9, seed=5, low=0, high=1), rnd(2, 9, seed=6, low=0.2, high=1)])
    b2 = torch.cat([rnd(2, 9, seed=7, low=0, high=1), rnd(2, 9, seed=8, low=0.2, high=1)])
    for fn, which in ((cf.npu_diou, 0), (cf.npu_ciou, 1)):
        a = b1.clone().to(NPU).requires_grad_()
        out = fn(a, b2.to(NPU))
        r = b1.clone().requires_grad_()
        ref = ref_diou_ciou(r, b2)[which]
        assert out.shape == (1, 9)
        assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-4)
        out.sum().backward()
        assert a.grad is not None and torch.isfinite(a.grad).all()
        if which == 0:  # DIoU: every term differentiable, exact gradient
            ref.sum().backward()
            assert_close(a.grad.cpu(), r.grad, atol=1e-5, rtol=1e-4)


def test_npu_ciou_values_of_real_test():
    box1 = torch.tensor([[0, 0, 10, 10], [10, 10, 20, 20], [32, 32, 38, 42], [8, 8, 4, 4]],
                        dtype=torch.float32).to(NPU)
    box2 = torch.tensor([[0, 0, 10, 20], [0, 10, 10, 10], [10, 10, 20, 20], [8, 8, 4, 4]],
                        dtype=torch.float32).to(NPU)
    assert_close(cf.npu_ciou(box1, box2).cpu(), torch.tensor([[-0.0794, 0.3052, -0.0610, -0.1021]]),
                 atol=1e-4, rtol=1e-3)


# --- NMS -------------------------------------------------------------------------

def ref_multiclass_nms(boxes, scores, score_thr, nms_thr, max_num):
    """Loop reference: per class greedy NMS, then the max_num best overall, zero-padded."""
    boxes, scores = boxes.half().float(), scores.half().float()
    n, classes = scores.shape
    boxes = boxes.reshape(n, -1, 4)
    found = []
    for c in range(classes):
        b = boxes[:, 0 if boxes.shape[1] == 1 else c]
        idx = [i for i in sorted(range(n), key=lambda i: -scores[i, c].item()) if scores[i, c] > score_thr]
        kept = []
        for i in idx:
            if all(ref_iou(b[i:i + 1], b[j:j + 1]).item() <= nms_thr for j in kept):
                kept.append(i)
        found += [(scores[i, c].item(), b[i], c) for i in kept[:max_num]]
    found.sort(key=lambda t: -t[0])
    dets, labels = torch.zeros(max_num, 5), torch.zeros(max_num)
    for k, (s, b, c) in enumerate(found[:max_num]):
        dets[k, :4], dets[k, 4], labels[k] = b, s, c
    return dets, labels


@pytest.mark.parametrize("per_class_boxes", [False, True])
def test_npu_multiclass_nms_matches_loop_reference(per_class_boxes):
    n, classes = 40, 3
    boxes = random_boxes(n * (classes if per_class_boxes else 1), seed=11, size=60.)
    boxes = boxes.reshape(n, classes, 4) if per_class_boxes else boxes
    scores = rnd(n, classes + 1, seed=12, low=0, high=1)
    dets, labels = cf.npu_multiclass_nms(boxes.to(NPU), scores.to(NPU), score_thr=0.3, nms_thr=0.5, max_num=12)
    assert dets.shape == (12, 5) and labels.shape == (12,) and dets.dtype == torch.float16
    ref_dets, ref_labels = ref_multiclass_nms(boxes, scores[:, :-1], 0.3, 0.5, 12)
    assert_close(dets.float().cpu(), ref_dets, atol=1e-2, rtol=1e-3)
    assert_close(labels.float().cpu(), ref_labels)


def test_npu_multiclass_nms_pads_and_score_factors():
    boxes = torch.tensor([[0., 0, 10, 10], [1, 1, 10, 10], [50, 50, 60, 60]])
    scores = torch.tensor([[0.9, 0.0], [0.8, 0.0], [0.7, 0.0]])
    dets, labels = cf.npu_multiclass_nms(boxes.to(NPU), scores.to(NPU), score_thr=0.05, nms_thr=0.5, max_num=5)
    assert_close(dets[:, 4].float().cpu(), torch.tensor([0.9, 0.7, 0, 0, 0]).half().float())
    assert (dets[2:] == 0).all()
    factors = torch.tensor([1.0, 1.0, 2.0])
    dets, _ = cf.npu_multiclass_nms(boxes.to(NPU), scores.to(NPU), max_num=2, score_factors=factors.to(NPU))
    assert_close(dets[:, 4].float().cpu(), torch.tensor([1.4, 0.9]).half().float())
    with pytest.raises(ValueError, match="max_num"):
        cf.npu_multiclass_nms(boxes, scores, max_num=-1)


def test_npu_batched_multiclass_nms_is_per_image():
    boxes = random_boxes(2 * 30, seed=21, size=50.).reshape(2, 30, 4)
    scores = rnd(2, 30, 4, seed=22, low=0, high=1)
    dets, labels = cf.npu_batched_multiclass_nms(boxes.to(NPU), scores.to(NPU), 0.2, 0.4, 7)
    assert dets.shape == (2, 7, 5) and labels.shape == (2, 7)
    for i in range(2):
        d, lab = cf.npu_multiclass_nms(boxes[i], scores[i], 0.2, 0.4, 7)
        assert_close(dets[i].cpu(), d)
        assert_close(labels[i].cpu(), lab)


# --- anchors, box coders, index_put ------------------------------------------------

def test_npu_single_level_responsible_flags():
    gt = torch.randint(0, 100, (64, 4), generator=torch.Generator().manual_seed(3))
    for (h, w), stride in (((10, 10), (32, 32)), ((20, 20), (16, 16)), ((7, 5), (8, 16))):
        cx, cy = (gt[:, 0] + gt[:, 2]) * 0.5, (gt[:, 1] + gt[:, 3]) * 0.5
        gx, gy = torch.floor(cx / stride[0]).long(), torch.floor(cy / stride[1]).long()
        inside = (gx < w) & (gy < h)
        grid = torch.zeros(h * w, dtype=torch.uint8)
        grid[(gy * w + gx)[inside]] = 1
        ref = grid[:, None].expand(h * w, 3).reshape(-1)
        out = cf.npu_single_level_responsible_flags((h, w), gt.to(NPU), stride, 3)
        assert out.dtype == torch.uint8
        assert torch.equal(out.cpu(), ref)


def test_bbox_coder_roundtrip_and_formula():
    anchors = random_boxes(10, 31)
    gts = random_boxes(10, 33)
    means, stds = [0.1, -0.1, 0.0, 0.2], [0.5, 0.5, 1.0, 2.0]
    deltas = cf.npu_bbox_coder_encode_xyxy2xywh(anchors.to(NPU), gts.to(NPU), means, stds)
    pw, ph = anchors[:, 2] - anchors[:, 0] + 1, anchors[:, 3] - anchors[:, 1] + 1
    gw, gh = gts[:, 2] - gts[:, 0] + 1, gts[:, 3] - gts[:, 1] + 1
    ref = torch.stack([((gts[:, 0] + gts[:, 2]) - (anchors[:, 0] + anchors[:, 2])) * 0.5 / pw,
                       ((gts[:, 1] + gts[:, 3]) - (anchors[:, 1] + anchors[:, 3])) * 0.5 / ph,
                       torch.log(gw / pw), torch.log(gh / ph)], 1)
    ref = (ref - torch.tensor(means)) / torch.tensor(stds)
    assert_close(deltas.cpu(), ref, atol=1e-4, rtol=1e-4)
    normalized = cf.npu_bbox_coder_encode_xyxy2xywh(anchors.to(NPU) / 512, gts.to(NPU) / 512, means, stds,
                                                    is_normalized=True, normalized_scale=512.)
    assert_close(normalized.cpu(), ref, atol=1e-4, rtol=1e-4)
    back = cf.npu_bbox_coder_decode_xywh2xyxy(anchors.to(NPU), deltas, means, stds, max_shape=(1000, 1000))
    assert_close(back.cpu(), gts, atol=1e-3, rtol=1e-4)
    clipped = cf.npu_bbox_coder_decode_xywh2xyxy(anchors.to(NPU), deltas, means, stds, max_shape=(40, 30))
    assert clipped[:, 0::2].max() <= 29 and clipped[:, 1::2].max() <= 39 and clipped.min() >= 0


def test_bbox_coder_decode_values_of_real_test():
    np.random.seed(345)
    bboxes = torch.tensor(np.random.randint(low=0, high=512, size=(6, 4)), dtype=torch.int64)
    pred = torch.tensor(np.random.randn(6, 4), dtype=torch.float32)
    out = cf.npu_bbox_coder_decode_xywh2xyxy(bboxes.to(NPU), pred.to(NPU), max_shape=(512, 512))
    expect = torch.tensor([[69.6262, 511.0000, 116.1755, 274.9286], [50.0117, 511.0000, 28.3380, 456.6909],
                           [354.6850, 227.5013, 275.1128, 219.0241], [0.0000, 301.9681, 0.0000, 291.4622],
                           [201.7177, 84.3664, 325.5544, 87.1693], [283.7152, 407.1944, 0.0000, 511.0000]])
    assert_close(out.cpu(), expect, atol=1e-3, rtol=1e-4)


def test_bbox_coder_encode_yolo():
    anchors, gts = random_boxes(8, 41), random_boxes(8, 43)
    stride = torch.tensor([8, 16, 32, 8, 16, 32, 8, 1])
    out = cf.npu_bbox_coder_encode_yolo(anchors.to(NPU), gts.to(NPU), stride.to(NPU))
    eps = 1e-6
    c = lambda b: ((b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1])  # noqa
    ax, ay, aw, ah = c(anchors)
    gx, gy, gw, gh = c(gts)
    ref = torch.stack([((gx - ax) / stride + 0.5).clamp(eps, 1 - eps), ((gy - ay) / stride + 0.5).clamp(eps, 1 - eps),
                       torch.log((gw / aw).clamp(min=eps)), torch.log((gh / ah).clamp(min=eps))], 1)
    assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("fn", [cf.npu_bbox_coder_encode_xyxy2xywh, cf.npu_bbox_coder_decode_xywh2xyxy])
def test_bbox_coder_bad_shapes(fn):
    with pytest.raises(ValueError, match="size\\(0\\)"):
        fn(torch.zeros(3, 4), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="size\\(-1\\)"):
        fn(torch.zeros(3, 4), torch.zeros(3, 5))
    with pytest.raises(ValueError, match="size\\(0\\)"):
        cf.npu_bbox_coder_encode_yolo(torch.zeros(3, 4), torch.zeros(2, 4), torch.ones(3))


@pytest.mark.parametrize("value", [0., 1., 2.5])
def test_npu_fast_condition_index_put(value):
    x = rnd(6, 7, seed=51).to(NPU).requires_grad_()
    cond = x.detach() < 0.5
    out = cf.npu_fast_condition_index_put(x, cond, value)
    ref = x.detach().cpu().clone()
    ref[cond.cpu()] = value
    assert_close(out.detach().cpu(), ref)
    out.sum().backward()
    assert_close(x.grad.cpu(), (~cond).float().cpu())
    with pytest.raises(TypeError, match="bool"):
        cf.npu_fast_condition_index_put(x, cond.int(), value)


# --- attention helpers --------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 8, 128, 16), (2, 3, 9, 16)])  # fused branch, plain branch
def test_fuse_add_softmax_dropout(shape):
    n, c, h, w = shape
    mask, scores = rnd(n, c, h, w, seed=1), rnd(n, c, h, w, seed=2)
    ref = torch.softmax(mask + scores / math.sqrt(64), -1)
    dropout = nn.Dropout(0.)
    out = cf.fuse_add_softmax_dropout(True, dropout, mask.to(NPU), scores.to(NPU), 64, p=0.)
    assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    out = cf.fuse_add_softmax_dropout(False, dropout, mask.to(NPU), scores.to(NPU), 64, p=0.5)
    assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)  # eval: no dropout on the fused branch
    torch.manual_seed(0)
    dropped = cf.fuse_add_softmax_dropout(True, nn.Dropout(0.5), mask.to(NPU), scores.to(NPU), 64, p=0.5)
    kept = dropped.cpu() != 0
    assert 0.3 < kept.float().mean() < 0.7
    assert_close(dropped.cpu()[kept], (ref * 2)[kept], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shifts", [(-3, -3), (2, 5), (0, -1)])
def test_roll_matches_torch_roll_with_grad(shifts):
    x = rnd(2, 7, 6, 3, seed=61)
    a = x.clone().to(NPU).requires_grad_()
    out = cf.roll(a, shifts=shifts, dims=(1, 2))
    assert torch.equal(out.detach().cpu(), torch.roll(x, shifts, (1, 2)))
    g = rnd(*x.shape, seed=62)
    out.backward(g.to(NPU))
    assert torch.equal(a.grad.cpu(), torch.roll(g, tuple(-s for s in shifts), (1, 2)))
    for bad in ((x[0], shifts, (1, 2)), (x, (1,), (1, 2)), (x, shifts, (1,))):
        with pytest.raises(ValueError, match="Expected"):
            cf.roll(*bad)


@pytest.mark.parametrize("shapes", [((2, 3, 5, 4), (2, 3, 7, 4)), ((2, 1, 5, 4), (3, 7, 4))])
def test_matmul_transpose_and_grad(shapes):
    a, b = rnd(*shapes[0], seed=1), rnd(*shapes[1], seed=2)
    na, nb = (t.clone().to(NPU).requires_grad_() for t in (a, b))
    ra, rb = (t.clone().requires_grad_() for t in (a, b))
    out = cf.matmul_transpose(na, nb)
    ref = ra @ rb.transpose(-2, -1)
    assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    g = rnd(*ref.shape, seed=3)
    out.backward(g.to(NPU))
    ref.backward(g)
    assert_close(na.grad.cpu(), ra.grad, atol=1e-5, rtol=1e-5)
    assert_close(nb.grad.cpu(), rb.grad, atol=1e-5, rtol=1e-5)


def ref_fused_attention(x, mask, w, b, scale, batch, seq):
    heads = x.shape[1] // 64
    q, k, v = ((x @ wi + bi).reshape(batch, seq, heads, 64).permute(0, 2, 1, 3) for wi, bi in zip(w, b))
    p = torch.softmax(q @ k.transpose(-2, -1) * scale + mask, -1)
    return (p @ v).permute(0, 2, 1, 3).reshape(batch * seq, -1)


@pytest.mark.parametrize("with_layernorm", [False, True])
def test_npu_fused_attention(with_layernorm):
    batch, seq, hidden = 2, 16, 768
    x = rnd(batch * seq, hidden, seed=1)
    mask = torch.where(rnd(batch, 1, seq, seq, seed=2) > 1.0, -10000.0, 0.0)
    w = [rnd(hidden, hidden, seed=3 + i) / 30 for i in range(3)]
    b = [rnd(hidden, seed=6 + i) for i in range(3)]
    gamma, beta = rnd(hidden, seed=9), rnd(hidden, seed=10)
    dev = [t.to(NPU).requires_grad_() for t in [x] + w + b + [gamma, beta]]
    ref_in = [t.clone().requires_grad_() for t in [x] + w + b + [gamma, beta]]
    if with_layernorm:
        ctx, norm = cf.npu_fused_attention_with_layernorm(dev[0], mask.to(NPU), *dev[1:], scale=0.125)
        rn = F.layer_norm(ref_in[0], (hidden,), ref_in[7], ref_in[8], 1e-5)
        ref = ref_fused_attention(rn, mask, ref_in[1:4], ref_in[4:7], 0.125, batch, seq)
        assert_close(norm.detach().cpu(), rn.detach(), atol=1e-4, rtol=1e-4)
        used = range(9)
    else:
        ctx = cf.npu_fused_attention(dev[0], mask.to(NPU), *dev[1:7], scale=0.125)
        ref = ref_fused_attention(ref_in[0], mask, ref_in[1:4], ref_in[4:7], 0.125, batch, seq)
        used = range(7)
    assert_close(ctx.detach().cpu(), ref.detach(), atol=1e-4, rtol=1e-4)
    g = rnd(*ref.shape, seed=11)
    ctx.backward(g.to(NPU))
    ref.backward(g)
    for i in used:
        assert_close(dev[i].grad.cpu(), ref_in[i].grad, atol=1e-3, rtol=1e-3)


def test_npu_fused_attention_shape_checks():
    w = [torch.zeros(768, 768)] * 3
    b = [torch.zeros(768)] * 3
    with pytest.raises(RuntimeError, match="hidden_states"):
        cf.npu_fused_attention(torch.zeros(30, 768), torch.zeros(2, 1, 15, 15), *w, *b)
    with pytest.raises(RuntimeError, match="hidden_states"):
        cf.npu_fused_attention(torch.zeros(32, 512), torch.zeros(2, 1, 16, 16), *w, *b)
    with pytest.raises(RuntimeError, match="attention_mask"):
        cf.npu_fused_attention(torch.zeros(32, 768), torch.zeros(2, 2, 16, 16), *w, *b)
    with pytest.raises(RuntimeError, match="kernel"):
        cf.npu_fused_attention(torch.zeros(32, 768), torch.zeros(2, 1, 16, 16), torch.zeros(1024, 1024), *w[1:], *b)


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_dropout_with_byte_mask_and_module(p):
    x = rnd(64, 64, seed=71).to(NPU).requires_grad_()
    torch.manual_seed(1)
    out = cf.dropout_with_byte_mask(x, p, training=True)
    kept = out.detach() != 0
    if p == 0.:
        assert torch.equal(out.detach().cpu(), x.detach().cpu())
    elif p == 1.:
        assert not kept.any()
    else:
        assert abs(kept.float().mean().item() - (1 - p)) < 0.05
        assert_close(out.detach()[kept].cpu(), (x.detach()[kept] / (1 - p)).cpu())
    out.sum().backward()
    if p < 1.:
        assert_close(x.grad.cpu(), (kept.float() / (1 - p)).cpu())
    module = cm.DropoutWithByteMask(p).eval()
    assert module(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        cf.dropout_with_byte_mask(x, 1.5)
    with pytest.raises(ValueError, match="no-inplace"):
        cf.dropout_with_byte_mask(x, 0.5, inplace=True)
    with pytest.raises(ValueError, match="between 0 and 1"):
        cm.DropoutWithByteMask(-0.1)


# --- modules: activations, LSTM, shuffles, losses ------------------------------------

@pytest.mark.parametrize("cls, formula", [(cm.Mish, lambda x: x * torch.tanh(F.softplus(x))),
                                          (cm.SiLU, lambda x: x * torch.sigmoid(x)),
                                          (cm.Swish, lambda x: x * torch.sigmoid(x))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_activations(cls, formula, dtype):
    x = rnd(2, 5, 6, seed=81, dtype=dtype)
    with pytest.warns(FutureWarning, match="deprecated"):
        m = cls()
    a = x.clone().to(NPU).requires_grad_()
    out = m(a)
    r = x.float().requires_grad_()
    ref = formula(r)
    assert out.dtype == dtype
    tol = 1e-3 if dtype == torch.float16 else 1e-5
    assert_close(out.detach().cpu().float(), ref.detach(), atol=tol, rtol=tol)
    out.sum().backward()
    ref.sum().backward()
    assert_close(a.grad.cpu().float(), r.grad, atol=tol * 3, rtol=tol * 3)


def test_bilstm_equals_torch_bidirectional_lstm():
    torch.manual_seed(0)
    with pytest.warns(FutureWarning):
        model = cm.BiLSTM(8, 4)
    ref = nn.LSTM(8, 4, bidirectional=True)
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(ref, name).copy_(getattr(model.fw_rnn, name))
            getattr(ref, name + "_reverse").copy_(getattr(model.bw_rnn, name))
    x = rnd(5, 3, 8, seed=82)
    a = x.clone().to(NPU).requires_grad_()
    out = model.to(NPU)(a)
    r = x.clone().requires_grad_()
    ref_out, _ = ref(r)
    assert out.shape == (5, 3, 8)
    assert_close(out.detach().cpu(), ref_out.detach(), atol=1e-5, rtol=1e-4)
    out.sum().backward()
    ref_out.sum().backward()
    assert_close(a.grad.cpu(), r.grad, atol=1e-5, rtol=1e-4)


def torchvision_channel_shuffle(x, groups):
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


@pytest.mark.parametrize("groups", [2, 4])
@pytest.mark.parametrize("split", [False, True])
def test_channel_shuffle(groups, split):
    x1, x2 = rnd(2, 4, 3, 3, seed=91), rnd(2, 4, 3, 3, seed=92)
    model = cm.ChannelShuffle(8, groups=groups, split_shuffle=split).to(NPU)
    a1, a2 = (t.clone().to(NPU).requires_grad_() for t in (x1, x2))
    out = model(a1, a2)
    r1, r2 = (t.clone().requires_grad_() for t in (x1, x2))
    ref = torchvision_channel_shuffle(torch.cat([r1, r2], 1), groups)
    got = torch.cat(out, 1) if split else out
    assert_close(got.detach().cpu(), ref.detach())
    g = rnd(*ref.shape, seed=93)
    got.backward(g.to(NPU))
    ref.backward(g)
    assert_close(a1.grad.cpu(), r1.grad)
    assert_close(a2.grad.cpu(), r2.grad)
    with pytest.raises(ValueError, match="divisible"):
        cm.ChannelShuffle(7, groups=2)


@pytest.mark.parametrize("smooth", [0.0, 0.1])
def test_label_smoothing_cross_entropy(smooth):
    pred = rnd(4, 10, seed=101)
    target = torch.tensor([1., 0., 9., 3.])
    a = pred.clone().to(NPU).requires_grad_()
    loss = cm.LabelSmoothingCrossEntropy(10, smooth)(a, target.to(NPU))
    r = pred.clone().requires_grad_()
    ref = F.cross_entropy(r, target.long(), label_smoothing=0.0)
    if smooth:  # off-value s/(C-1) on wrong classes: not torch's s/C spread, build it explicitly
        t = torch.full((4, 10), smooth / 9).scatter_(1, target.long()[:, None], 1 - smooth)
        ref = -(t * torch.log_softmax(r, 1)).sum(1).mean()
    assert loss.dtype == torch.float32 and loss.dim() == 0
    assert_close(loss.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    loss.backward()
    ref.backward()
    assert_close(a.grad.cpu(), r.grad, atol=1e-6, rtol=1e-5)


def test_label_smoothing_cross_entropy_values_of_real_test():
    np.random.seed(123)
    x = torch.tensor(np.random.randn(2, 10), dtype=torch.float32).to(NPU).requires_grad_()
    y = torch.tensor(np.random.randint(low=0, high=10, size=(2,)), dtype=torch.float32).to(NPU)
    loss = cm.LabelSmoothingCrossEntropy(10)(x, y)
    assert_close(loss.detach().cpu(), torch.tensor(3.8078), atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="pred"):
        cm.LabelSmoothingCrossEntropy(10)(x[:, :5], y)


# --- modules: detection ----------------------------------------------------------------

def test_roi_align_values_and_grad_of_real_test():
    feature = torch.arange(1, 37, dtype=torch.float32).reshape(1, 1, 6, 6)
    roi = torch.tensor([[0, -2.0, -2.0, 22.0, 22.0]])
    expect = {False: torch.tensor([[[[4.5, 6.5, 8.5], [16.5, 18.5, 20.5], [28.5, 30.5, 32.5]]]]),
              True: torch.tensor([[[[2.75, 4.5, 6.5], [13.25, 15.0, 17.0], [25.25, 27.0, 29.0]]]])}
    for aligned in (False, True):
        x = feature.clone().to(NPU).requires_grad_()
        out = cm.ROIAlign((3, 3), 0.25, 2, aligned=aligned).to(NPU)(x, roi.to(NPU))
        assert_close(out.detach().cpu(), expect[aligned])
        out.sum().backward()
        assert_close(x.grad.sum().cpu(), torch.tensor(9.0))  # each bin's weights sum to 1
    assert_close(x.grad[0, 0, 0].cpu(), torch.tensor([0.5625, 0.375, 0.375, 0.375, 0.375, 0.1875]))


def test_roi_align_is_linear_in_input_and_checks_rois():
    x = rnd(2, 3, 9, 8, seed=111)
    rois = torch.tensor([[0, 1.0, 1.5, 6.0, 7.0], [1, 0.0, 0.0, 7.9, 8.9], [1, 3.3, 2.2, 3.4, 2.3]])
    for aligned, ratio in ((True, 2), (False, 0), (True, 0)):
        m = cm.ROIAlign((2, 3), 1.0, ratio, aligned=aligned)
        out = m(x.to(NPU), rois.to(NPU))
        assert out.shape == (3, 3, 2, 3)
        assert_close(m(x.to(NPU) * 2 + 1, rois.to(NPU)).cpu(), (out * 2 + 1).cpu(), atol=1e-5, rtol=1e-5)
        assert_close(m(x, rois), out.cpu(), atol=1e-6, rtol=1e-6)  # cpu and npu agree
    with pytest.raises(ValueError, match="rois"):
        cm.ROIAlign((2, 2), 1.0, 2)(x, rois[:, :4])


def ref_ps_roi_pool(x, rois, scale, group, out_dim):
    res = []
    for b in range(rois.shape[0]):
        for r in range(rois.shape[2]):
            bi, x1, y1, x2, y2 = rois[b, :, r].tolist()
            sw, sh = round(x1) * scale, round(y1) * scale
            ew, eh = (round(x2) + 1) * scale, (round(y2) + 1) * scale
            bw, bh = max(ew - sw, 0.1) / group, max(eh - sh, 0.1) / group
            o = torch.zeros(out_dim, group, group)
            for i in range(group):
                h0 = min(max(math.floor(i * bh + sh), 0), x.shape[2])
                h1 = min(max(math.ceil((i + 1) * bh + sh), 0), x.shape[2])
                for j in range(group):
                    w0 = min(max(math.floor(j * bw + sw), 0), x.shape[3])
                    w1 = min(max(math.ceil((j + 1) * bw + sw), 0), x.shape[3])
                    for c in range(out_dim):
                        if h1 > h0 and w1 > w0:
                            o[c, i, j] = x[int(bi), (c * group + i) * group + j, h0:h1, w0:w1].mean()
            res.append(o)
    return torch.stack(res)


def test_ps_roi_pool():
    group, out_dim = 3, 2
    x = rnd(2, out_dim * group * group, 12, 12, seed=121)
    rois = torch.tensor([[[0, 2., 1., 30., 40.], [0, 10., 10., 20., 22.]],
                         [[1, 0., 0., 47., 47.], [1, 5., 30., 9., 33.]]]).permute(0, 2, 1)
    a = x.clone().to(NPU).requires_grad_()
    out = cm.PSROIPool(group, group, 1 / 4., group, out_dim)(a, rois.to(NPU))
    assert out.shape == (4, out_dim, group, group)
    assert_close(out.detach().cpu(), ref_ps_roi_pool(x, rois, 1 / 4., group, out_dim), atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert a.grad is not None and a.grad.sum() > 0
    with pytest.raises(ValueError, match="pooled_height == pooled_width == group_size"):
        cm.PSROIPool(7, 6, 1 / 16., 7, 22)
    assert "pooled_width=3" in repr(cm.PSROIPool(3, 3, 1., 3, 2))


def ref_deform_conv(x, offset, mask, weight, bias, stride, pad, dil):
    """Direct loop over taps: bilinear sample at the offset position (0 outside), times the mask."""
    n, c, h, w = x.shape
    co, _, kh, kw = weight.shape
    ho = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    wo = (w + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    out = torch.zeros(n, co, ho, wo)
    for k in range(kh * kw):
        i, j = divmod(k, kw)
        py = (torch.arange(ho) * stride - pad + i * dil).view(-1, 1) + offset[:, 2 * k]
        px = (torch.arange(wo) * stride - pad + j * dil).view(1, -1) + offset[:, 2 * k + 1]
        grid = torch.stack([(px + 0.5) / w * 2 - 1, (py + 0.5) / h * 2 - 1], -1)
        sampled = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        out += torch.einsum("oc,nchw->nohw", weight[:, :, i, j], sampled * mask[:, k:k + 1])
    return out + bias.view(1, -1, 1, 1)


@pytest.mark.parametrize("stride, pad, dil", [(1, 1, 1), (2, 1, 1), (1, 2, 2)])
def test_modulated_deform_conv_unpacked_against_grid_sample(stride, pad, dil):
    torch.manual_seed(0)
    model = cm.ModulatedDeformConv(3, 4, 3, stride, pad, dil, pack=False)
    nn.init.uniform_(model.bias, -1, 1)
    x = rnd(2, 3, 7, 6, seed=131)
    ho = (7 + 2 * pad - dil * 2 - 1) // stride + 1
    wo = (6 + 2 * pad - dil * 2 - 1) // stride + 1
    offset = rnd(2, 18, ho, wo, seed=132) * 1.5
    mask = torch.sigmoid(rnd(2, 9, ho, wo, seed=133))
    inputs = [t.clone().to(NPU).requires_grad_() for t in (x, offset, mask)]
    out = model.to(NPU)((inputs[0], inputs[1], inputs[2]))
    ref_in = [t.clone().requires_grad_() for t in (x, offset, mask)]
    w, b = model.weight.detach().cpu().requires_grad_(), model.bias.detach().cpu().requires_grad_()
    ref = ref_deform_conv(*ref_in, w, b, stride, pad, dil)
    assert_close(out.detach().cpu(), ref.detach(), atol=1e-4, rtol=1e-4)
    g = rnd(*ref.shape, seed=134)
    out.backward(g.to(NPU))
    ref.backward(g)
    for got, want in zip(inputs, ref_in):
        assert_close(got.grad.cpu(), want.grad, atol=1e-3, rtol=1e-3)
    assert_close(model.weight.grad.cpu(), w.grad, atol=1e-3, rtol=1e-3)
    assert_close(model.bias.grad.cpu(), b.grad, atol=1e-3, rtol=1e-3)


def test_dcnv2_packed_starts_as_half_a_convolution():
    torch.manual_seed(0)
    model = cm.DCNv2(2, 4, 3, 2, 1, groups=2, deformable_groups=2)
    nn.init.uniform_(model.bias, -1, 1)
    x = rnd(2, 2, 5, 5, seed=141)
    out = model.to(NPU)(x.to(NPU))  # zero offsets, masks sigmoid(0) = 0.5
    ref = F.conv2d(x, model.weight.detach().cpu() * 0.5, model.bias.detach().cpu(), 2, 1, 1, 2)
    assert_close(out.detach().cpu(), ref, atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert model.conv_offset.weight.grad is not None and model.weight.grad is not None
    assert cm.DCNv2 is cm.ModulatedDeformConv
    with pytest.raises(ValueError, match="offset should have"):
        cm.DCNv2(2, 2, 3, pack=False)((x, torch.zeros(2, 9, 3, 3), torch.zeros(2, 9, 3, 3)))


# --- modules: regularisers with pre-drawn randomness --------------------------------------

@pytest.fixture
def fresh_task_queues():
    """NpuDropPath / NpuCachedDropout keep class-level queues: isolate each test."""
    saved = (dict(cm.NpuDropPath.task_dict), dict(cm.NpuCachedDropout.task_dict))
    cm.NpuDropPath.task_dict.clear()
    cm.NpuCachedDropout.task_dict.clear()
    yield
    cm.NpuDropPath.task_dict.clear()
    cm.NpuDropPath.task_dict.update(saved[0])
    cm.NpuCachedDropout.task_dict.clear()
    cm.NpuCachedDropout.task_dict.update(saved[1])


def test_npu_drop_path_protocol_and_formula(fresh_task_queues):
    x = rnd(16, 3, 4, seed=151).to(NPU).requires_grad_()
    assert cm.NpuDropPath(0.)(x) is x and cm.NpuDropPath(0.3).eval()(x) is x
    drop = cm.NpuDropPath(0.5)
    model = nn.Sequential(drop)
    assert model(x) is x  # first step: only registers the request
    cm.NpuDropPath.enable_droppath_ensemble(model)
    torch.manual_seed(0)
    out = model(x)  # the pre-hook drew one random tensor per request
    torch.npu.synchronize()
    per_sample = out.detach().cpu() / x.detach().cpu()
    kept = per_sample[:, 0, 0]
    assert set(kept.unique().tolist()) <= {0.0, 2.0} and 0 < (kept == 2).sum() < 16
    assert_close(per_sample, kept.view(16, 1, 1).expand_as(per_sample))
    out.sum().backward()
    assert_close(x.grad.cpu(), kept.view(16, 1, 1).expand(16, 3, 4))
    with pytest.raises(ValueError, match="drop_prob"):
        cm.NpuDropPath(1.0)
    with pytest.raises(RuntimeError, match="input type"):
        cm.NpuDropPath(0.2)([x])


def test_npu_cached_dropout_protocol(fresh_task_queues):
    x = rnd(32, 32, seed=161).to(NPU)
    dropout = cm.NpuCachedDropout(0.25)
    model = nn.Sequential(nn.Identity())
    assert dropout(x) is x  # no mask queued yet
    assert dropout([x.shape, x.dtype, x.device]) is None
    cm.NpuCachedDropout.enable_dropout_ensemble(model)
    model(x)  # forward hook tops up the queue: two requests so far
    torch.npu.synchronize()
    out = dropout(x)
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.1
    assert_close(out[kept].cpu(), (x[kept] / 0.75).cpu())
    mask = dropout([x.shape, x.dtype, x.device])
    assert mask.dtype == torch.bool and mask.shape == x.shape
    assert cm.NpuCachedDropout(0.)(x) is x
    with pytest.raises(RuntimeError, match="input type"):
        dropout("x")
    assert cm.NpuFairseqDropout is cm.NpuCachedDropout


# --- modules: Focus, colour jitter, prefetcher, batch norm -----------------------------------

def test_focus_slices_and_module():
    x = rnd(2, 3, 6, 9, seed=171)
    from torch_npu.contrib.module.focus import fast_slice
    for got, want in zip(fast_slice(x.to(NPU)), [x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
                                                 x[..., 1::2, 1::2]]):
        assert torch.equal(got.cpu(), want)
    x = x[..., :8]  # Focus needs even sizes to stack the phases
    torch.manual_seed(0)
    focus = cm.Focus(3, 5, k=3)
    ref = focus.conv.act(focus.conv.bn(focus.conv.conv(torch.cat(fast_slice(x), 1))))
    a = x.clone().to(NPU).requires_grad_()
    out = focus.to(NPU)(a)
    assert out.shape == (2, 5, 3, 4)
    assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-4)
    out.sum().backward()
    assert a.grad.shape == x.shape


def test_fused_color_jitter():
    from PIL import Image
    from torch_npu.contrib.module.fusedcolorjitter import hue_saturation_matrix
    img = np.random.default_rng(0).integers(0, 256, (16, 12, 3)).astype(np.uint8)
    assert np.array_equal(cm.FusedColorJitter()(img), img)  # no jitter: identity
    np.testing.assert_allclose(hue_saturation_matrix(0.0, 1.0), np.eye(3), atol=1e-6)
    grey = hue_saturation_matrix(0.3, 0.0)  # no saturation: every channel is the luma
    rgb = img.reshape(-1, 3).astype(np.float32)
    luma = rgb @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    np.testing.assert_allclose(rgb @ grey, np.repeat(luma[:, None], 3, 1), atol=1e-3)
    hue_only = hue_saturation_matrix(0.25, 1.0)  # a hue rotation keeps the luma
    np.testing.assert_allclose((rgb @ hue_only) @ np.array([0.299, 0.587, 0.114]), luma, atol=1e-2)
    out = cm.FusedColorJitter(brightness=(2.0, 2.0))(img)  # brightness x2, clipped
    assert np.array_equal(out, np.clip(img.astype(np.float32) * 2, 0, 255).astype(np.uint8))
    pil = cm.FusedColorJitter(0.1, 0.1, 0.1, 0.1)(Image.fromarray(img))
    assert isinstance(pil, Image.Image) and pil.size == (12, 16)
    with pytest.raises(ValueError, match="non negative"):
        cm.FusedColorJitter(brightness=-1)
    with pytest.raises(ValueError, match="hue"):
        cm.FusedColorJitter(hue=0.7)
    with pytest.raises(TypeError, match="single number"):
        cm.FusedColorJitter(contrast="x")
    with pytest.raises(ValueError, match="format"):
        cm.FusedColorJitter(0.1)(np.zeros((4, 4, 2), np.uint8))


def test_prefetcher_yields_every_batch_on_npu():
    batches = [(rnd(4, 3, seed=i), torch.tensor([i, i, i, i])) for i in range(3)]
    prefetcher = cm.Prefetcher(batches)
    for want_x, want_y in batches:
        x, y = prefetcher.next()
        assert x.device.type == "npu" and y.device.type == "npu"
        assert torch.equal(x.cpu(), want_x) and torch.equal(y.cpu(), want_y)
    assert prefetcher.next() == (None, None)


@pytest.mark.parametrize("cls, ref_cls, shape", [(cm.FastBatchNorm1d, nn.BatchNorm1d, (8, 5, 3)),
                                                 (cm.FastBatchNorm2d, nn.BatchNorm2d, (8, 5, 3, 2)),
                                                 (cm.FastBatchNorm3d, nn.BatchNorm3d, (4, 5, 2, 3, 2)),
                                                 (cm.FastSyncBatchNorm, nn.BatchNorm2d, (8, 5, 3, 2))])
def test_fast_batchnorm_equals_torch_with_int32_counter(cls, ref_cls, shape):
    fast, ref = cls(5).to(NPU), ref_cls(5)
    assert fast.num_batches_tracked.dtype == torch.int32
    x = rnd(*shape, seed=181)
    a = x.clone().to(NPU).requires_grad_()
    r = x.clone().requires_grad_()
    for _ in range(2):
        out, want = fast(a), ref(r)
    assert_close(out.detach().cpu(), want.detach(), atol=1e-5, rtol=1e-5)
    assert_close(fast.running_var.cpu(), ref.running_var)
    assert fast.num_batches_tracked.item() == 2 and fast.num_batches_tracked.dtype == torch.int32
    out.sum().backward()
    want.sum().backward()
    assert_close(a.grad.cpu(), r.grad, atol=1e-5, rtol=1e-4)
    fast.load_state_dict(ref.state_dict())  # int64 counter of a torch checkpoint stays int32
    assert fast.num_batches_tracked.dtype == torch.int32
    if cls is not cm.FastSyncBatchNorm:
        with pytest.raises(ValueError, match="expected"):
            fast(torch.zeros(2, 5, *([1] * (len(shape) - 1))).to(NPU))


# --- modules: quantised layers ---------------------------------------------------------------

def rand_int(shape, low, high, seed, dtype=torch.int8):
    return torch.randint(low, high, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("output_dtype", [None, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cls", ["LinearQuant", "LinearA8W8Quant"])
def test_linear_quant_int8(cls, output_dtype):
    x, w = rand_int((3, 16), -8, 8, 1), rand_int((5, 16), -8, 8, 2)
    scale, offset = rnd(5, seed=3, low=0.01, high=0.05), rnd(5, seed=4)
    bias = rand_int((5,), -20, 20, 5, torch.int32)
    if cls == "LinearQuant":
        model = cm.LinearQuant(16, 5, bias=True, offset=output_dtype is None, output_dtype=output_dtype)
    else:
        model = cm.LinearA8W8Quant(16, 5, bias=True, offset=output_dtype is None, output_dtype=output_dtype)
    model = model.to(NPU)
    model.weight.data, model.scale.data, model.bias.data = w.to(NPU), scale.to(NPU), bias.to(NPU)
    if output_dtype is None:
        model.offset.data = offset.to(NPU)
    out = model(x.to(NPU))
    acc = (x.long() @ w.long().t() + bias.long()).float() * scale
    if output_dtype is None:
        want = torch.round(acc + offset).clamp(-128, 127).to(torch.int8)
        assert out.dtype == torch.int8 and torch.equal(out.cpu(), want)
    else:
        assert out.dtype == output_dtype
        assert_close(out.cpu().float(), acc.to(output_dtype).float())


def test_linear_quant_int4_packed_and_errors():
    x4, w4 = rand_int((2, 16), -8, 8, 6), rand_int((3, 16), -8, 8, 7)

    def pack(t):  # eight signed nibbles per int32, lowest first
        nib = (t.to(torch.int64) & 0xF).view(t.shape[0], -1, 8)
        word = (nib << (torch.arange(8) * 4)).sum(-1)
        return torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)

    model = cm.LinearQuant(2, 3, bias=False, output_dtype=torch.float16).to(NPU)
    model.weight.data, model.scale.data = pack(w4).to(NPU), torch.tensor([0.5]).to(NPU)
    out = model(pack(x4).to(NPU))
    assert_close(out.cpu(), ((x4.long() @ w4.long().t()).float() * 0.5).half())
    with pytest.raises(ValueError, match="both torch.int32 or both torch.int8"):
        model(x4.to(NPU))
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        bad = cm.LinearQuant(16, 3, bias=False, output_dtype=torch.int32)
        bad.weight.data, bad.scale.data = w4, torch.ones(1)
        bad(x4)


def test_linear_weight_quant():
    x = rnd(4, 32, seed=191, dtype=torch.float16)
    w = rand_int((32, 6), -5, 5, 192)
    scale, offset, bias = rnd(6, seed=193, dtype=torch.float16), rnd(6, seed=194, dtype=torch.float16), rnd(6, seed=195)
    model = cm.LinearWeightQuant(32, 6, bias=True, device=torch.device(NPU), antiquant_offset=True)
    model.weight.data, model.antiquant_scale.data = w.to(NPU), scale.to(NPU)
    model.antiquant_offset.data, model.bias.data = offset.to(NPU), bias.to(NPU)
    out = model(x.to(NPU))
    want = x.float() @ ((w.half() + offset) * scale).float() + bias  # dequantised in x's dtype
    assert out.dtype == torch.float16
    assert_close(out.cpu().float(), want.half().float(), atol=1e-2, rtol=1e-2)
    grouped = cm.LinearWeightQuant(32, 6, bias=False, antiquant_group_size=8)
    group_scale = rnd(4, 6, seed=196)
    grouped.weight.data, grouped.antiquant_scale.data = w, group_scale
    want = x.float() @ (w.float() * group_scale.repeat_interleave(8, 0))
    assert_close(grouped(x.float()), want, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="in_features"):
        grouped(x.float()[:, :16])
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        cm.LinearWeightQuant(32, 6, weight_dtype=torch.float8_e4m3fn)


def test_quant_conv2d():
    x, w = rand_int((1, 2, 6, 6), -4, 4, 201), rand_int((3, 2, 3, 3), -4, 4, 202)
    bias, scale = rand_int((3,), -10, 10, 203, torch.int32), rnd(3, seed=204, low=0.1, high=0.2)
    model = cm.QuantConv2d(2, 3, 3, torch.float16, padding=1).to(NPU)
    model.weight.data, model.bias.data = w.to(NPU), bias.to(NPU)
    model.scale.data = scale.view(torch.int32).to(torch.int64).to(NPU)  # npu_trans_quant_param's int64 form
    out = model(x.to(NPU))
    want = (F.conv2d(x.double(), w.double(), bias.double(), padding=1).float() * scale.view(1, 3, 1, 1)).half()
    assert out.dtype == torch.float16 and out.shape == (1, 3, 6, 6)
    assert_close(out.cpu(), want)
    model.scale.data = scale.to(NPU)  # float32 scales work as they are
    assert_close(model(x.to(NPU)).cpu(), want)
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        cm.QuantConv2d(2, 3, 3, torch.int8)
    with pytest.raises(ValueError, match="int8"):
        model(x.float().to(NPU))


# --- modules: MultiheadAttention --------------------------------------------------------------

def test_multihead_attention_equals_formula():
    torch.manual_seed(0)
    bsz, tgt, src, embed, heads = 2, 5, 7, 16, 4
    model = cm.MultiheadAttention(embed, heads, dropout=0.1, encoder_decoder_attention=True).eval()
    q, k, v = rnd(bsz * tgt, embed, seed=211), rnd(bsz * src, embed, seed=212), rnd(bsz * src, embed, seed=213)
    mask = torch.where(rnd(bsz, heads, tgt, src, seed=214) > 1, -10000.0, 0.0)
    dev = model.to(NPU)
    out, weights = dev(q.to(NPU), k.to(NPU), v.to(NPU), bsz, tgt, src, mask.to(NPU))
    assert weights is None and out.shape == (bsz * tgt, embed)
    # the same attention through torch.nn.functional.multi_head_attention_forward (seq-first layout)
    cpu = model.cpu()
    in_w = torch.cat([cpu.q_proj.weight, cpu.k_proj.weight, cpu.v_proj.weight])
    in_b = torch.cat([cpu.q_proj.bias, cpu.k_proj.bias, cpu.v_proj.bias])
    ref, _ = F.multi_head_attention_forward(
        q.view(bsz, tgt, embed).transpose(0, 1), k.view(bsz, src, embed).transpose(0, 1),
        v.view(bsz, src, embed).transpose(0, 1), embed, heads, in_w, in_b, None, None, False, 0.0,
        cpu.out_proj.weight, cpu.out_proj.bias, training=False, need_weights=False,
        attn_mask=mask.reshape(bsz * heads, tgt, src))
    assert_close(out.detach().cpu(), ref.transpose(0, 1).reshape(bsz * tgt, embed).detach(), atol=1e-5, rtol=1e-4)
    out.sum().backward()
    assert dev.q_proj.weight.grad is not None
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        cm.MultiheadAttention(embed, heads, add_bias_kv=True)
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        dev(q.to(NPU), k.to(NPU), v.to(NPU), bsz, tgt, src, attn_mask=mask.to(NPU))
    with pytest.raises(ValueError, match="divisible"):
        cm.MultiheadAttention(10, 3)


def test_deprecated_torch_nn_names_hand_over_to_contrib():
    from torch_npu.contrib.function import dropout_with_byte_mask
    from torch_npu.contrib.module import DropoutWithByteMask
    with pytest.warns(DeprecationWarning, match="torch.nn.DropoutWithByteMask is deprecated"):
        module = torch.nn.DropoutWithByteMask(0.1)
    assert isinstance(module, DropoutWithByteMask) and module.p == 0.1
    x = torch.rand(4, 8).npu()
    module.eval()
    assert torch.equal(module(x).cpu(), x.cpu())  # eval: identity
    with pytest.warns(DeprecationWarning, match="torch.nn.functional.dropout_with_byte_mask is deprecated"):
        out = torch.nn.functional.dropout_with_byte_mask(x, p=0.0, training=True)
    assert torch.equal(out.cpu(), dropout_with_byte_mask(x, p=0.0, training=True).cpu())
