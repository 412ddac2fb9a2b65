"""torch_npu.contrib.function.nms: npu_multiclass_nms and npu_batched_multiclass_nms against
a per-class greedy loop."""

import pytest
import torch
from torch.testing import assert_close

from torch_npu.contrib import function as cf

from contrib.inputs import NPU, random_boxes, ref_iou, rnd


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
