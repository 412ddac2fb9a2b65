"""Which anchors of one feature-map level are responsible for a ground-truth box (YOLOv3).

mmdetection's ``single_level_responsible_flags``: the grid cell that holds a
box's centre, floor(centre / stride), is responsible for it, and so is every
one of that cell's ``num_base_anchors`` anchors; a centre off the map marks
nothing. vNPU computes it with npu_anchor_response_flags (its ATen operators),
the operator real torch_npu's wrapper calls.
"""

import torch

import torch_npu

__all__ = ["npu_single_level_responsible_flags"]

# The operator takes half or single precision boxes; anything else is widened to float32.
_BOX_DTYPES = (torch.float16, torch.float32)


def npu_single_level_responsible_flags(featmap_size, gt_bboxes, stride, num_base_anchors):
    """One uint8 flag per anchor, cell-major: shape (feat_h * feat_w * num_base_anchors,).

    Args:
        featmap_size: (feat_h, feat_w) of this level.
        gt_bboxes: (n, 4) boxes as corners (x1, y1, x2, y2), any numeric dtype.
        stride: (stride_w, stride_h) of this level, in input pixels.
        num_base_anchors: anchors per grid cell.
    """
    return torch_npu.npu_anchor_response_flags(_kernel_boxes(gt_bboxes), list(featmap_size), list(stride),
                                               num_base_anchors)


def _kernel_boxes(gt_bboxes):
    if gt_bboxes.dim() != 2 or gt_bboxes.size(-1) != 4:
        raise ValueError(f"Expected gt_bboxes of shape (n, 4), but got {tuple(gt_bboxes.shape)}")
    if gt_bboxes.dtype in _BOX_DTYPES:
        return gt_bboxes
    return gt_bboxes.to(torch.float32)
