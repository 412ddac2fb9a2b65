"""ChannelShuffle: ShuffleNetV2's channel shuffle of two branches, as one gather.

torchvision shuffles by viewing the channels as a (groups, C / groups) grid,
transposing it and flattening, which leaves a non-contiguous tensor for the
device to copy. Real torch_npu gathers the channels in the shuffled order with
index_select instead; this does the same. The order is a fixed permutation, so
it is computed once per module, and autograd scatters the gradient back
through index_select (the inverse permutation) for any group count.
"""

import torch
import torch.nn as nn

__all__ = ["ChannelShuffle"]


def _shuffled_order(channels, groups):
    """Input channel feeding each output channel: output i * groups + g reads input g * (channels / groups) + i."""
    grid = torch.arange(channels).view(groups, channels // groups)
    return grid.t().flatten()


class ChannelShuffle(nn.Module):
    """ChannelShuffle(in_channels, groups=2, split_shuffle=True).

    forward(x1, x2) shuffles the first ``in_channels`` channels of
    cat([x1, x2], dim=1). With ``split_shuffle`` the result comes back as two
    tensors, split after the first in_channels / groups channels (the two
    halves for ShuffleNetV2's groups=2, which splits them into its branches
    anyway); otherwise as one tensor.
    """

    def __init__(self, in_channels, groups=2, split_shuffle=True):
        super().__init__()
        if in_channels % groups != 0:
            raise ValueError(f"in_channels ({in_channels}) should be divisible by groups ({groups})")
        self.split_shuffle = split_shuffle
        self._split_at = in_channels // groups
        # A buffer so that .npu() / .to() move it with the module; it is derived, so not saved.
        self.register_buffer("_order", _shuffled_order(in_channels, groups), persistent=False)

    def forward(self, x1, x2):
        both = torch.cat((x1, x2), 1)
        order = self._order.to(both.device)
        if not self.split_shuffle:
            return both.index_select(1, order)
        head, tail = order[:self._split_at], order[self._split_at:]
        return both.index_select(1, head), both.index_select(1, tail)
