"""ShuffleNetV2's channel shuffle of two branches, as an index_select.

torchvision's version concatenates the branches, reshapes to (groups,
channels / groups), transposes and flattens; real torch_npu replaces the
non-contiguous transpose by one index_select with the equivalent channel
permutation, which is what this does. Autograd gives the gradient (the
inverse permutation) for any group count.
"""

import torch
import torch.nn as nn

__all__ = ["ChannelShuffle"]


class ChannelShuffle(nn.Module):
    """ChannelShuffle(in_channels, groups=2, split_shuffle=True).

    forward(x1, x2): the channels of cat([x1, x2], 1) are reordered so that
    output channel i * groups + g is input channel g * (in_channels / groups)
    + i; only the first ``in_channels`` channels of the concatenation take
    part. With ``split_shuffle`` the result is returned as two halves
    (ShuffleNetV2 then splits it anyway), else as one tensor.
    """

    def __init__(self, in_channels, groups=2, split_shuffle=True):
        super().__init__()
        if in_channels % groups != 0:
            raise ValueError(f"in_channels ({in_channels}) should be divisible by groups ({groups})")
        self.split_shuffle = split_shuffle
        self.group_len = in_channels // groups
        order = torch.arange(in_channels).reshape(groups, self.group_len).t().reshape(-1)
        # Buffers follow the module through .npu() / .to(); not saved in state_dict.
        self.register_buffer("out_channels", order, persistent=False)

    def forward(self, x1, x2):
        x = torch.cat([x1, x2], dim=1)
        index = self.out_channels.to(x.device)
        if self.split_shuffle:
            return x.index_select(1, index[:self.group_len]), x.index_select(1, index[self.group_len:])
        return x.index_select(1, index)
