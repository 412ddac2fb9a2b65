"""ROIAlign (Mask R-CNN): bilinear sampling of each region into a fixed grid.

Real torch_npu runs npu_roi_align / npu_roi_alignbk, with roi_end_mode 0
for aligned=False and 3 for aligned=True. vNPU's npu_roi_align (ATen
operators) implements the legacy mode, so aligned=False calls it; the
aligned mode (the -0.5 pixel shift, no 1x1 floor on the roi) is written
here. Both are the detectron2 algorithm, and autograd yields the input
gradient (each sample spreads its bilinear weights back to its neighbours).

For a roi (batch, x1, y1, x2, y2) scaled by ``spatial_scale`` (and shifted
by -0.5 when ``aligned``), each of the output_size bins averages
``sampling_ratio``^2 bilinear samples (ceil(roi_size / output_size) per axis
when sampling_ratio <= 0) placed at the centres of a regular sub-grid.
Samples beyond one pixel outside the map are 0; coordinates in [-1, 0) are
clamped to 0, those past the last pixel to it.
"""

import math

import torch
from torch import nn
from torch.nn.modules.utils import _pair

import torch_npu

__all__ = ["ROIAlign", "roi_align"]


def _bilinear(feature, y, x):
    """feature (C, H, W) sampled at the points y, x (same shape P); returns (C, P)."""
    _, height, width = feature.shape
    valid = (y >= -1.0) & (y <= height) & (x >= -1.0) & (x <= width)
    y, x = y.clamp(min=0), x.clamp(min=0)
    y0, x0 = y.floor().long(), x.floor().long()
    # At (or past) the last row/column both neighbours are that row/column.
    y_edge, x_edge = y0 >= height - 1, x0 >= width - 1
    y0, x0 = torch.where(y_edge, height - 1, y0), torch.where(x_edge, width - 1, x0)
    y = torch.where(y_edge, y0.to(y.dtype), y)
    x = torch.where(x_edge, x0.to(x.dtype), x)
    y1, x1 = torch.where(y_edge, y0, y0 + 1), torch.where(x_edge, x0, x0 + 1)
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    flat = feature.reshape(feature.shape[0], -1)

    def at(yy, xx):
        return flat[:, (yy * width + xx).reshape(-1)].reshape(feature.shape[0], *yy.shape)

    value = hy * hx * at(y0, x0) + hy * lx * at(y0, x1) + ly * hx * at(y1, x0) + ly * lx * at(y1, x1)
    return value * valid


def roi_align(input_tensor, rois, output_size, spatial_scale, sampling_ratio, aligned):
    """(K, C, out_h, out_w) features of the K rois (K, 5) over ``input_tensor`` (N, C, H, W)."""
    out_h, out_w = _pair(output_size)
    if not aligned:
        # rois carry no gradient (real torch_npu returns None for them).
        return torch_npu.npu_roi_align(input_tensor, rois.detach(), spatial_scale, out_h, out_w,
                                       sampling_ratio, 0)
    offset = 0.5
    outputs = []
    for roi in rois:
        batch = int(roi[0].item())
        x1, y1, x2, y2 = (float(v) * spatial_scale - offset for v in roi[1:].tolist())
        roi_w, roi_h = x2 - x1, y2 - y1
        bin_h, bin_w = roi_h / out_h, roi_w / out_w
        grid_h = sampling_ratio if sampling_ratio > 0 else max(math.ceil(roi_h / out_h), 1)
        grid_w = sampling_ratio if sampling_ratio > 0 else max(math.ceil(roi_w / out_w), 1)
        dev = input_tensor.device
        # Sample centres along each axis: bin index * bin + (sub-index + 0.5) * bin / grid.
        ys = y1 + (torch.arange(out_h * grid_h, device=dev, dtype=torch.float32) + 0.5) * (bin_h / grid_h)
        xs = x1 + (torch.arange(out_w * grid_w, device=dev, dtype=torch.float32) + 0.5) * (bin_w / grid_w)
        yy, xx = torch.meshgrid(ys, xs, indexing="ij")
        samples = _bilinear(input_tensor[batch], yy, xx)  # (C, out_h*grid_h, out_w*grid_w)
        channels = samples.shape[0]
        pooled = samples.reshape(channels, out_h, grid_h, out_w, grid_w).mean(dim=(2, 4))
        outputs.append(pooled)
    if not outputs:
        return input_tensor.new_zeros((0, input_tensor.shape[1], out_h, out_w))
    return torch.stack(outputs)


class ROIAlign(nn.Module):
    """ROIAlign(output_size, spatial_scale, sampling_ratio, aligned=True).

    forward(input_tensor (N, C, H, W), rois (K, 5) as batch index, x1, y1, x2,
    y2) -> (K, C, out_h, out_w), computed in float32. Note torchvision's
    default is aligned=False; real torch_npu's (and detectron2's) is True.
    """

    def __init__(self, output_size, spatial_scale, sampling_ratio, aligned=True):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input_tensor, rois):
        if rois.dim() != 2 or rois.size(1) != 5:
            raise ValueError("Expected rois.dim() == 2 and rois.size(1) == 5")
        return roi_align(input_tensor.float(), rois, self.output_size, self.spatial_scale,
                         self.sampling_ratio, self.aligned)

    def __repr__(self):
        return (f"{self.__class__.__name__}(output_size={self.output_size}, "
                f"spatial_scale={self.spatial_scale}, sampling_ratio={self.sampling_ratio}, "
                f"aligned={self.aligned})")
