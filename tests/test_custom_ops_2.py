"""torch_npu's quantised matmuls, IFMR, the float-status operators, rotated
boxes, the NMS variants, npu_multi_head_attention and npu_lstm / npu_gru:
each on npu against a plain-PyTorch formula on cpu (or against real
torch_npu's expected values), gradients where the real operator has a
backward, and the argument checks."""

import math

import pytest
import torch
import torch.nn.functional as F
import torch_npu
from torch.testing import assert_close


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randint8(*shape, seed=0):
    return torch.randint(-128, 128, shape, generator=gen(seed), dtype=torch.int8)


def pack_int4(x):
    """(..., 8 m) int8 in [-8, 7] -> (..., m) int32, lowest nibble first."""
    nib = (x.to(torch.int64) & 0xF).reshape(*x.shape[:-1], -1, 8)
    word = (nib << torch.arange(0, 32, 4)).sum(-1)
    return torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)


# --- npu_quant_matmul -----------------------------------------------------------------

def qmm_reference(x1, x2, scale, offset=None, pertoken=None, bias=None, out=None):
    acc = x1.to(torch.int64) @ x2.to(torch.int64)  # exact int accumulation
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + bias
    y = acc.float() * scale
    if pertoken is not None:
        y = y * pertoken[:, None]
    if bias is not None and bias.dtype != torch.int32:
        y = y + bias.float()
    if offset is not None:
        y = y + offset
    if out in (None, torch.int8):
        return torch.round(y).clamp(-128, 127).to(torch.int8)
    return y.to(out)


@pytest.mark.parametrize("out", [None, torch.int8, torch.float16, torch.bfloat16])
def test_quant_matmul_matches_integer_formula(out):
    x1, x2 = randint8(5, 64, seed=1), randint8(64, 7, seed=2)
    scale = torch.rand(7, generator=gen(3)) * 1e-3
    bias = torch.randint(-1000, 1000, (7,), generator=gen(4), dtype=torch.int32)
    offset = torch.rand(7, generator=gen(5)) * 4 if out in (None, torch.int8) else None
    got = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), offset=None if offset is None else offset.npu(),
                                     bias=bias.npu(), output_dtype=out)
    assert got.device.type == "npu" and got.dtype == (out or torch.int8)
    assert_close(got.cpu(), qmm_reference(x1, x2, scale, offset, bias=bias, out=out))


def test_quant_matmul_pertoken_float_bias_batched_and_int64_scale():
    x1, x2 = randint8(2, 4, 32, seed=6), randint8(32, 8, seed=7)
    scale = torch.rand(8, generator=gen(8)) * 1e-2
    pertoken = torch.rand(4, generator=gen(9))
    bias = torch.randn(8, generator=gen(10)).to(torch.bfloat16)
    got = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), pertoken_scale=pertoken.npu(),
                                     bias=bias.npu(), output_dtype=torch.bfloat16)
    ref = torch.stack([qmm_reference(x1[i], x2, scale, pertoken=pertoken, bias=bias, out=torch.bfloat16)
                       for i in range(2)])
    assert_close(got.cpu(), ref)
    # npu_trans_quant_param's int64 form: the float32 bits in the low word.
    scale64 = scale.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    got = torch_npu.npu_quant_matmul(x1[0].npu(), x2.npu(), scale64.npu(), output_dtype=torch.float16)
    assert_close(got.cpu(), qmm_reference(x1[0], x2, scale, out=torch.float16))


