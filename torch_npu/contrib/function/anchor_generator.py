"""Which anchors of a feature map are responsible for a ground-truth box (YOLOv3).

Real torch_npu's contrib wrapper over npu_anchor_response_flags (which vNPU
defines in ATen operators). The formula is mmdetection's
``single_level_responsible_flags``: the grid cell holding a box centre,
floor(centre / stride), is responsible, and so are all ``num_base_anchors``
anchors of that cell; centres outside the map mark nothing.
"""

import torch

import torch_npu

__all__ = ["npu_single_level_responsible_flags"]


def npu_single_level_responsible_flags(featmap_size, gt_bboxes, stride, num_base_anchors):
    """uint8 flags of shape (feat_h * feat_w * num_base_anchors,), 1 where responsible.

    Args:
        featmap_size: (feat_h, feat_w).
        gt_bboxes: (n, 4) corner boxes (x1, y1, x2, y2).
        stride: (stride_w, stride_h) of this level.
        num_base_anchors: anchors per grid cell.
    """
    if gt_bboxes.dim() != 2 or gt_bboxes.shape[-1] != 4:
        raise ValueError(f"Expected gt_bboxes of shape (n, 4), but got {tuple(gt_bboxes.shape)}")
    boxes = gt_bboxes if gt_bboxes.dtype in (torch.float32, torch.float16) else gt_bboxes.float()
    return torch_npu.npu_anchor_response_flags(boxes, list(featmap_size), list(stride), num_base_anchors)
