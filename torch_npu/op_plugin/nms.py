"""Non-maximum suppression beyond npu_nms_v4: npu_nms_rotated (rotated
boxes) and npu_batch_nms (per-class NMS over a batch, TensorFlow's
CombinedNonMaxSuppression).

Greedy NMS is data dependent and sequential: each operator moves the boxes
to the host once, loops in Python, and returns its results on the boxes'
device. A box is suppressed when its IoU with a kept box is greater than
``iou_threshold``; boxes are visited by descending score, ties by index.
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.rotated_boxes import _xywht, rotated_intersection


def _greedy(order, iou_row, limit):
    """Indices kept from ``order``; iou_row(i, kept) gives the IoUs of box i with the kept boxes."""
    keep = []
    for i in order:
        if limit >= 0 and len(keep) >= limit:
            break
        if keep and bool(iou_row(i, keep).any()):
            continue
        keep.append(i)
    return keep


def npu_nms_rotated(dets, scores, iou_threshold, scores_threshold=0, max_output_size=-1, mode=0):
    """(selected indices int32 (M,), M as int32 (1,)) of rotated boxes; dets
    (N, 5) are (x, y, w, h, angle) for mode 0, (x1, y1, x2, y2, angle) for mode 1."""
    fn = "npu_nms_rotated"
    check(dets.dim() == 2 and dets.shape[1] == 5, f"{fn}: dets should have shape (N, 5), got {list(dets.shape)}.")
    check(scores.dim() == 1 and scores.shape[0] == dets.shape[0],
          f"{fn}: scores should have shape ({dets.shape[0]},), got {list(scores.shape)}.")
    check(mode in (0, 1), f"{fn}: mode should be 0 (xywht) or 1 (xyxyt), got {mode}.")
    boxes = _xywht(dets.detach().cpu().double(), mode == 1)
    s = scores.detach().cpu().double()
    area = boxes[:, 2] * boxes[:, 3]

    def iou_row(i, kept):
        k = torch.tensor(kept)
        inter = rotated_intersection(boxes[i].expand(len(kept), 5), boxes[k])
        return inter / (area[i] + area[k] - inter).clamp(min=1e-12) > iou_threshold

    order = [i for i in torch.argsort(s, descending=True, stable=True).tolist() if s[i] > scores_threshold]
    keep = _greedy(order, iou_row, max_output_size)
    return (torch.tensor(keep, dtype=torch.int32, device=dets.device),
            torch.tensor([len(keep)], dtype=torch.int32, device=dets.device))


def _iou_aligned(box, boxes):
    lt = torch.max(box[:2], boxes[:, :2])
    rb = torch.min(box[2:], boxes[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return inter / (area + areas - inter).clamp(min=1e-12)


def npu_batch_nms(boxes, scores, score_threshold, iou_threshold, max_size_per_class, max_total_size,
                  change_coordinate_frame=False, transpose_box=False):
    """Per image: NMS per class (at most max_size_per_class kept each), then
    the best max_total_size over all classes by score. Returns nmsed_boxes
    (B, max_total_size, 4), nmsed_scores and nmsed_classes (B, max_total_size,
    zero past the valid entries) and nmsed_num (B,) int32. boxes are (B, N, q, 4)
    with q = 1 (shared by every class) or q = num_classes; transpose_box takes
    them as (B, q, 4, N)."""
    fn = "npu_batch_nms"
    check(not change_coordinate_frame, f"{fn}: change_coordinate_frame=True is not supported on vNPU.")
    if transpose_box:
        check(boxes.dim() == 4 and boxes.shape[2] == 4,
              f"{fn}: with transpose_box boxes should have shape (B, q, 4, N), got {list(boxes.shape)}.")
        boxes = boxes.permute(0, 3, 1, 2)
    check(boxes.dim() == 4 and boxes.shape[-1] == 4,
          f"{fn}: boxes should have shape (B, N, q, 4), got {list(boxes.shape)}.")
    check(scores.dim() == 3 and scores.shape[:2] == boxes.shape[:2],
          f"{fn}: scores should have shape (B, N, num_classes) = ({boxes.shape[0]}, {boxes.shape[1]}, C), "
          f"got {list(scores.shape)}.")
    batch, _, q, _ = boxes.shape
    classes = scores.shape[2]
    check(q in (1, classes), f"{fn}: boxes' q dimension should be 1 or num_classes ({classes}), got {q}.")
    b_all, s_all = boxes.detach().cpu().float(), scores.detach().cpu().float()
    out_boxes = torch.zeros(batch, max_total_size, 4)
    out_scores = torch.zeros(batch, max_total_size)
    out_classes = torch.zeros(batch, max_total_size)
    out_num = torch.zeros(batch, dtype=torch.int32)
    for n in range(batch):
        found = []  # (score, class, box index)
        for c in range(classes):
            b = b_all[n, :, c if q > 1 else 0]
            s = s_all[n, :, c]
            order = [i for i in torch.argsort(s, descending=True, stable=True).tolist() if s[i] > score_threshold]

            def iou_row(i, kept, b=b):
                return _iou_aligned(b[i], b[torch.tensor(kept)]) > iou_threshold

            found += [(float(s[i]), c, i) for i in _greedy(order, iou_row, max_size_per_class)]
        found.sort(key=lambda item: (-item[0], item[1], item[2]))
        found = found[:max_total_size]
        for j, (score, c, i) in enumerate(found):
            out_boxes[n, j] = b_all[n, i, c if q > 1 else 0]
            out_scores[n, j] = score
            out_classes[n, j] = c
        out_num[n] = len(found)
    dev = boxes.device
    return (out_boxes.to(dev, boxes.dtype), out_scores.to(dev, scores.dtype),
            out_classes.to(dev, scores.dtype), out_num.to(dev))


define("npu_nms_rotated(Tensor self, Tensor scores, float iou_threshold, float scores_threshold=0, "
       "int max_output_size=-1, int mode=0) -> (Tensor, Tensor)", npu_nms_rotated)
define("npu_batch_nms(Tensor self, Tensor scores, float score_threshold, float iou_threshold, "
       "int max_size_per_class, int max_total_size, bool change_coordinate_frame=False, "
       "bool transpose_box=False) -> (Tensor, Tensor, Tensor, Tensor)", npu_batch_nms)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