def test_quant_matmul_int4_packed():
    x1 = torch.randint(-8, 8, (3, 16), generator=gen(11), dtype=torch.int8)
    x2 = torch.randint(-8, 8, (16, 8), generator=gen(12), dtype=torch.int8)
    scale = torch.tensor([0.05])
    # x2 (k, n) packs along n, x1 (m, k) along k.
    got = torch_npu.npu_quant_matmul(pack_int4(x1).npu(), pack_int4(x2).npu(), scale.npu(),
                                     output_dtype=torch.float16)
    assert_close(got.cpu(), qmm_reference(x1, x2, scale, out=torch.float16))
    # x2 as (k // 8, n): the transpose of a contiguous (n, k // 8), packed along k.
    x2_t = pack_int4(x2.t().contiguous()).t()
    assert x2_t.shape == (2, 8)
    got = torch_npu.npu_quant_matmul(pack_int4(x1).npu(), x2_t.npu(), scale.npu(), output_dtype=torch.float16)
    assert_close(got.cpu(), qmm_reference(x1, x2, scale, out=torch.float16))


def test_quant_matmul_bad_input():
    x1, x2, s = randint8(2, 4).npu(), randint8(4, 3).npu(), torch.ones(3).npu()
    with pytest.raises(RuntimeError, match="both int8 or both int32"):
        torch_npu.npu_quant_matmul(x1.float(), x2, s)
    with pytest.raises(RuntimeError, match="k dimension"):
        torch_npu.npu_quant_matmul(x1, randint8(5, 3).npu(), s)
    with pytest.raises(RuntimeError, match="scale should have shape"):
        torch_npu.npu_quant_matmul(x1, x2, torch.ones(2).npu())
    with pytest.raises(RuntimeError, match="offset is only supported"):
        torch_npu.npu_quant_matmul(x1, x2, s, offset=s, output_dtype=torch.float16)
    for dtype in (torch.float32, torch.int32):
        with pytest.raises(RuntimeError, match="not supported on vNPU"):
            torch_npu.npu_quant_matmul(x1, x2, s, output_dtype=dtype)


# --- npu_weight_quant_batchmatmul ---------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_weight_quant_batchmatmul_per_channel(dtype):
    x = torch.randn(3, 5, 64, generator=gen(20)).to(dtype)
    w = randint8(64, 16, seed=21)
    scale = (torch.rand(16, generator=gen(22)) * 0.01).to(dtype)
    offset = torch.randn(16, generator=gen(23)).to(dtype)
    bias = torch.randn(16, generator=gen(24)).to(dtype)
    got = torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.npu(), scale.npu(), antiquant_offset=offset.npu(),
                                                 bias=bias.npu())
    wf = (w.to(dtype) + offset) * scale
    ref = (x.float() @ wf.float() + bias.float()).to(dtype)
    assert got.dtype == dtype
    assert_close(got.cpu(), ref)


def test_weight_quant_batchmatmul_per_group_and_requant():
    k, n, g = 96, 8, 32
    x = torch.randn(4, k, generator=gen(25)).half()
    w = randint8(k, n, seed=26)
    scale = (torch.rand(k // g, n, generator=gen(27)) * 0.01).half()
    wf = w.half() * scale.repeat_interleave(g, 0)
    got = torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.npu(), scale.npu(), antiquant_group_size=g)
    assert_close(got.cpu(), (x.float() @ wf.float()).half())
    qs = torch.full((n,), 4.0)
    got = torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.npu(), scale.npu(), quant_scale=qs.npu(),
                                                 antiquant_group_size=g)
    assert got.dtype == torch.int8
    assert_close(got.cpu(), torch.round((x.float() @ wf.float()) * 4).clamp(-128, 127).to(torch.int8))


def test_weight_quant_batchmatmul_bad_input():
    x, w, s = torch.randn(2, 64).half().npu(), randint8(64, 4).npu(), torch.ones(4).half().npu()
    with pytest.raises(RuntimeError, match="last dimension of x"):
        torch_npu.npu_weight_quant_batchmatmul(torch.randn(2, 32).half().npu(), w, s)
    with pytest.raises(RuntimeError, match="antiquant_group_size should be"):
        torch_npu.npu_weight_quant_batchmatmul(x, w, s, antiquant_group_size=20)
    with pytest.raises(RuntimeError, match="should have shape \\(2, 4\\)"):
        torch_npu.npu_weight_quant_batchmatmul(x, w, torch.ones(3, 4).half().npu(), antiquant_group_size=32)


