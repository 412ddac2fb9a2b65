"""YOLOv5's Focus layer: space-to-depth on 2x2 pixel blocks, then Conv-BN-LeakyReLU.

Each 2x2 block of an (N, C, H, W) image contributes its four pixels to four
different channel groups, so the image becomes (N, 4C, H/2, W/2) with no
information lost, and one convolution then mixes them (ultralytics/yolov5,
models/common.py). Real torch_npu computes the four phase images with
index_selects because strided slicing was slow on the device; on vNPU a strided
slice is just a view, so ``fast_slice`` slices and makes each phase contiguous.
"""

import torch
import torch.nn as nn

__all__ = ["Focus", "fast_slice", "Conv", "autopad"]

# (row offset, column offset) of each phase image, in the channel order YOLOv5
# weights expect: top-left, bottom-left, top-right, bottom-right.
_PHASE_OFFSETS = ((0, 0), (1, 0), (0, 1), (1, 1))


class Focus(nn.Module):
    """Focus(c1, c2, k=1, s=1, p=None, g=1, act=True): (N, c1, H, W) -> (N, c2, H/2, W/2) for even H, W."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        # The phase images quadruple the channels before the convolution sees them.
        self.conv = Conv(4 * c1, c2, k, s, p, g, act)

    def forward(self, x):
        stacked = torch.cat(fast_slice(x), dim=1)
        return self.conv(stacked)


def fast_slice(x):
    """The four 2x2 phase images of an (N, C, H, W) tensor, each contiguous, in Focus's order."""
    if x.dim() != 4:
        raise ValueError(f"Expected a 4-D (N, C, H, W) tensor, but got {x.dim()}-D")
    return [x[:, :, row::2, col::2].contiguous() for row, col in _PHASE_OFFSETS]


class Conv(nn.Module):
    """Conv2d without bias, BatchNorm2d, then the activation.

    The submodules are named conv / bn / act so that YOLOv5 checkpoints load.
    """

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        padding = autopad(k, p)
        self.conv = nn.Conv2d(c1, c2, kernel_size=k, stride=s, padding=padding, groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = _activation(act)

    def forward(self, x):
        y = self.bn(self.conv(x))
        return self.act(y)

    def fuseforward(self, x):
        """The forward pass once the batch norm has been folded into the convolution's weights."""
        y = self.conv(x)
        return self.act(y)


def _activation(act):
    # YOLOv5 of that era used LeakyReLU(0.1); act=False turns the nonlinearity off.
    return nn.LeakyReLU(0.1, inplace=True) if act else nn.Identity()


def autopad(k, p=None):
    """The padding that keeps the spatial size for an odd kernel ``k``; an explicit ``p`` wins."""
    if p is not None:
        return p
    if isinstance(k, int):
        return k // 2
    return [side // 2 for side in k]
