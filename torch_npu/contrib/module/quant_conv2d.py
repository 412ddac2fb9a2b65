"""QuantConv2d: an inference convolution over int8 activations and weights,

    output = (conv2d(x, weight) + bias) * scale, cast to output_dtype,

with the input padded by ``offset_x``, the activations' zero point, rather
than by 0.

On Ascend the layer runs npu_quant_conv2d, whose int8 path only produces
float16 and only takes the int64 scales of npu_trans_quant_param. vNPU
computes the formula itself instead, so the layer also gives bfloat16 or
float32 and takes plain float32 scales: int8 products summed in float64 are
exact for any tensor this emulator can hold, as the chip's int32
accumulator is, and the sum is dequantised in float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.utils import _pair
from torch.nn.parameter import Parameter

from ._quant_matmul import dequant_scale

__all__ = ["QuantConv2d"]

_SUPPORTED_OUTPUTS = (torch.float16, torch.bfloat16, torch.float32)


def _reject_unsupported(output_dtype, offset, round_mode):
    """What torch_npu's module accepts and vNPU cannot compute fails at construction, not at the first call."""
    if output_dtype not in _SUPPORTED_OUTPUTS:
        raise RuntimeError(f"QuantConv2d: output_dtype {output_dtype} is not supported on vNPU; "
                           f"supported: float16, bfloat16, float32.")
    if offset:
        raise RuntimeError("QuantConv2d: offset (requantisation to int8) is not supported on vNPU.")
    if round_mode != "rint":
        raise RuntimeError(f"QuantConv2d: round_mode {round_mode!r} is not supported on vNPU; "
                           f"only 'rint' is.")


def _per_channel(values):
    # (C,) -> (1, C, 1, 1), to broadcast over an NCHW result.
    return values.reshape(1, -1, 1, 1)


class QuantConv2d(nn.Module):
    """QuantConv2d(in_channels, out_channels, kernel_size, output_dtype, stride=1, padding=0,
    dilation=1, groups=1, bias=True, offset=False, offset_x=0, round_mode="rint", device=None,
    dtype=None).

    The geometry attributes are nn.Conv2d's (pairs for the sizes). Load the
    int8 ``weight`` (out_channels, in_channels / groups, kh, kw), ``scale``
    (per output channel: float32, or npu_trans_quant_param's int64) and the
    int32 ``bias`` before calling. ``offset`` stays None: requantising to
    int8 is not supported here, nor any ``round_mode`` but "rint". ``dtype``
    is accepted for torch_npu's signature and not used.
    """

    def __init__(self, in_channels, out_channels, kernel_size, output_dtype, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, offset=False, offset_x=0, round_mode="rint",
                 device=None, dtype=None):
        super().__init__()
        _reject_unsupported(output_dtype, offset, round_mode)
        self.output_dtype = output_dtype
        self.round_mode = round_mode
        self.offset_x = offset_x

        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _pair(kernel_size), _pair(stride)
        self.padding, self.dilation = _pair(padding), _pair(dilation)

        def frozen(shape, dtype):
            # Loaded by the user from a quantisation tool; no gradient through integers.
            return Parameter(torch.empty(shape, dtype=dtype, device=device), requires_grad=False)

        self.weight = frozen((out_channels, in_channels // groups) + self.kernel_size, torch.int8)
        self.scale = frozen((out_channels,), torch.int64)
        self.bias = frozen((out_channels,), torch.int32) if bias else None
        self.register_parameter("offset", None)

    def _accumulate(self, x):
        """conv2d(x, weight) + bias, exact, in float64."""
        pad_h, pad_w = self.padding
        # F.conv2d pads with zeros; the zero point of these activations is offset_x.
        padded = F.pad(x.to(torch.float64), (pad_w, pad_w, pad_h, pad_h), value=float(self.offset_x))
        total = F.conv2d(padded, self.weight.to(torch.float64), stride=self.stride,
                         dilation=self.dilation, groups=self.groups)
        if self.bias is None:
            return total
        return total + _per_channel(self.bias.to(torch.float64))

    def forward(self, quant_conv2d_input):
        operands = (quant_conv2d_input.dtype, self.weight.dtype)
        if operands != (torch.int8, torch.int8):
            raise ValueError(f"QuantConv2d: input and weight should be torch.int8, but got "
                             f"{operands[0]} and {operands[1]}")
        dequantised = self._accumulate(quant_conv2d_input).to(torch.float32) * _per_channel(dequant_scale(self.scale))
        return dequantised.to(self.output_dtype)