# --- npu_ifmr ---------------------------------------------------------------------------

def ifmr_reference(x, dmin, dmax, cumsum, bins, min_p, max_p, start, end, step, with_offset):
    """Real torch_npu's test formula, one search step at a time."""
    cdf = cumsum.float() / x.numel()
    max_init = (cdf < max_p).sum() / bins * (dmax - dmin) + dmin
    min_init = (cdf < 1 - min_p).sum() / bins * (dmax - dmin) + dmin
    steps = torch.arange(start, end, step)
    best = None
    for f in steps.tolist():
        if with_offset:
            hi, lo = max(float(max_init), 0.0) * f, min(float(min_init), 0.0)
            scale = (hi - lo) / 255
            scale = 1.0 if scale < 1.192092896e-07 else scale
            offset = -(round(lo / scale) + 128)
        else:
            scale = max(abs(float(max_init)), abs(float(min_init))) * f / 127
            offset = 0.0
        s32 = torch.tensor(scale, dtype=torch.float32)
        q = (torch.round(x / s32) + offset).clamp(-128, 127)
        loss = float(((q - offset) * s32 - x).square().sum())
        if best is None or loss < best[0]:
            best = (loss, float(s32), float(offset))
    return best[1], best[2]


@pytest.mark.parametrize("with_offset", [False, True])
def test_ifmr_matches_search(with_offset):
    x = torch.rand(2, 2, 4, 4, generator=gen(30)) * 2 - 0.7
    dmin, dmax = x.min().reshape(1), x.max().reshape(1)
    cumsum = torch.cumsum(torch.histc(x, bins=128, min=float(dmin), max=float(dmax)), 0).int()
    scale, offset = torch_npu.npu_ifmr(x.npu(), dmin.npu(), dmax.npu(), cumsum.npu(), 0.999999, 0.999999,
                                       0.7, 1.3, 0.01, with_offset)
    assert scale.shape == (1,) and offset.shape == (1,)
    ref_scale, ref_offset = ifmr_reference(x, dmin, dmax, cumsum, 128, 0.999999, 0.999999, 0.7, 1.3, 0.01,
                                           with_offset)
    assert_close(scale.cpu().item(), ref_scale, rtol=1e-5, atol=1e-7)
    assert offset.cpu().item() == ref_offset


# --- float status -------------------------------------------------------------------------

def test_float_status_reports_zeros():
    # vNPU keeps no overflow register: the status is documented as always zero.
    y = torch.tensor([40000.0], dtype=torch.float16).npu()
    assert torch.isinf(y + y).all()
    status = torch_npu.npu_alloc_float_status(torch.zeros(8).npu())
    assert status.shape == (8,) and status.dtype == torch.float32 and status.device.type == "npu"
    got = torch_npu.npu_get_float_status(status)
    assert_close(got.cpu(), torch.zeros(8))
    assert_close(torch_npu.npu_clear_float_status(got).cpu(), torch.zeros(8))


# --- rotated boxes ------------------------------------------------------------------------

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


# --- NMS ----------------------------------------------------------------------------------

