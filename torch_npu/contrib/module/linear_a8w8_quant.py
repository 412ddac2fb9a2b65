"""LinearA8W8Quant: the int8-activation, int8-weight form of LinearQuant (older API).

y = (x W^T + bias) * scale + offset, cast to ``output_dtype`` (int8 when
None); the formula of npu_quant_matmul (see _quant_matmul). Inference only.
"""

import warnings

import torch
import torch.nn as nn
from torch.nn.parameter import Parameter

from ._quant_matmul import quant_matmul

__all__ = ["LinearA8W8Quant"]


class LinearA8W8Quant(nn.Module):
    """LinearA8W8Quant(in_features, out_features, *, bias=True, offset=False, pertoken_scale=False,
    device=None, dtype=None, output_dtype=None); set ``weight`` (int8, (out, in)) and ``scale``
    (and ``pertoken_scale``) before calling. Deprecated in torch_npu for LinearQuant, which
    warns the same."""

    def __init__(self, in_features, out_features, *, bias=True, offset=False, pertoken_scale=False,
                 device=None, dtype=None, output_dtype=None):
        super().__init__()
        warnings.warn("torch_npu.contrib.module.LinearA8W8Quant is deprecated and will be removed in a future "
                      "version. Use torch_npu.contrib.module.LinearQuant instead.", FutureWarning)
        self.in_features = in_features
        self.out_features = out_features
        self.output_dtype = output_dtype
        self.weight = Parameter(torch.empty((out_features, in_features), device=device), False)
        self.scale = Parameter(torch.empty(out_features, device=device), False)
        self.offset = Parameter(torch.empty(out_features, dtype=torch.float32, device=device), False) \
            if offset else None
        self.pertoken_scale = Parameter(torch.empty(out_features, dtype=torch.float32, device=device),
                                        False) if pertoken_scale else None
        self.bias = Parameter(torch.empty(out_features, dtype=torch.int32, device=device), False) \
            if bias else None

    def forward(self, linear_quant_input):
        if self.output_dtype is not None and self.output_dtype not in (torch.int8, torch.float16, torch.bfloat16):
            # LinearQuant has the int32 output; this older module never had it.
            raise ValueError("output_dtype should be torch.int8, torch.float16 or torch.bfloat16, "
                             f"but now it is {self.output_dtype}.")
        return quant_matmul(linear_quant_input, self.weight.transpose(-2, -1), self.scale,
                            offset=self.offset, pertoken_scale=self.pertoken_scale, bias=self.bias,
                            output_dtype=self.output_dtype, fn="LinearA8W8Quant")
