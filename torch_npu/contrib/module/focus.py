"""YOLOv5's Focus: space-to-depth (2x2 pixel blocks to channels), then Conv-BN-LeakyReLU.

Reference: ultralytics/yolov5 models/common.py. The four slices are
x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2],
concatenated along channels. Real torch_npu builds them from index_selects
(strided slices were slow on the device); ``fast_slice`` returns the same
four tensors.
"""

import torch
import torch.nn as nn

__all__ = ["Focus", "fast_slice", "Conv", "autopad"]


def autopad(k, p=None):
    """'same' padding for odd kernels when ``p`` is None."""
    if p is None:
        p = k // 2 if isinstance(k, int) else [x // 2 for x in k]
    return p


class Conv(nn.Module):
    """Conv2d (no bias) -> BatchNorm2d -> LeakyReLU(0.1) (or identity when ``act`` is False)."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p), groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.LeakyReLU(0.1, inplace=True) if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))

    def fuseforward(self, x):
        return self.act(self.conv(x))


def fast_slice(x):
    """The four 2x2-phase slices of an (N, C, H, W) tensor, in Focus's order (contiguous)."""
    if x.dim() != 4:
        raise ValueError(f"Expected a 4-D (N, C, H, W) tensor, but got {x.dim()}-D")
    return [x[..., ::2, ::2].contiguous(), x[..., 1::2, ::2].contiguous(),
            x[..., ::2, 1::2].contiguous(), x[..., 1::2, 1::2].contiguous()]


class Focus(nn.Module):
    """Focus(c1, c2, k=1, s=1, p=None, g=1, act=True): (N, c1, H, W) -> (N, c2, H/2, W/2)."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = Conv(c1 * 4, c2, k, s, p, g, act)

    def forward(self, x):
        return self.conv(torch.cat(fast_slice(x), 1))