def test_nms_rotated_matches_real_torch_npu_test():
    # Real torch_npu's test_npu_nms_rotated.py data and expected result (mode 1, xyxyt).
    det = torch.tensor([[1038.2, 316.57, 1155.6, 443.03, 2.3674], [1150.3, 305.98, 1260.2, 434.56, 0.32729],
                        [1150.8, 306.52, 1260.7, 434.72, 0.51713], [1151.8, 307.81, 1262.2, 434.48, 0.39718],
                        [1174.8, 302.02, 1285.9, 439.15, 1.8112], [1171.1, 304.80, 1286.8, 435.51, 2.1171],
                        [1167.3, 306.75, 1288.9, 431.94, 2.5968], [1274.1, 301.81, 1382.3, 430.36, 2.0379],
                        [1274.1, 302.86, 1383.6, 429.40, 2.2072], [1273.3, 303.82, 1385.5, 428.46, 2.0921],
                        [1293.5, 305.17, 1396.1, 431.37, 2.9583], [1407.6, 321.73, 1493.0, 427.14, 2.6099],
                        [1409.7, 324.96, 1493.4, 426.51, 3.0967], [1409.7, 325.69, 1493.5, 426.32, 2.5553],
                        [1027.9, 318.83, 1141.2, 446.46, 1.2030], [1027.5, 317.76, 1140.8, 446.41, 1.2732],
                        [1028.9, 316.94, 1140.7, 445.10, 0.94897], [1037.2, 312.33, 1147.7, 445.21, 1.4125],
                        [1037.0, 315.64, 1148.7, 443.17, 1.6109], [1036.7, 316.82, 1151.0, 440.20, 1.4112]])
    score = torch.tensor([0.9910, 0.9854, 0.9972, 0.9930, 0.4282, 0.5092, 0.6532, 0.9965, 0.9989, 0.9976,
                          0.3144, 0.9874, 0.9980, 0.9967, 0.9698, 0.9824, 0.9474, 0.9856, 0.9964, 0.9926])
    idx, num = torch_npu.npu_nms_rotated(det.npu(), score.npu(), 0.2, 0, -1, 1)
    assert idx.dtype == torch.int32 and idx.device.type == "npu"
    assert idx.cpu().tolist() == [8, 12, 2, 18] and num.cpu().tolist() == [4]
    idx, num = torch_npu.npu_nms_rotated(det.npu(), score.npu(), 0.2, 0, 2, 1)
    assert idx.cpu().tolist() == [8, 12] and num.cpu().tolist() == [2]


def nms_reference(boxes, scores, thr):
    keep = []
    for i in torch.argsort(scores, descending=True, stable=True).tolist():
        if all(float(torch_npu.npu_iou(boxes[i:i + 1], boxes[j:j + 1])) <= thr for j in keep):
            keep.append(i)
    return keep


def test_nms_rotated_axis_aligned_equals_plain_nms():
    xy = torch.rand(12, 2, generator=gen(50)) * 5
    wh = torch.rand(12, 2, generator=gen(51)) * 3 + 1
    xyxy = torch.cat([xy, xy + wh], 1)
    scores = torch.rand(12, generator=gen(52))
    dets = torch.cat([xy + wh / 2, wh, torch.zeros(12, 1)], 1)
    idx, num = torch_npu.npu_nms_rotated(dets.npu(), scores.npu(), 0.3)
    ref = nms_reference(xyxy, scores, 0.3)
    assert idx.cpu().tolist() == ref and num.item() == len(ref)


def test_batch_nms_per_class_then_total():
    g = gen(60)
    xy = torch.rand(2, 10, 3, 2, generator=g) * 5
    boxes = torch.cat([xy, xy + torch.rand(2, 10, 3, 2, generator=g) * 3 + 1], -1)
    scores = torch.rand(2, 10, 3, generator=g)
    nb, ns, nc, nn = torch_npu.npu_batch_nms(boxes.npu(), scores.npu(), 0.2, 0.4, 4, 7)
    assert nb.shape == (2, 7, 4) and ns.shape == (2, 7) and nc.shape == (2, 7) and nn.dtype == torch.int32
    for n in range(2):
        found = []
        for c in range(3):
            s = scores[n, :, c]
            cand = [i for i in nms_reference(boxes[n, :, c], torch.where(s > 0.2, s, -1.0), 0.4) if s[i] > 0.2][:4]
            found += [(float(s[i]), c, i) for i in cand]
        found = sorted(found, key=lambda t: (-t[0], t[1], t[2]))[:7]
        assert nn[n].item() == len(found)
        for j, (s, c, i) in enumerate(found):
            assert_close(ns[n, j].cpu().item(), s)
            assert nc[n, j].cpu().item() == c
            assert_close(nb[n, j].cpu(), boxes[n, i, c])
        assert (ns[n, len(found):].cpu() == 0).all()


