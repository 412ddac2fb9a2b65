"""IoU measures between boxes: the one-to-one GIoU / DIoU / CIoU that
box-regression losses are built from, and pairwise IoU for matching.

Every function here forwards to one of vNPU's box operators
(torch_npu.npu_iou, npu_ptiou, npu_giou, npu_diou, npu_ciou); what this module
adds is the layout convention each caller expects.

    function    box layout                              pairs          result
    npu_diou    columns, (4, n); (cx, cy, w, h) when    one-to-one     (1, n)
    npu_ciou    trans, else (x1, y1, x2, y2)
    npu_giou    rows (cx, cy, w, h), (n, 4)             one-to-one     (n, 1)
    npu_iou     rows (x1, y1, x2, y2), (N, 4) / (M, 4)  every N x M    (N, M)

With overlap, union and enclose the areas of the intersection, the union and
the smallest box around both, rho the distance between the centres and c the
diagonal of that enclosing box:

    iou  = overlap / union
    giou = iou - (enclose - union) / enclose
    diou = iou - rho^2 / c^2
    ciou = diou - alpha * v,   v = 4 / pi^2 * (atan(w_gt / h_gt) - atan(w / h))^2,
                               alpha = v / (1 - iou + v)
"""

import torch

import torch_npu

__all__ = ["npu_iou", "npu_ptiou", "npu_giou", "npu_diou", "npu_ciou"]


def _in_kernel_precision(*boxes):
    """The box kernels compute in half or single precision: integer or double
    boxes are brought to single precision, the others are left as they are."""
    return [b if b.dtype in (torch.float16, torch.float32) else b.float() for b in boxes]


def _one_to_one_columns(operator, boxes1, boxes2, trans, is_cross, mode, **extra):
    return operator(boxes1, boxes2, trans=trans, is_cross=is_cross, mode=mode, **extra)


def npu_diou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """Distance IoU, iou - rho^2 / c^2, of one-to-one column boxes (4, n); result (1, n).

    Differentiable; torch_npu's backward exists for the defaults only
    (trans=True, is_cross=False, mode=0).
    """
    return _one_to_one_columns(torch_npu.npu_diou, boxes1, boxes2, trans, is_cross, mode)


def npu_ciou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """Complete IoU, diou - alpha * v, of one-to-one column boxes (4, n); result (1, n).

    The aspect term's atan difference is kept for the backward
    (atan_sub_flag), which, as for npu_diou, covers the defaults only.
    """
    return _one_to_one_columns(torch_npu.npu_ciou, boxes1, boxes2, trans, is_cross, mode, atan_sub_flag=True)


def _paired_columns(boxes1, boxes2, are_rows):
    """boxes1 and boxes2 as the (4, n) columns the one-to-one kernels take."""
    # One-to-one: boxes1[i] is paired with boxes2[i], so both need the same count.
    if boxes1.shape != boxes2.shape:
        raise ValueError("Expected boxes1.shape == boxes2.shape")
    return [b.t() if are_rows else b for b in _in_kernel_precision(boxes1, boxes2)]


def npu_giou(boxes1, boxes2, is_permuted=True):
    """Generalised IoU of boxes1[i] with boxes2[i], (cx, cy, w, h); result (n, 1).

    The operator wants columns, (4, n). Rows, (n, 4), are the usual layout, so
    by default (``is_permuted=True``) they are transposed here; pass
    ``is_permuted=False`` for boxes that are already columns. Differentiable.
    """
    return torch_npu.npu_giou(*_paired_columns(boxes1, boxes2, is_permuted), trans=True, is_cross=False)


def _pairwise_kernel(mode):
    # npu_iou's ``mode`` is the name of the operator it runs, less "npu_".
    if mode not in ("iou", "ptiou"):
        raise ValueError("Expected mode in [iou, ptiou]")
    return getattr(torch_npu, "npu_" + mode)


def npu_iou(boxes1, boxes2, mode="ptiou", is_normalized=False, normalized_scale=100.):
    """IoU of each box of boxes1 (N, 4) with each box of boxes2 (M, 4), as (N, M).

    Boxes are corner rows (x1, y1, x2, y2). ``mode`` names the operator:
    "iou" or "ptiou" (the default). Both kernels add a small constant to
    numerator and denominator so that empty boxes stay finite; on coordinates
    normalised to [0, 1] that constant would dominate, so ``is_normalized``
    rescales the boxes by ``normalized_scale`` before the kernel sees them.
    This is a matching measure: there is no gradient, as in torch_npu.
    """
    kernel = _pairwise_kernel(mode)
    boxes1, boxes2 = _in_kernel_precision(boxes1, boxes2)
    if is_normalized:
        boxes1, boxes2 = boxes1 * normalized_scale, boxes2 * normalized_scale
    # The operator takes (bboxes, gtboxes) and puts the gt boxes on the rows
    # of its result: boxes1 goes in as the gt boxes to come out on the rows.
    return kernel(boxes2, boxes1)


# torch_npu exports npu_iou under this second name too; ``mode`` still decides
# which kernel runs.
npu_ptiou = npu_iou
