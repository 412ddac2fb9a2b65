"""The IoU family used to match boxes and as box-regression losses.

Real torch_npu computes these with Ascend kernels (npu_iou, npu_ptiou,
npu_giou, npu_diou, npu_ciou); here each is its geometric formula in ATen
operators, so gradients flow through it wherever autograd applies.

Box layouts, as in real torch_npu:

- ``npu_iou`` / ``npu_ptiou``: rows of (x1, y1, x2, y2), N x M pairs.
- ``npu_giou``: rows of (cx, cy, w, h), one-to-one (n, 4) pairs, result (n, 1).
- ``npu_diou`` / ``npu_ciou``: columns of (cx, cy, w, h) when ``trans`` (else
  (x1, y1, x2, y2)), shape (4, n); one-to-one (1, n) or all pairs (n, m).
"""

import math

import torch

__all__ = ["npu_iou", "npu_ptiou", "npu_giou", "npu_diou", "npu_ciou"]

# Added to numerator and denominator by the Ascend IoU kernel (see npu_iou).
_IOU_SMOOTH = 0.001
# Guards the DIoU/CIoU divisions, as the reference implementations do.
_EPS = 1e-9


def _as_box_dtype(box):
    # The kernels take float32 or float16; integer boxes are computed in float32.
    return box if box.dtype in (torch.float32, torch.float16) else box.float()


def _xywh_to_corners(b):
    """(cx, cy, w, h) along dim 0 -> x1, y1, x2, y2 (each of shape b.shape[1:])."""
    half_w, half_h = b[2] / 2, b[3] / 2
    return b[0] - half_w, b[1] - half_h, b[0] + half_w, b[1] + half_h


def npu_iou(boxes1, boxes2, mode="ptiou", is_normalized=False, normalized_scale=100.):
    """IoU of every pair of boxes1 (N, 4) and boxes2 (M, 4), (x1, y1, x2, y2); returns (N, M).

    ``mode="iou"``:   (overlap + 0.001) / (union + 0.001)
    ``mode="ptiou"``: overlap / (union + 0.001)

    The 0.001 keeps empty boxes finite; it dominates for normalized
    coordinates, hence ``is_normalized``: the boxes are first multiplied by
    ``normalized_scale``. Like the Ascend kernel, this is meant for matching,
    not as a loss.
    """
    if mode not in ("iou", "ptiou"):
        raise ValueError("Expected mode in [iou, ptiou]")
    boxes1, boxes2 = _as_box_dtype(boxes1), _as_box_dtype(boxes2)
    if is_normalized:
        boxes1, boxes2 = boxes1 * normalized_scale, boxes2 * normalized_scale
    a = boxes1[:, None, :]  # (N, 1, 4)
    b = boxes2[None, :, :]  # (1, M, 4)
    w = (torch.minimum(a[..., 2], b[..., 2]) - torch.maximum(a[..., 0], b[..., 0])).clamp(min=0)
    h = (torch.minimum(a[..., 3], b[..., 3]) - torch.maximum(a[..., 1], b[..., 1])).clamp(min=0)
    overlap = w * h
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    union = area_a + area_b - overlap
    if mode == "iou":
        return (overlap + _IOU_SMOOTH) / (union + _IOU_SMOOTH)
    return overlap / (union + _IOU_SMOOTH)


# Real torch_npu exports the same function under both names; the mode selects.
npu_ptiou = npu_iou


def npu_giou(boxes1, boxes2, is_permuted=True):
    """Generalized IoU of one-to-one (cx, cy, w, h) boxes of shape (n, 4); returns (n, 1).

    giou = iou - (enclose - union) / enclose, with ``enclose`` the area of the
    smallest box holding both. Differentiable (usable as a GIoU loss).
    ``is_permuted`` is accepted for signature compatibility: the boxes are
    always rows of 4 here.
    """
    if boxes1.shape != boxes2.shape:
        raise ValueError("Expected boxes1.shape == boxes2.shape")
    if boxes1.dim() != 2 or boxes1.shape[-1] != 4:
        raise ValueError(f"Expected boxes of shape (n, 4), but got {tuple(boxes1.shape)}")
    boxes1, boxes2 = _as_box_dtype(boxes1), _as_box_dtype(boxes2)
    ax1, ay1, ax2, ay2 = _xywh_to_corners(boxes1.t())
    bx1, by1, bx2, by2 = _xywh_to_corners(boxes2.t())
    overlap = ((torch.minimum(ax2, bx2) - torch.maximum(ax1, bx1)).clamp(min=0)
               * (torch.minimum(ay2, by2) - torch.maximum(ay1, by1)).clamp(min=0))
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - overlap
    enclose = ((torch.maximum(ax2, bx2) - torch.minimum(ax1, bx1))
               * (torch.maximum(ay2, by2) - torch.minimum(ay1, by1)))
    giou = overlap / union - (enclose - union) / enclose
    return giou[:, None]