def test_batch_nms_shared_boxes_transpose_and_checks():
    g = gen(61)
    xy = torch.rand(1, 6, 1, 2, generator=g) * 4
    boxes = torch.cat([xy, xy + 2], -1)
    scores = torch.rand(1, 6, 2, generator=g)
    plain = torch_npu.npu_batch_nms(boxes.npu(), scores.npu(), 0.0, 0.5, 6, 12)
    transposed = torch_npu.npu_batch_nms(boxes.permute(0, 2, 3, 1).npu(), scores.npu(), 0.0, 0.5, 6, 12,
                                         transpose_box=True)
    for a, b in zip(plain, transposed):
        assert_close(a.cpu(), b.cpu())
    with pytest.raises(RuntimeError, match="change_coordinate_frame=True is not supported on vNPU"):
        torch_npu.npu_batch_nms(boxes.npu(), scores.npu(), 0.0, 0.5, 6, 12, change_coordinate_frame=True)
    with pytest.raises(RuntimeError, match="scores should have shape"):
        torch_npu.npu_batch_nms(boxes.npu(), scores[:, :5].npu(), 0.0, 0.5, 6, 12)


# --- rotated box coder --------------------------------------------------------------------

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


# --- npu_multi_head_attention ---------------------------------------------------------------

def mha_inputs(batch=2, heads=4, dim=8, tgt=5, src=6, seed=80):
    g = gen(seed)
    e = heads * dim
    t = lambda *s: torch.randn(*s, generator=g) * 0.5
    return dict(query=t(batch * tgt, e), key=t(batch * src, e), value=t(batch * src, e),
                query_weight=t(e, e), key_weight=t(e, e), value_weight=t(e, e),
                attn_mask=t(batch, heads, tgt, src), out_proj_weight=t(e, e), query_bias=t(e), key_bias=t(e),
                value_bias=t(e), out_proj_bias=t(e)), (batch, heads, dim, tgt, src)


def call_mha(ins, dims, device, dropout_mask=None, p=0.0, softmax_use_float=True):
    batch, heads, dim, tgt, src = dims
    a = {k: v.to(device) for k, v in ins.items()}
    return torch_npu.npu_multi_head_attention(
        a["query"], a["key"], a["value"], a["query_weight"], a["key_weight"], a["value_weight"], a["attn_mask"],
        a["out_proj_weight"], a["query_bias"], a["key_bias"], a["value_bias"], a["out_proj_bias"],
        None if dropout_mask is None else dropout_mask.to(device), heads, dim, src, tgt, p, softmax_use_float)


def test_multi_head_attention_matches_torch_mha():
    ins, dims = mha_inputs()
    batch, heads, dim, tgt, src = dims
    y, mask, q, k, v, scores, probs, context = call_mha(ins, dims, "npu")
    # torch's own multi-head attention (sequence-first layout, per-head additive mask).
    seq = lambda x, n: x.view(batch, n, -1).transpose(0, 1)
    ref, ref_weights = F.multi_head_attention_forward(
        seq(ins["query"], tgt), seq(ins["key"], src), seq(ins["value"], src), heads * dim, heads, None,
        torch.cat([ins["query_bias"], ins["key_bias"], ins["value_bias"]]), None, None, False, 0.0,
        ins["out_proj_weight"], ins["out_proj_bias"], training=False,
        attn_mask=ins["attn_mask"].reshape(batch * heads, tgt, src), use_separate_proj_weight=True,
        q_proj_weight=ins["query_weight"], k_proj_weight=ins["key_weight"], v_proj_weight=ins["value_weight"],
        average_attn_weights=False, need_weights=True)
    assert_close(y.cpu(), ref.transpose(0, 1).reshape(batch * tgt, -1), atol=1e-5, rtol=1e-4)
    assert_close(scores.cpu(), ref_weights, atol=1e-6, rtol=1e-4)
    assert scores.dtype == torch.float32 and mask.dtype == torch.uint8 and bool((mask.cpu() == 1).all())
    assert q.shape == (batch, heads, tgt, dim) and k.shape == (batch, heads, src, dim) and context.shape == y.shape
    assert_close(probs.cpu(), scores.cpu())


