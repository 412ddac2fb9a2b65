"""QuantConv2d: int8 convolution, dequantised: output = (conv(x, W) + bias) * scale.

Real torch_npu runs npu_quant_conv2d (graph mode only). Here the int8
convolution is an exact float64 convolution (int32-accumulation equivalent
for anything this emulator holds), then dequantised to ``output_dtype``.
``scale`` may be float32 or the int64 form npu_trans_quant_param produces
(float32 bits in the low word). Inference only.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.utils import _pair
from torch.nn.parameter import Parameter

from ._quant_matmul import dequant_scale

__all__ = ["QuantConv2d"]

_OUTPUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class QuantConv2d(nn.Module):
    """QuantConv2d(in_channels, out_channels, kernel_size, output_dtype, stride=1, padding=0,
    dilation=1, groups=1, bias=True, offset=False, offset_x=0, round_mode="rint", device=None,
    dtype=None).

    Set ``weight`` (int8, (out, in / groups, kh, kw)), ``scale`` and
    ``bias`` (int32) before calling. ``offset_x`` is the value padded
    around the input (the int8 zero point); ``offset`` (requantisation to
    int8) is not supported on vNPU, nor is any round_mode but "rint".
    """

    def __init__(self, in_channels, out_channels, kernel_size, output_dtype, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, offset=False, offset_x=0, round_mode="rint",
                 device=None, dtype=None):
        super().__init__()
        if output_dtype not in _OUTPUT_DTYPES:
            raise RuntimeError(f"QuantConv2d: output_dtype {output_dtype} is not supported on vNPU; "
                               f"supported: float16, bfloat16, float32.")
        if offset:
            raise RuntimeError("QuantConv2d: offset (requantisation to int8) is not supported on vNPU.")
        if round_mode != "rint":
            raise RuntimeError(f"QuantConv2d: round_mode {round_mode!r} is not supported on vNPU; "
                               f"only 'rint' is.")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = _pair(padding)
        self.dilation = _pair(dilation)
        self.groups = groups
        self.offset_x = offset_x
        self.round_mode = round_mode
        self.output_dtype = output_dtype
        self.weight = Parameter(torch.empty((out_channels, in_channels // groups, *self.kernel_size),
                                            dtype=torch.int8, device=device), False)
        self.scale = Parameter(torch.empty(out_channels, dtype=torch.int64, device=device), False)
        self.bias = Parameter(torch.empty(out_channels, dtype=torch.int32, device=device), False) \
            if bias else None
        self.register_parameter("offset", None)

    def forward(self, quant_conv2d_input):
        x = quant_conv2d_input
        if x.dtype != torch.int8 or self.weight.dtype != torch.int8:
            raise ValueError(f"QuantConv2d: input and weight should be torch.int8, but got "
                             f"{x.dtype} and {self.weight.dtype}")
        ph, pw = self.padding
        # Pad with the zero point explicitly, then convolve without padding.
        xf = F.pad(x.double(), (pw, pw, ph, ph), value=float(self.offset_x))
        acc = F.conv2d(xf, self.weight.double(), None, self.stride, 0, self.dilation, self.groups)
        if self.bias is not None:
            acc = acc + self.bias.double().view(1, -1, 1, 1)
        y = acc.float() * dequant_scale(self.scale).view(1, -1, 1, 1)
        return y.to(self.output_dtype)
