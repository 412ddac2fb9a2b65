"""torch_npu.op_plugin.rotated_boxes: rotated overlaps and IoU against a sampled area,
exact cases, and the rotated box coder against real torch_npu's values."""

import math

import pytest
import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen


def polygon_area_reference(b1, b2, samples=400):
    """Intersection area of two xywht boxes by counting grid points (coarse, independent)."""
    def inside(px, py, b):
        x, y, w, h, t = b.tolist()
        c, s = math.cos(math.radians(t)), math.sin(math.radians(t))
        u = (px - x) * c + (py - y) * s
        v = -(px - x) * s + (py - y) * c
        return (u.abs() <= w / 2) & (v.abs() <= h / 2)
    r = float(max(b1[2:4].max(), b2[2:4].max()))
    cx, cy = float(b1[0]), float(b1[1])
    lin = torch.linspace(-r, r, samples, dtype=torch.float64)
    py, px = torch.meshgrid(lin + cy, lin + cx, indexing="ij")
    cell = (2 * r / (samples - 1)) ** 2
    return float((inside(px, py, b1) & inside(px, py, b2)).sum()) * cell


def rboxes(n, seed):
    g = gen(seed)
    xy = torch.rand(n, 2, generator=g) * 6
    wh = torch.rand(n, 2, generator=g) * 4 + 1
    t = torch.rand(n, 1, generator=g) * 180 - 90
    return torch.cat([xy, wh, t], 1)


def test_rotated_overlaps_and_iou_against_sampling():
    a, b = rboxes(4, 40)[None], rboxes(3, 41)[None]
    over = torch_npu.npu_rotated_overlaps(a.npu(), b.npu())
    assert over.shape == (1, 4, 3)
    ref = torch.tensor([[polygon_area_reference(a[0, i].double(), b[0, j].double()) for j in range(3)]
                        for i in range(4)], dtype=torch.float64)
    assert_close(over[0].cpu().double(), ref, atol=0.1, rtol=0.03)
    iou = torch_npu.npu_rotated_iou(a.npu(), b.npu())
    area_a, area_b = a[0, :, 2] * a[0, :, 3], b[0, :, 2] * b[0, :, 3]
    assert_close(iou[0].cpu(), over[0].cpu() / (area_a[:, None] + area_b[None] - over[0].cpu()))
    iof = torch_npu.npu_rotated_iou(a.npu(), b.npu(), mode=1)
    assert_close(iof[0].cpu(), over[0].cpu() / area_a[:, None])


def test_rotated_iou_exact_cases_and_trans():
    sq = torch.tensor([[[0.0, 0, 2, 2, 0]]])
    # Same square turned 45 degrees: an octagon of area 8 (sqrt 2 - 1).
    turned = torch.tensor([[[0.0, 0, 2, 2, 45]]])
    over = torch_npu.npu_rotated_overlaps(sq.npu(), turned.npu())
    assert_close(over.cpu(), torch.tensor([[[8 * (math.sqrt(2) - 1)]]]))
    assert_close(torch_npu.npu_rotated_iou(sq.npu(), sq.npu()).cpu(), torch.ones(1, 1, 1))
    # xyxyt (trans, for both inputs): (x1, y1, x2, y2, angle) is the same box as its centre form.
    corners = torch.tensor([[[-1.0, -1, 1, 1, 30]]])
    turned_corners = torch.tensor([[[-1.0, -1, 1, 1, 45]]])
    assert_close(torch_npu.npu_rotated_iou(corners.npu(), turned_corners.npu(), trans=True).cpu(),
                 torch_npu.npu_rotated_iou(torch.tensor([[[0.0, 0, 2, 2, 30]]]).npu(), turned.npu()).cpu())
    # Disjoint boxes.
    far = torch.tensor([[[10.0, 10, 2, 2, 10]]])
    assert torch_npu.npu_rotated_iou(sq.npu(), far.npu()).cpu().item() == 0