def test_multi_head_attention_dropout_mask_and_gradients():
    ins, dims = mha_inputs(seed=81)
    batch, heads, dim, tgt, src = dims
    keep = (torch.rand(batch, heads, tgt, src, generator=gen(82)) > 0.3).to(torch.uint8)
    npu_in = {k: v.npu().requires_grad_() for k, v in ins.items()}
    cpu_in = {k: v.clone().requires_grad_() for k, v in ins.items()}
    outs = [call_mha(a, dims, dev, dropout_mask=keep, p=0.3) for a, dev in ((npu_in, "npu"), (cpu_in, "cpu"))]
    y_npu, y_cpu = outs[0][0], outs[1][0]
    assert_close(y_npu.cpu(), y_cpu.detach(), atol=1e-5, rtol=1e-4)
    assert_close(outs[0][6].cpu(), outs[0][5].cpu() * keep / 0.7)
    g = torch.randn(y_cpu.shape, generator=gen(83))
    y_npu.backward(g.npu())
    y_cpu.backward(g)
    for name in ("query", "key", "value", "query_weight", "attn_mask", "out_proj_bias"):
        assert_close(npu_in[name].grad.cpu(), cpu_in[name].grad, atol=1e-5, rtol=1e-4)
    # A drawn mask: the kept fraction is near 1 - p and probs follow it.
    _, drawn, *_, scores, probs, _ = call_mha(ins, dims, "npu", p=0.5)
    assert 0.3 < drawn.float().mean().item() < 0.7
    assert_close(probs.cpu(), scores.cpu() * drawn.cpu() / 0.5)


def test_multi_head_attention_half_and_bad_input():
    ins, dims = mha_inputs(seed=84)
    half = {k: v.half() for k, v in ins.items()}
    y16 = call_mha(half, dims, "npu", softmax_use_float=True)[0]
    y32 = call_mha({k: v.float() for k, v in half.items()}, dims, "cpu")[0]
    assert y16.dtype == torch.float16
    assert_close(y16.cpu().float(), y32, atol=2e-2, rtol=2e-2)
    batch, heads, dim, tgt, src = dims
    with pytest.raises(RuntimeError, match="not a multiple of tgt_len"):
        call_mha(ins, (batch, heads, dim, tgt + 2, src), "npu")
    with pytest.raises(RuntimeError, match="one keep flag per score"):
        call_mha(ins, dims, "npu", dropout_mask=torch.ones(7, dtype=torch.uint8), p=0.1)


# --- npu_lstm / npu_gru ---------------------------------------------------------------------

@pytest.mark.parametrize("batch_first", [False, True])
def test_lstm_matches_torch_lstm_with_gradients(batch_first):
    steps, batch, isize, hid = 5, 3, 4, 6
    g = gen(90)
    ref = torch.nn.LSTM(isize, hid, batch_first=batch_first)
    with torch.no_grad():
        ref.bias_hh_l0.zero_()  # npu_lstm has one bias
    x = torch.randn((batch, steps, isize) if batch_first else (steps, batch, isize), generator=g)
    h0, c0 = torch.randn(1, batch, hid, generator=g), torch.randn(1, batch, hid, generator=g)
    weight = torch.cat([ref.weight_ih_l0.t(), ref.weight_hh_l0.t()], 0).detach()
    bias = ref.bias_ih_l0.detach()
    xn, wn = x.npu().requires_grad_(), weight.npu().requires_grad_()
    y, h, c, i, j, f, o, tanhc = torch_npu.npu_lstm(xn, wn, bias.npu(), torch.zeros(0).npu(), h0.npu(), c0.npu(),
                                                    True, 1, 0.0, True, False, batch_first, False, False)
    xr = x.clone().requires_grad_()
    y_ref, (h_ref, c_ref) = ref(xr, (h0, c0))
    assert_close(y.cpu(), y_ref.detach(), atol=1e-5, rtol=1e-4)
    last = (slice(None), -1) if batch_first else (-1,)
    assert_close(h[last].cpu(), h_ref[0].detach(), atol=1e-5, rtol=1e-4)
    assert_close(c[last].cpu(), c_ref[0].detach(), atol=1e-5, rtol=1e-4)
    assert_close(tanhc.cpu(), torch.tanh(c.cpu()))
    assert_close(h.cpu(), (o * tanhc).cpu())
    gy = torch.randn(y_ref.shape, generator=g)
    y.backward(gy.npu())
    y_ref.backward(gy)
    assert_close(xn.grad.cpu(), xr.grad, atol=1e-5, rtol=1e-4)
    assert_close(wn.grad.cpu()[:isize], ref.weight_ih_l0.grad.t(), atol=1e-5, rtol=1e-4)


