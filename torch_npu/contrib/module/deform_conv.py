"""Modulated deformable convolution (DCNv2, https://arxiv.org/abs/1811.11168).

Each kernel tap k of output position p samples the input at
p * stride - padding + k * dilation + offset_k(p), bilinearly (0 outside the
map), scaled by mask_k(p); the samples are then contracted with the weight
as in an ordinary convolution. Real torch_npu runs npu_deformable_conv2d;
here the sampling is a gather over the flattened map and the contraction
an einsum, so autograd supplies the gradients of input, offset, mask, weight
and bias.

Offsets follow mmcv's layout: for deformable group g and tap k, channels
2 * (g * K + k) and 2 * (g * K + k) + 1 hold dy and dx; masks are channel
g * K + k of the mask tensor.
"""

import math

import torch
import torch.nn as nn
from torch.nn.modules.utils import _pair

__all__ = ["ModulatedDeformConv", "DCNv2", "ModulatedDeformConv2dFunction", "modulated_deform_conv2d"]


def _sample(x, py, px):
    """x (N, G, Cg, H, W) sampled at py, px (N, G, P) -> (N, G, Cg, P); 0 outside (-1, H) x (-1, W)."""
    n, g, cg, height, width = x.shape
    y0, x0 = py.floor(), px.floor()
    flat = x.reshape(n, g, cg, height * width)
    out = 0
    for dy in (0, 1):
        for dx in (0, 1):
            yy, xx = y0 + dy, x0 + dx
            weight = (1 - (py - yy).abs()) * (1 - (px - xx).abs())
            inside = (yy >= 0) & (yy < height) & (xx >= 0) & (xx < width)
            index = (yy.clamp(0, height - 1) * width + xx.clamp(0, width - 1)).long()
            picked = torch.gather(flat, 3, index[:, :, None, :].expand(n, g, cg, index.shape[-1]))
            out = out + picked * (weight * inside)[:, :, None, :]
    return out


