"""torch_npu.contrib.module.channel_shuffle: ChannelShuffle against torchvision's shuffle."""

import pytest
import torch
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


def torchvision_channel_shuffle(x, groups):
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


@pytest.mark.parametrize("groups", [2, 4])
@pytest.mark.parametrize("split", [False, True])
def test_channel_shuffle(groups, split):
    x1, x2 = rnd(2, 4, 3, 3, seed=91), rnd(2, 4, 3, 3, seed=92)
    model = cm.ChannelShuffle(8, groups=groups, split_shuffle=split).to(NPU)
    a1, a2 = (t.clone().to(NPU).requires_grad_() for t in (x1, x2))
    out = model(a1, a2)
    r1, r2 = (t.clone().requires_grad_() for t in (x1, x2))
    ref = torchvision_channel_shuffle(torch.cat([r1, r2], 1), groups)
    got = torch.cat(out, 1) if split else out
    assert_close(got.detach().cpu(), ref.detach())
    g = rnd(*ref.shape, seed=93)
    got.backward(g.to(NPU))
    ref.backward(g)
    assert_close(a1.grad.cpu(), r1.grad)
    assert_close(a2.grad.cpu(), r2.grad)
    with pytest.raises(ValueError, match="divisible"):
        cm.ChannelShuffle(7, groups=2)


def test_channel_shuffle_uses_the_first_in_channels_and_splits_after_one_group():
    x = rnd(2, 4, 3, 3, seed=94)
    model = cm.ChannelShuffle(4, split_shuffle=True).to(NPU)  # cat(x, x) has 8 channels
    head, tail = model(x.to(NPU), x.to(NPU))
    assert head.shape == tail.shape == (2, 2, 3, 3)
    want = torchvision_channel_shuffle(x, 2)
    assert_close(torch.cat([head, tail], 1).cpu(), want)
    assert not model.state_dict()  # the channel order is derived, not saved