def test_gru_matches_torch_gru_with_gradients():
    steps, batch, isize, hid = 6, 3, 5, 4
    g = gen(91)
    ref = torch.nn.GRU(isize, hid)
    x = torch.randn(steps, batch, isize, generator=g)
    h0 = torch.randn(1, batch, hid, generator=g)
    xn = x.npu().requires_grad_()
    args = [w.detach().npu() for w in (ref.weight_ih_l0.t(), ref.weight_hh_l0.t(), ref.bias_ih_l0, ref.bias_hh_l0)]
    y, out_h, z, r, n, hn = torch_npu.npu_gru(xn, h0.npu(), *args, torch.tensor([steps], dtype=torch.int32).npu(),
                                              has_biases=True, num_layers=1, dropout=0.0, train=True,
                                              bidirectional=False, batch_first=False)
    xr = x.clone().requires_grad_()
    y_ref, h_ref = ref(xr, h0)
    assert_close(y.cpu(), y_ref.detach(), atol=1e-5, rtol=1e-4)
    assert_close(out_h[-1].cpu(), h_ref[0].detach(), atol=1e-5, rtol=1e-4)
    prev = torch.cat([h0, out_h.cpu()[:-1]])
    assert_close(out_h.cpu(), (1 - z.cpu()) * n.cpu() + z.cpu() * prev)
    assert_close(hn.cpu(), prev @ ref.weight_hh_l0.detach()[2 * hid:].t() + ref.bias_hh_l0.detach()[2 * hid:])
    gy = torch.randn(y_ref.shape, generator=g)
    y.backward(gy.npu())
    y_ref.backward(gy)
    assert_close(xn.grad.cpu(), xr.grad, atol=1e-5, rtol=1e-4)


def test_rnn_not_supported_and_checks():
    x, h = torch.zeros(2, 1, 3).npu(), torch.zeros(1, 1, 2).npu()
    w, b = torch.zeros(5, 8).npu(), torch.zeros(8).npu()
    lstm = lambda **kw: torch_npu.npu_lstm(x, kw.get("w", w), b, b, h, h, True, kw.get("layers", 1), 0.0, True,
                                           kw.get("bi", False), False, kw.get("flag_seq", False), False)
    for kw, what in (({"layers": 2}, "num_layers=2"), ({"bi": True}, "bidirectional"),
                     ({"flag_seq": True}, "flag_seq")):
        with pytest.raises(RuntimeError, match=f"{what}.*not supported on vNPU"):
            lstm(**kw)
    with pytest.raises(RuntimeError, match="input_size \\+ hidden = 5 rows"):
        lstm(w=torch.zeros(6, 8).npu())
    wi, wh, bb = torch.zeros(3, 6).npu(), torch.zeros(2, 6).npu(), torch.zeros(6).npu()
    with pytest.raises(RuntimeError, match="seq_length shorter than the input.*not supported on vNPU"):
        torch_npu.npu_gru(x, h, wi, wh, bb, bb, torch.tensor([1]).npu(), True, 1, 0.0, True, False, False)
