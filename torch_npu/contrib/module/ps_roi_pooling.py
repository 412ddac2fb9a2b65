"""Position-sensitive ROI pooling (R-FCN, https://arxiv.org/abs/1605.06409).

Each roi is split into group_size x group_size bins; output channel c of
bin (i, j) averages input channel (c * group_size + i) * group_size + j over
the pixels of that bin. Bins follow the R-FCN (Caffe) rounding: roi corners
are rounded, the roi spans [round(x1), round(x2) + 1) * spatial_scale, bin
edges are floored/ceiled and clipped to the map; empty bins are 0. As in
real torch_npu this is npu_ps_roi_pooling (vNPU defines it in ATen
operators, differentiable in the features).

rois come in real torch_npu's layout (batch, 5, rois_per_image): rows of
(batch index, x1, y1, x2, y2); the output is (batch * rois_per_image,
output_dim, group_size, group_size).
"""

from torch import nn

import torch_npu

__all__ = ["PSROIPool"]


class PSROIPool(nn.Module):
    """PSROIPool(pooled_height=7, pooled_width=7, spatial_scale=1/16, group_size=7, output_dim=22).

    Only pooled_height == pooled_width == group_size is supported (as in real torch_npu).
    """

    def __init__(self, pooled_height=7, pooled_width=7, spatial_scale=1 / 16.0, group_size=7, output_dim=22):
        super().__init__()
        if not pooled_height == pooled_width == group_size:
            raise ValueError("only pooled_height == pooled_width == group_size supported.")
        self.pooled_height = pooled_height
        self.pooled_width = pooled_width
        self.group_size = group_size
        self.spatial_scale = spatial_scale
        self.output_dim = output_dim

    def forward(self, features, rois):
        return torch_npu.npu_ps_roi_pooling(features, rois, self.spatial_scale, self.group_size,
                                            self.output_dim)

    def __repr__(self):
        return (f"{self.__class__.__name__}(pooled_width={self.pooled_width}, "
                f"pooled_height={self.pooled_height}, spatial_scale={self.spatial_scale}, "
                f"group_size={self.group_size}, output_dim={self.output_dim})")
