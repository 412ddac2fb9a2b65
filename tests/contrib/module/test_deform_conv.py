"""torch_npu.contrib.module.deform_conv: ModulatedDeformConv / DCNv2 against grid_sample taps."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


def ref_deform_conv(x, offset, mask, weight, bias, stride, pad, dil):
    """Direct loop over taps: bilinear sample at the offset position (0 outside), times the mask."""
    n, c, h, w = x.shape
    co, _, kh, kw = weight.shape
    ho = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    wo = (w + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    out = torch.zeros(n, co, ho, wo)
    for k in range(kh * kw):
        i, j = divmod(k, kw)
        py = (torch.arange(ho) * stride - pad + i * dil).view(-1, 1) + offset[:, 2 * k]
        px = (torch.arange(wo) * stride - pad + j * dil).view(1, -1) + offset[:, 2 * k + 1]
        grid = torch.stack([(px + 0.5) / w * 2 - 1, (py + 0.5) / h * 2 - 1], -1)
        sampled = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        out += torch.einsum("oc,nchw->nohw", weight[:, :, i, j], sampled * mask[:, k:k + 1])
    return out + bias.view(1, -1, 1, 1)


@pytest.mark.parametrize("stride, pad, dil", [(1, 1, 1), (2, 1, 1), (1, 2, 2)])
def test_modulated_deform_conv_unpacked_against_grid_sample(stride, pad, dil):
    torch.manual_seed(0)
    model = cm.ModulatedDeformConv(3, 4, 3, stride, pad, dil, pack=False)
    nn.init.uniform_(model.bias, -1, 1)
    x = rnd(2, 3, 7, 6, seed=131)
    ho = (7 + 2 * pad - dil * 2 - 1) // stride + 1
    wo = (6 + 2 * pad - dil * 2 - 1) // stride + 1
    offset = rnd(2, 18, ho, wo, seed=132) * 1.5
    mask = torch.sigmoid(rnd(2, 9, ho, wo, seed=133))
    inputs = [t.clone().to(NPU).requires_grad_() for t in (x, offset, mask)]
    out = model.to(NPU)((inputs[0], inputs[1], inputs[2]))
    ref_in = [t.clone().requires_grad_() for t in (x, offset, mask)]
    w, b = model.weight.detach().cpu().requires_grad_(), model.bias.detach().cpu().requires_grad_()
    ref = ref_deform_conv(*ref_in, w, b, stride, pad, dil)
    assert_close(out.detach().cpu(), ref.detach(), atol=1e-4, rtol=1e-4)
    g = rnd(*ref.shape, seed=134)
    out.backward(g.to(NPU))
    ref.backward(g)
    for got, want in zip(inputs, ref_in):
        assert_close(got.grad.cpu(), want.grad, atol=1e-3, rtol=1e-3)
    assert_close(model.weight.grad.cpu(), w.grad, atol=1e-3, rtol=1e-3)
    assert_close(model.bias.grad.cpu(), b.grad, atol=1e-3, rtol=1e-3)


def test_dcnv2_packed_starts_as_half_a_convolution():
    torch.manual_seed(0)
    model = cm.DCNv2(2, 4, 3, 2, 1, groups=2, deformable_groups=2)
    nn.init.uniform_(model.bias, -1, 1)
    x = rnd(2, 2, 5, 5, seed=141)
    out = model.to(NPU)(x.to(NPU))  # zero offsets, masks sigmoid(0) = 0.5
    ref = F.conv2d(x, model.weight.detach().cpu() * 0.5, model.bias.detach().cpu(), 2, 1, 1, 2)
    assert_close(out.detach().cpu(), ref, atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert model.conv_offset.weight.grad is not None and model.weight.grad is not None
    assert cm.DCNv2 is cm.ModulatedDeformConv
    with pytest.raises(ValueError, match="offset should have"):
        cm.DCNv2(2, 2, 3, pack=False)((x, torch.zeros(2, 9, 3, 3), torch.zeros(2, 9, 3, 3)))
