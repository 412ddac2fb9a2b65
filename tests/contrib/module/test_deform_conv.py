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


@pytest.mark.parametrize("with_bias", [True, False])
def test_modulated_deform_conv2d_function_against_grid_sample(with_bias):
    # Real torch_npu's autograd Function, called as its module calls it
    # (sort indices for the chip's offset layout included).
    from torch_npu.contrib.module.deform_conv import ModulatedDeformConv2dFunction

    x, weight = rnd(2, 4, 6, 6, seed=141), rnd(6, 2, 3, 3, seed=142) * 0.3
    bias = rnd(6, seed=143) if with_bias else torch.zeros(6)
    offset, mask = rnd(2, 18, 6, 6, seed=144), torch.sigmoid(rnd(2, 9, 6, 6, seed=145))
    order = list(range(18))
    forward_order = order[1::2] + order[::2]
    backward_order = [forward_order.index(i) for i in order]
    npu = [t.clone().to(NPU).requires_grad_() for t in (x, offset, mask, weight, bias)]
    out = ModulatedDeformConv2dFunction.apply(
        *npu[:4], npu[4] if with_bias else None, with_bias, 1, 1, 1, 2, 1,
        torch.tensor(forward_order, device=NPU), torch.tensor(backward_order, device=NPU))
    ref_in = [t.clone().requires_grad_() for t in (x, offset, mask, weight, bias)]
    outs = []
    for g in range(2):  # groups=2: each half of the channels with its half of the weight
        part = ref_deform_conv(ref_in[0][:, 2 * g:2 * g + 2], ref_in[1], ref_in[2], ref_in[3][3 * g:3 * g + 3],
                               ref_in[4][3 * g:3 * g + 3], 1, 1, 1)
        outs.append(part)
    ref = torch.cat(outs, 1)
    assert_close(out.detach().cpu(), ref.detach(), atol=1e-4, rtol=1e-4)
    grad = rnd(*ref.shape, seed=146)
    out.backward(grad.to(NPU))
    ref.backward(grad)
    for got, want in zip(npu[:4], ref_in[:4]):
        assert_close(got.grad.cpu(), want.grad, atol=1e-3, rtol=1e-3)
    if with_bias:
        assert_close(npu[4].grad.cpu(), ref_in[4].grad, atol=1e-3, rtol=1e-3)
    else:
        assert npu[4].grad is None


def test_multihead_attention_matmul_transpose_is_a_at_b_transposed():
    from torch_npu.contrib.module.multihead_attention import Matmul_transpose

    a, b = rnd(2, 3, 5, 4, seed=151), rnd(2, 3, 6, 4, seed=152)
    a_npu, b_npu = a.to(NPU).requires_grad_(), b.to(NPU).requires_grad_()
    out = Matmul_transpose(a_npu, b_npu)
    assert_close(out.detach().cpu(), a @ b.transpose(-2, -1), atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert_close(a_npu.grad.cpu(), torch.ones(2, 3, 5, 6) @ b, atol=1e-5, rtol=1e-5)
