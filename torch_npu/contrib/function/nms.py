"""Multi-class non-maximum suppression with a fixed-size, zero-padded result.

Real torch_npu runs npu_batch_nms (an Ascend kernel, in float16). Here the
same algorithm is written in ATen operators, per image:

1. drop the background column, multiply by ``score_factors`` if given;
2. per class, keep boxes scoring above ``score_thr`` and suppress, greedily
   in descending score, every box whose IoU with a kept one exceeds ``nms_thr``;
3. of all classes' survivors keep the ``max_num`` best scores, padding with
   zeros to exactly ``max_num`` rows (the NPU preallocates its output).

Like the kernel, boxes and scores are computed in float16. The result is not
differentiable (selection is discrete).
"""

import torch

__all__ = ["npu_multiclass_nms", "npu_batched_multiclass_nms"]


def _pairwise_iou(boxes):
    """IoU matrix of (K, 4) corner boxes; a box with x2 < x1 or y2 < y1 has area 0."""
    x1, y1, x2, y2 = boxes.unbind(-1)
    area = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
    w = (torch.minimum(x2[:, None], x2[None, :]) - torch.maximum(x1[:, None], x1[None, :])).clamp(min=0)
    h = (torch.minimum(y2[:, None], y2[None, :]) - torch.maximum(y1[:, None], y1[None, :])).clamp(min=0)
    inter = w * h
    union = area[:, None] + area[None, :] - inter
    return inter / union.clamp(min=torch.finfo(torch.float32).tiny)


def _greedy_keep(iou, nms_thr):
    """Indices kept by greedy NMS over boxes already sorted by descending score."""
    count = iou.shape[0]
    suppressed = torch.zeros(count, dtype=torch.bool)
    over = (iou > nms_thr).cpu()  # the greedy sweep is sequential: one host copy
    keep = []
    for i in range(count):
        if suppressed[i]:
            continue
        keep.append(i)
        suppressed |= over[i]
    return torch.tensor(keep, dtype=torch.long)


def _nms_one_image(boxes, scores, score_thr, nms_thr, max_num):
    """boxes (n, q, 4) with q == 1 (shared) or q == classes; scores (n, classes)."""
    num_classes = scores.shape[1]
    found_boxes, found_scores, found_labels = [], [], []
    for c in range(num_classes):
        cls_scores = scores[:, c].float()
        cls_boxes = boxes[:, 0 if boxes.shape[1] == 1 else c, :].float()
        candidates = torch.nonzero(cls_scores > score_thr).flatten()
        if candidates.numel() == 0:
            continue
        order = candidates[torch.argsort(cls_scores[candidates], descending=True, stable=True)]
        kept = order[_greedy_keep(_pairwise_iou(cls_boxes[order]), nms_thr).to(order.device)][:max_num]
        found_boxes.append(cls_boxes[kept])
        found_scores.append(cls_scores[kept])
        found_labels.append(torch.full((kept.numel(),), c, dtype=torch.float32, device=kept.device))
    out_boxes = boxes.new_zeros((max_num, 4), dtype=torch.float32)
    out_scores = scores.new_zeros((max_num,), dtype=torch.float32)
    out_labels = scores.new_zeros((max_num,), dtype=torch.float32)
    if found_scores:
        all_scores = torch.cat(found_scores)
        best = torch.argsort(all_scores, descending=True, stable=True)[:max_num]
        n = best.numel()
        out_boxes[:n] = torch.cat(found_boxes)[best]
        out_scores[:n] = all_scores[best]
        out_labels[:n] = torch.cat(found_labels)[best]
    return out_boxes.half(), out_scores.half(), out_labels.half()


def _check_max_num(max_num):
    if not isinstance(max_num, int) or max_num <= 0:
        raise ValueError(f"max_num should be a positive int (the NPU preallocates the output), "
                         f"but got {max_num}")


def npu_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50,
                       score_factors=None):
    """NMS over multi-class boxes of one image (mmdetection's multiclass_nms, fixed size).

    Args:
        multi_bboxes: (n, #class, 4) or (n, 4) corner boxes.
        multi_scores: (n, #class + 1); the last column (background) is ignored.
        score_thr, nms_thr: score and IoU thresholds.
        max_num: rows of the result; fewer detections are zero-padded.
        score_factors: (n,) factors multiplied into the scores first.

    Returns:
        (dets (max_num, 5) as x1, y1, x2, y2, score; labels (max_num,)), float16,
        labels 0-based class indices.
    """
    _check_max_num(max_num)
    if multi_scores.dim() != 2:
        raise ValueError(f"Expected multi_scores of shape (n, #class+1), but got {tuple(multi_scores.shape)}")
    num_boxes = multi_scores.size(0)
    scores = multi_scores[:, :-1]
    if score_factors is not None:
        scores = scores * score_factors[:, None]
    boxes = multi_bboxes.reshape(num_boxes, -1, 4).half()
    dets, det_scores, labels = _nms_one_image(boxes, scores.half(), score_thr, nms_thr, max_num)
    return torch.cat([dets, det_scores[:, None]], -1), labels


def npu_batched_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50,
                               score_factors=None):
    """``npu_multiclass_nms`` for a batch: boxes (bs, n, #class, 4) or (bs, n, 4),
    scores (bs, n, #class + 1); returns dets (bs, max_num, 5) and labels (bs, max_num)."""
    _check_max_num(max_num)
    if multi_scores.dim() != 3:
        raise ValueError(f"Expected multi_scores of shape (bs, n, #class+1), but got "
                         f"{tuple(multi_scores.shape)}")
    batch, num_boxes = multi_scores.shape[:2]
    scores = multi_scores[..., :-1]
    if score_factors is not None:
        scores = scores * score_factors[..., None]
    boxes = multi_bboxes.reshape(batch, num_boxes, -1, 4).half()
    results = [_nms_one_image(boxes[i], scores[i].half(), score_thr, nms_thr, max_num) for i in range(batch)]
    dets = torch.stack([torch.cat([b, s[:, None]], -1) for b, s, _ in results])
    labels = torch.stack([lab for _, _, lab in results])
    return dets, labels
