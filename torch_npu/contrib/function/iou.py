"""The IoU family used to match boxes and as box-regression losses.

These are real torch_npu's thin contrib wrappers over the IoU operators
(torch_npu.npu_iou / npu_ptiou / npu_giou / npu_diou / npu_ciou, which vNPU
defines in ATen operators, so gradients flow where autograd applies). The
wrappers fix the argument conventions:

- ``npu_iou`` / ``npu_ptiou``: rows of (x1, y1, x2, y2); N x M pairs, result (N, M).
- ``npu_giou``: rows of (cx, cy, w, h), one-to-one (n, 4) pairs, result (n, 1).
- ``npu_diou`` / ``npu_ciou``: columns of (cx, cy, w, h) when ``trans`` (else
  (x1, y1, x2, y2)), shape (4, n); one-to-one result (1, n).

Formulas (overlap, union and enclose are areas; rho the distance of the box
centres, c the diagonal of the smallest box enclosing both):

    iou  = overlap / union
    giou = iou - (enclose - union) / enclose
    diou = iou - rho^2 / c^2
    ciou = iou - (rho^2 / c^2 + alpha v),  v = 4 / pi^2 (atan(w_gt / h_gt) - atan(w / h))^2,
                                           alpha = v / (1 - iou + v)
"""

import torch

import torch_npu

__all__ = ["npu_iou", "npu_ptiou", "npu_giou", "npu_diou", "npu_ciou"]


def _as_box_dtype(box):
    # The kernels take float32 or float16; other boxes are computed in float32.
    return box if box.dtype in (torch.float32, torch.float16) else box.float()


def npu_iou(boxes1, boxes2, mode="ptiou", is_normalized=False, normalized_scale=100.):
    """IoU of every pair of boxes1 (N, 4) and boxes2 (M, 4), (x1, y1, x2, y2); returns (N, M).

    ``mode`` selects the operator, "iou" (npu_iou) or "ptiou" (npu_ptiou).
    The kernels keep empty boxes finite with a small constant in the
    denominator, which weighs on normalized coordinates: with
    ``is_normalized`` the boxes are first multiplied by ``normalized_scale``.
    Meant for matching; real torch_npu has no backward for it.
    """
    if mode not in ("iou", "ptiou"):
        raise ValueError("Expected mode in [iou, ptiou]")
    boxes1, boxes2 = _as_box_dtype(boxes1), _as_box_dtype(boxes2)
    if is_normalized:
        boxes1, boxes2 = boxes1 * normalized_scale, boxes2 * normalized_scale
    # The operators take (bboxes, gtboxes) and return (gt, box) pairs: swap to get (N, M).
    if mode == "iou":
        return torch_npu.npu_iou(boxes2, boxes1)
    return torch_npu.npu_ptiou(boxes2, boxes1)


# Real torch_npu exports the same function under both names; the mode selects.
npu_ptiou = npu_iou


def npu_giou(boxes1, boxes2, is_permuted=True):
    """Generalized IoU of one-to-one (cx, cy, w, h) boxes; returns (n, 1). Differentiable.

    ``is_permuted`` (default): the boxes are rows, (n, 4), and are transposed
    to the operator's (4, n); otherwise they are already (4, n).
    """
    if boxes1.shape != boxes2.shape:
        raise ValueError("Expected boxes1.shape == boxes2.shape")
    boxes1, boxes2 = _as_box_dtype(boxes1), _as_box_dtype(boxes2)
    if is_permuted:
        boxes1, boxes2 = boxes1.permute(1, 0), boxes2.permute(1, 0)
    return torch_npu.npu_giou(boxes1, boxes2, trans=True, is_cross=False)


def npu_diou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """Distance IoU of (4, n) boxes: iou - rho^2 / c^2; (1, n) one-to-one. Differentiable
    (real torch_npu's backward covers trans=True, is_cross=False, mode=0 only)."""
    return torch_npu.npu_diou(boxes1, boxes2, trans, is_cross, mode)


def npu_ciou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """Complete IoU of (4, n) boxes: iou - (rho^2 / c^2 + alpha v); (1, n) one-to-one.
    Differentiable (real torch_npu's backward covers trans=True, is_cross=False, mode=0)."""
    return torch_npu.npu_ciou(boxes1, boxes2, trans, is_cross, mode, True)
