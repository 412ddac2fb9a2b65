"""torch_npu.contrib.function.bbox_coder: the xyxy/xywh and YOLO box coders against their
formulas and real torch_npu's values, with bad shapes."""

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from torch_npu.contrib import function as cf

from contrib.inputs import NPU, random_boxes


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


def test_bbox_coder_integer_boxes_and_max_shape():
    anchors, gts = random_boxes(6, 51).round(), random_boxes(6, 53).round()
    as_float = cf.npu_bbox_coder_encode_xyxy2xywh(anchors.to(NPU), gts.to(NPU))
    as_int = cf.npu_bbox_coder_encode_xyxy2xywh(anchors.long().to(NPU), gts.long().to(NPU))
    assert as_int.dtype == torch.float32
    assert_close(as_int.cpu(), as_float.cpu())
    decoded = cf.npu_bbox_coder_decode_xywh2xyxy(anchors.int().to(NPU), as_float)
    assert decoded.dtype == torch.float32
    with pytest.raises(ValueError, match="max_shape of two numbers"):
        cf.npu_bbox_coder_decode_xywh2xyxy(anchors, as_float.cpu(), max_shape=(10, 10, 3))
