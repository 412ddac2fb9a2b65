"""Which anchors of a feature map are responsible for a ground-truth box (YOLOv3).

Real torch_npu runs npu_anchor_response_flags; the formula is mmdetection's
``single_level_responsible_flags``: the grid cell holding a box centre is
responsible, and so are all ``num_base_anchors`` anchors of that cell.
"""

import torch

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
    feat_h, feat_w = featmap_size
    boxes = gt_bboxes if gt_bboxes.dtype in (torch.float32, torch.float16) else gt_bboxes.float()
    grid_x = torch.floor((boxes[:, 0] + boxes[:, 2]) * 0.5 / stride[0]).long()
    grid_y = torch.floor((boxes[:, 1] + boxes[:, 3]) * 0.5 / stride[1]).long()
    # A centre outside the map marks no cell (an index_put would wrap or fail).
    inside = (grid_x >= 0) & (grid_x < feat_w) & (grid_y >= 0) & (grid_y < feat_h)
    cells = (grid_y * feat_w + grid_x)[inside]
    grid = torch.zeros(feat_h * feat_w, dtype=torch.uint8, device=gt_bboxes.device)
    grid[cells] = 1
    return grid[:, None].expand(feat_h * feat_w, num_base_anchors).reshape(-1)
