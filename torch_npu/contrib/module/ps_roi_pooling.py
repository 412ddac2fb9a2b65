"""Position-sensitive ROI pooling (R-FCN, https://arxiv.org/abs/1605.06409).

Each roi is split into group_size x group_size bins; output channel c of
bin (i, j) averages input channel (c * group_size + i) * group_size + j over
the pixels of that bin. Bins follow the R-FCN (Caffe) rounding: roi corners
are rounded, the roi spans [round(x1), round(x2) + 1) * spatial_scale, bin
edges are floored/ceiled and clipped to the map; empty bins are 0. Real
torch_npu runs npu_ps_roi_pooling; this is the formula in ATen operators
(differentiable in the features).

rois come in real torch_npu's layout (batch, 5, rois_per_image): rows of
(batch index, x1, y1, x2, y2); the output is (batch * rois_per_image,
output_dim, group_size, group_size).
"""

import math

import torch
from torch import nn

__all__ = ["PSROIPool"]


def _ps_roi_pool(features, rois, spatial_scale, group_size, output_dim):
    _, channels, height, width = features.shape
    if channels != output_dim * group_size * group_size:
        raise ValueError(f"features should have output_dim * group_size^2 = "
                         f"{output_dim * group_size * group_size} channels, but got {channels}")
    if rois.dim() != 3 or rois.shape[1] != 5:
        raise ValueError(f"Expected rois of shape (batch, 5, rois_num), but got {tuple(rois.shape)}")
    boxes = rois.permute(0, 2, 1).reshape(-1, 5).tolist()
    # Input channel of (output channel c, bin i, j).
    channel_of = torch.arange(channels, device=features.device).view(output_dim, group_size, group_size)
    outputs = []
    for batch, x1, y1, x2, y2 in boxes:
        start_w, start_h = round(x1) * spatial_scale, round(y1) * spatial_scale
        end_w, end_h = (round(x2) + 1) * spatial_scale, (round(y2) + 1) * spatial_scale
        bin_w = max(end_w - start_w, 0.1) / group_size
        bin_h = max(end_h - start_h, 0.1) / group_size
        fmap = features[int(batch)]
        bins = []
        for i in range(group_size):
            h0 = min(max(math.floor(i * bin_h + start_h), 0), height)
            h1 = min(max(math.ceil((i + 1) * bin_h + start_h), 0), height)
            for j in range(group_size):
                w0 = min(max(math.floor(j * bin_w + start_w), 0), width)
                w1 = min(max(math.ceil((j + 1) * bin_w + start_w), 0), width)
                chans = fmap.index_select(0, channel_of[:, i, j])
                if h1 <= h0 or w1 <= w0:
                    bins.append(chans.new_zeros(output_dim))
                else:
                    bins.append(chans[:, h0:h1, w0:w1].mean(dim=(1, 2)))
        outputs.append(torch.stack(bins, -1).view(output_dim, group_size, group_size))
    return torch.stack(outputs)


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
        return _ps_roi_pool(features, rois, self.spatial_scale, self.group_size, self.output_dim)

    def __repr__(self):
        return (f"{self.__class__.__name__}(pooled_width={self.pooled_width}, "
                f"pooled_height={self.pooled_height}, spatial_scale={self.spatial_scale}, "
                f"group_size={self.group_size}, output_dim={self.output_dim})")
