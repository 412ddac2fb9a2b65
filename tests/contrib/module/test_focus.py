"""torch_npu.contrib.module.focus: fast_slice and Focus."""

import torch
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


def test_focus_slices_and_module():
    x = rnd(2, 3, 6, 9, seed=171)
    from torch_npu.contrib.module.focus import fast_slice
    for got, want in zip(fast_slice(x.to(NPU)), [x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
                                                 x[..., 1::2, 1::2]]):
        assert torch.equal(got.cpu(), want)
    x = x[..., :8]  # Focus needs even sizes to stack the phases
    torch.manual_seed(0)
    focus = cm.Focus(3, 5, k=3)
    ref = focus.conv.act(focus.conv.bn(focus.conv.conv(torch.cat(fast_slice(x), 1))))
    a = x.clone().to(NPU).requires_grad_()
    out = focus.to(NPU)(a)
    assert out.shape == (2, 5, 3, 4)
    assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-4)
    out.sum().backward()
    assert a.grad.shape == x.shape


def test_focus_conv_padding_activation_and_fused_forward():
    from torch_npu.contrib.module.focus import Conv, autopad
    assert autopad(3) == 1 and autopad((3, 5)) == [1, 2] and autopad(3, 0) == 0
    torch.manual_seed(0)
    conv = Conv(3, 4, k=3, act=False)
    assert isinstance(conv.act, torch.nn.Identity)
    assert conv.conv.padding == (1, 1) and conv.conv.bias is None
    x = rnd(1, 3, 5, 5, seed=172)
    torch.manual_seed(0)  # the same weights as ``conv``
    fused = Conv(3, 4, k=3).to(NPU).fuseforward(x.to(NPU))
    ref = torch.nn.functional.leaky_relu(conv.conv(x), 0.1)
    assert_close(fused.cpu(), ref.detach(), atol=1e-5, rtol=1e-4)
