"""torch_npu.op_plugin.boxes: box coders, the IoU family, anchor flags, grid assignment,
npu_nms_v4, ROI align and PS-ROI pooling, each against a plain-PyTorch formula or loop."""

import math

import pytest
import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import npu, rnd


def boxes(n, seed, size=10.0):
    xy = rnd(n, 2, seed=seed, lo=0, hi=size)
    wh = rnd(n, 2, seed=seed + 100, lo=1, hi=size)
    return torch.cat([xy, xy + wh], 1)


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


def test_bounding_box_encode_of_an_upside_down_box_follows_the_chip():
    # gt's y2 < y1: its height is negative. 910B kernels give log of the
    # negative ratio (NaN); 910A ones the log of the magnitudes.
    from conftest import run_python
    code = """
        import torch, torch_npu
        a = torch.tensor([[3., 4., 5., 6.]]).npu()
        g = torch.tensor([[7., 8., 9., 6.]]).npu()
        print(torch_npu.npu_bounding_box_encode(a, g, 0, 0, 0, 0, 1, 1, 1, 1).cpu()[0, 3].item())
        """
    values = {}
    for chip in ("Ascend910B2", "Ascend910A"):
        proc = run_python(code, VNPU_CHIP=chip)
        assert proc.returncode == 0, proc.stderr[-2000:]
        values[chip] = float(proc.stdout.split()[-1])
    assert math.isnan(values["Ascend910B2"])
    assert values["Ascend910A"] == pytest.approx(math.log(1 / 3), abs=1e-5)  # heights -1 and 3 (+1 pixel)


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
