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

# The settings in the order the module's repr lists them.
_SETTINGS = ("pooled_width", "pooled_height", "spatial_scale", "group_size", "output_dim")

# Those npu_ps_roi_pooling takes, as keywords (its pooled size is group_size).
_OPERATOR_SETTINGS = ("spatial_scale", "group_size", "output_dim")


def _check_pooled_on_group_grid(pooled_height, pooled_width, group_size):
    # The operator pools on the group grid itself; a different pooled size is
    # something it cannot produce.
    if not pooled_height == pooled_width == group_size:
        raise ValueError("only pooled_height == pooled_width == group_size supported.")


class PSROIPool(nn.Module):
    """PSROIPool(pooled_height=7, pooled_width=7, spatial_scale=1/16, group_size=7, output_dim=22).

    pooled_height and pooled_width must equal group_size; they are kept as
    attributes because callers read them.
    """

    def __init__(self, pooled_height=7, pooled_width=7, spatial_scale=1 / 16.0, group_size=7, output_dim=22):
        _check_pooled_on_group_grid(pooled_height, pooled_width, group_size)
        nn.Module.__init__(self)
        self.pooled_height, self.pooled_width = pooled_height, pooled_width
        self.spatial_scale, self.group_size, self.output_dim = spatial_scale, group_size, output_dim

    def forward(self, features, rois):
        operator_args = {name: getattr(self, name) for name in _OPERATOR_SETTINGS}
        return torch_npu.npu_ps_roi_pooling(features, rois, **operator_args)

    def extra_repr(self):
        # nn.Module wraps this as "PSROIPool(...)", the module having no children.
        return ", ".join(f"{name}={getattr(self, name)}" for name in _SETTINGS)
