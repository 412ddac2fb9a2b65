"""PSROIPool: position-sensitive ROI pooling, the head of R-FCN
(https://arxiv.org/abs/1605.06409).

The input carries output_dim * group_size^2 channels, one score map per
(output channel, bin) pair. A roi is cut into a group_size x group_size grid
and bin (i, j) of output channel c is the mean, over the pixels the bin
covers, of the map reserved for it, input channel (c * group_size + i) *
group_size + j. Bin edges follow R-FCN's Caffe code: roi corners rounded to
whole pixels, the far corner inclusive, bins floored / ceiled and clipped to
the map, an empty bin gives 0.

The work is torch_npu.npu_ps_roi_pooling's (differentiable in the features).
rois are laid out as torch_npu's operator takes them, (batch, 5,
rois_per_image), each column (batch index, x1, y1, x2, y2); the result is
(batch * rois_per_image, output_dim, group_size, group_size).
"""

from torch import nn

import torch_npu

__all__ = ["PSROIPool"]


class PSROIPool(nn.Module):
    """PSROIPool(pooled_height=7, pooled_width=7, spatial_scale=1/16, group_size=7, output_dim=22).

    The operator pools on the group grid itself, so the pooled size must be
    that grid: pooled_height == pooled_width == group_size.
    """

    def __init__(self, pooled_height=7, pooled_width=7, spatial_scale=1 / 16.0, group_size=7, output_dim=22):
        super().__init__()
        if {pooled_height, pooled_width} != {group_size}:
            raise ValueError("only pooled_height == pooled_width == group_size supported.")
        self.spatial_scale = spatial_scale
        self.group_size = group_size
        self.output_dim = output_dim
        # Kept, though equal to group_size, because callers read them.
        self.pooled_height = pooled_height
        self.pooled_width = pooled_width

    def extra_repr(self):
        # With no submodules, nn.Module prints "PSROIPool(<this>)".
        return (f"pooled_width={self.pooled_width}, pooled_height={self.pooled_height}, "
                f"spatial_scale={self.spatial_scale}, group_size={self.group_size}, "
                f"output_dim={self.output_dim}")

    def forward(self, features, rois):
        return torch_npu.npu_ps_roi_pooling(features, rois, spatial_scale=self.spatial_scale,
                                            group_size=self.group_size, output_dim=self.output_dim)
