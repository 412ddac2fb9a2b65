"""torch_npu.contrib.function.iou: npu_iou/npu_ptiou, npu_giou, npu_diou and npu_ciou against
their formulas and real torch_npu's values, with gradients."""

import math

import pytest
import torch
from torch.testing import assert_close

from torch_npu.contrib import function as cf

from contrib.inputs import NPU, random_boxes, ref_iou, rnd


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