def test_rotated_iou_aligned_and_bad_input():
    a, b = rboxes(5, 42)[None], rboxes(5, 43)[None]
    cross = torch_npu.npu_rotated_iou(a.npu(), b.npu())
    aligned = torch_npu.npu_rotated_iou(a.npu(), b.npu(), is_cross=False)
    assert_close(aligned.cpu(), torch.diagonal(cross.cpu(), dim1=1, dim2=2))
    with pytest.raises(RuntimeError, match=r"\(B, N, 5\) and \(B, K, 5\)"):
        torch_npu.npu_rotated_iou(a[0].npu(), b.npu())
    with pytest.raises(RuntimeError, match="mode should be 0"):
        torch_npu.npu_rotated_iou(a.npu(), b.npu(), mode=2)


@pytest.mark.parametrize("case", [
    # real torch_npu's test_rotated_box.py: anchors, gt / deltas, expected (fp32 and fp16)
    ("encode", torch.float32, [44.2877, 9.1412, 88.7575, 25.8879, 64.8047],
     [39.1763, 0.9838, 78.1028, 29.5997, 51.5907], [-0.1773, -0.1327, -0.1331, 0.5358, -0.8643]),
    ("decode", torch.float32, [32.1855, 41.9922, 64.1435, 62.5325, 34.607],
     [1.8725, -1.8915, 0.2395, -0.4622, -34.6539], [87.70366, 6.9412346, 128.31055, 19.879467, -88.313515]),
    ("encode", torch.float16, [30.69, 32.6, 45.94, 59.88, -44.53], [30.44, 18.72, 33.22, 45.56, 8.5],
     [-0.4253, -0.5166, -1.702, -0.0162, 1.133]),
    ("decode", torch.float16, [4.137, 33.72, 29.4, 54.06, 41.28], [0.0244, -1.992, 0.2109, 0.315, -37.25],
     [1.786, -10.58, 33.0, 17.3, -88.44]),
])
def test_rotated_box_coder_matches_real_torch_npu(case):
    kind, dtype, anchor, other, expect = case
    a = torch.tensor(anchor, dtype=dtype).reshape(1, 5, 1).npu()
    o = torch.tensor(other, dtype=dtype).reshape(1, 5, 1).npu()
    op = torch_npu.npu_rotated_box_encode if kind == "encode" else torch_npu.npu_rotated_box_decode
    got = op(a, o, torch.ones(5, dtype=dtype).npu())
    assert got.shape == (1, 5, 1) and got.dtype == dtype
    assert_close(got.cpu().flatten().float(), torch.tensor(expect), rtol=1e-3, atol=1e-3)


def test_rotated_box_decode_inverts_encode_with_weights():
    g = gen(70)
    xy = torch.rand(2, 2, 6, generator=g) * 50
    wh = torch.rand(2, 2, 6, generator=g) * 20 + 1
    t = torch.rand(2, 1, 6, generator=g) * 170 - 85
    anchors = torch.cat([xy, xy + wh, t], 1).double()
    gts = torch.cat([xy + 3, xy + 3 + wh * 1.5, t * 0.5], 1).double()
    weight = torch.tensor([10.0, 10.0, 5.0, 5.0, 2.0]).double()
    deltas = torch_npu.npu_rotated_box_encode(anchors.npu(), gts.npu(), weight.npu())
    # Plain formula on cpu: centre deltas over the anchor size, log size ratio, tangent difference, times weight.
    c = lambda b: ((b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1],
                   torch.tan(torch.deg2rad(b[:, 4])))
    ax, ay, aw, ah, at = c(anchors)
    gx, gy, gw, gh, gt = c(gts)
    ref = torch.stack([(gx - ax) / aw, (gy - ay) / ah, (gw / aw).log(), (gh / ah).log(), gt - at], 1)
    assert_close(deltas.cpu(), ref * weight.reshape(1, 5, 1))
    back = torch_npu.npu_rotated_box_decode(anchors.npu(), deltas, weight.npu())
    assert_close(back.cpu(), gts)
    with pytest.raises(RuntimeError, match=r"should have shape \(B, 5, N\)"):
        torch_npu.npu_rotated_box_encode(anchors[0].npu(), gts.npu(), weight.npu())