def _distance_iou_terms(boxes1, boxes2, trans, is_cross, mode, fn):
    """IoU, centre distance^2 / enclosing diagonal^2, and the widths/heights, pairwise or one-to-one."""
    if mode != 0:
        raise RuntimeError(f"{fn}: mode={mode} (iof) is not supported on vNPU; only mode=0 (iou) is.")
    if boxes1.dim() != 2 or boxes1.shape[0] != 4 or boxes2.dim() != 2 or boxes2.shape[0] != 4:
        raise RuntimeError(f"{fn}: boxes should be of shape (4, n), but got "
                           f"{tuple(boxes1.shape)} and {tuple(boxes2.shape)}.")
    if not is_cross and boxes1.shape[1] != boxes2.shape[1]:
        raise RuntimeError(f"{fn}: with is_cross=False both inputs need the same number of boxes, "
                           f"but got {boxes1.shape[1]} and {boxes2.shape[1]}.")
    boxes1, boxes2 = _as_box_dtype(boxes1), _as_box_dtype(boxes2)
    if trans:
        a, b = _xywh_to_corners(boxes1), _xywh_to_corners(boxes2)
    else:
        a, b = tuple(boxes1), tuple(boxes2)
    if is_cross:  # (n, 1) against (1, m): every pair
        a = tuple(t[:, None] for t in a)
        b = tuple(t[None, :] for t in b)
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    overlap = ((torch.minimum(ax2, bx2) - torch.maximum(ax1, bx1)).clamp(min=0)
               * (torch.minimum(ay2, by2) - torch.maximum(ay1, by1)).clamp(min=0))
    w1, h1 = ax2 - ax1, ay2 - ay1 + _EPS
    w2, h2 = bx2 - bx1, by2 - by1 + _EPS
    union = w1 * h1 + w2 * h2 - overlap + _EPS
    cw = torch.maximum(ax2, bx2) - torch.minimum(ax1, bx1)
    ch = torch.maximum(ay2, by2) - torch.minimum(ay1, by1)
    diag2 = cw ** 2 + ch ** 2 + _EPS
    rho2 = ((bx1 + bx2 - ax1 - ax2) ** 2 + (by1 + by2 - ay1 - ay2) ** 2) / 4
    return overlap / union, rho2 / diag2, (w1, h1, w2, h2)


def npu_diou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """Distance IoU: iou - rho^2(b, b_gt) / c^2, boxes of shape (4, n) and (4, m).

    rho is the distance between the box centres, c the diagonal of the
    smallest box enclosing both. Returns (1, n) one-to-one, or (n, m) with
    ``is_cross``. ``trans`` says the rows are (cx, cy, w, h).
    """
    iou, dist, _ = _distance_iou_terms(boxes1, boxes2, trans, is_cross, mode, "npu_diou")
    out = iou - dist
    return out if is_cross else out[None, :]


def npu_ciou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """Complete IoU: iou - (rho^2 / c^2 + alpha * v), boxes of shape (4, n) and (4, m).

    v = 4 / pi^2 * (atan(w_gt / h_gt) - atan(w / h))^2 measures the aspect
    ratio mismatch and alpha = v / (1 - iou + v) weighs it. As in the CIoU
    paper (and YOLO's loss), alpha is a constant for the gradient.
    """
    iou, dist, (w1, h1, w2, h2) = _distance_iou_terms(boxes1, boxes2, trans, is_cross, mode, "npu_ciou")
    v = (4 / math.pi ** 2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)) ** 2
    with torch.no_grad():
        alpha = v / (1 - iou + v + _EPS)
    out = iou - (dist + alpha * v)
    return out if is_cross else out[None, :]