def modulated_deform_conv2d(x, offset, mask, weight, bias, stride, padding, dilation, groups,
                            deformable_groups):
    """The DCNv2 output (N, C_out, H_out, W_out); see the module docstring."""
    n, c_in, height, width = x.shape
    c_out, _, kh, kw = weight.shape
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    h_out = (height + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    w_out = (width + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    taps, dg = kh * kw, deformable_groups
    if c_in % dg or c_in % groups or c_out % groups:
        raise ValueError(f"channels ({c_in} in, {c_out} out) should divide by groups ({groups}) "
                         f"and deformable_groups ({dg})")
    if offset.shape[1] != 2 * dg * taps or mask.shape[1] != dg * taps:
        raise ValueError(f"offset should have {2 * dg * taps} channels and mask {dg * taps}, "
                         f"but got {offset.shape[1]} and {mask.shape[1]}")
    dev = x.device
    base_y = (torch.arange(h_out, device=dev) * sh - ph).view(1, h_out, 1)
    base_x = (torch.arange(w_out, device=dev) * sw - pw).view(1, 1, w_out)
    tap_y = (torch.arange(kh, device=dev) * dh).repeat_interleave(kw).view(taps, 1, 1)
    tap_x = (torch.arange(kw, device=dev) * dw).repeat(kh).view(taps, 1, 1)
    off = offset.reshape(n, dg, taps, 2, h_out, w_out)
    py = (base_y + tap_y).to(x.dtype) + off[:, :, :, 0]  # (N, dg, K, Ho, Wo)
    px = (base_x + tap_x).to(x.dtype) + off[:, :, :, 1]
    cols = _sample(x.reshape(n, dg, c_in // dg, height, width),
                   py.reshape(n, dg, -1), px.reshape(n, dg, -1))
    cols = cols.reshape(n, dg, c_in // dg, taps, h_out * w_out)
    cols = cols * mask.reshape(n, dg, 1, taps, h_out * w_out)
    cols = cols.reshape(n, groups, (c_in // groups) * taps, h_out * w_out)
    w = weight.reshape(groups, c_out // groups, (c_in // groups) * taps)
    out = torch.einsum("gok,ngkl->ngol", w, cols).reshape(n, c_out, h_out, w_out)
    if bias is not None:
        out = out + bias.view(1, -1, 1, 1)
    return out


class ModulatedDeformConv2dFunction(torch.autograd.Function):
    """Real torch_npu's autograd Function behind ModulatedDeformConv:
    ``apply(input, offset, mask, weight, bias=None, with_bias=False, stride=1,
    padding=0, dilation=1, groups=1, deformable_groups=1,
    sort_index_for_npu_fp=None, sort_index_for_npu_bp=None)``, in float32.
    The two sort indices reorder the offset channels into the layout of the
    chip's kernel and back; vNPU computes in the offsets' own (mmcv) layout,
    so they are accepted and have nothing to do. Gradients are those of
    modulated_deform_conv2d (input, offset, mask, weight, and bias when
    ``with_bias``)."""

    @staticmethod
    def forward(ctx, input_tensor, offset_ori, mask, weight, bias=None, with_bias=False, stride=1, padding=0,
                dilation=1, groups=1, deformable_groups=1, sort_index_for_npu_fp=None, sort_index_for_npu_bp=None):
        ctx.with_bias = with_bias
        inputs = [t.detach().float().requires_grad_() for t in (input_tensor, offset_ori, mask)]
        params = [weight.detach().requires_grad_(), None if bias is None else bias.detach().requires_grad_()]
        with torch.enable_grad():
            output = modulated_deform_conv2d(*inputs, *params, stride, padding, dilation, groups, deformable_groups)
        ctx.graph = (output, inputs + [p for p in params if p is not None])
        return output.detach()

    @staticmethod
    def backward(ctx, grad_output):
        output, leaves = ctx.graph
        grads = torch.autograd.grad(output, leaves, grad_output, allow_unused=True)
        grad_input, grad_offset, grad_mask, grad_weight = grads[:4]
        grad_bias = grads[4] if len(grads) > 4 and ctx.with_bias else None
        return (grad_input, grad_offset, grad_mask, grad_weight, grad_bias) + (None,) * 8


class ModulatedDeformConv(nn.Module):
    """ModulatedDeformConv(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
    groups=1, deformable_groups=1, bias=True, pack=True).

    With ``pack`` the module owns ``conv_offset``, a zero-initialised
    convolution predicting offsets and (through a sigmoid) masks from the
    input, so forward(x) starts as a plain convolution scaled by 0.5;
    without it forward takes (x, offset, mask). Computed in float32.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, deformable_groups=1, bias=True, pack=True):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.groups = groups
        self.deformable_groups = deformable_groups
        self.with_bias = bias
        self.pack = pack
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups, *self.kernel_size))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        taps = self.kernel_size[0] * self.kernel_size[1]
        if pack:
            self.conv_offset = nn.Conv2d(in_channels, deformable_groups * 3 * taps,
                                         kernel_size=self.kernel_size, stride=_pair(stride),
                                         padding=_pair(padding), bias=True)
        self.split_num = deformable_groups * 2 * taps
        self.init_param()

    def init_param(self):
        fan_in = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
        stdv = 1. / math.sqrt(fan_in)
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.zero_()
        if self.pack:
            # Zero offsets and masks of sigmoid(0): training starts from a regular grid.
            self.conv_offset.weight.data.zero_()
            self.conv_offset.bias.data.zero_()

    def forward(self, x):
        if self.pack:
            out = self.conv_offset(x)
            offset = out[:, :self.split_num]
            mask = torch.sigmoid(out[:, self.split_num:])
        else:
            x, offset, mask = x
        return modulated_deform_conv2d(x.float(), offset.float(), mask.float(), self.weight, self.bias,
                                       self.stride, self.padding, self.dilation, self.groups,
                                       self.deformable_groups)


DCNv2 = ModulatedDeformConv
