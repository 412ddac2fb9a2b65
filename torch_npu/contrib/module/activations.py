"""Mish and SiLU (Swish) modules, kept for models written before torch.nn had them.

Both are deprecated in real torch_npu in favour of torch.nn.Mish / SiLU and
warn so on construction. Mish is x * tanh(softplus(x)) (real torch_npu runs
npu_mish; vNPU has no such op, so F.mish, the same formula); SiLU is
x * sigmoid(x) through vNPU's npu_silu.
"""

import warnings

import torch.nn as nn
import torch.nn.functional as F

import torch_npu

__all__ = ["Mish", "SiLU", "Swish"]


class Mish(nn.Module):
    """mish(x) = x * tanh(ln(1 + exp(x))), element-wise."""

    def __init__(self):
        super().__init__()
        warnings.warn("torch_npu.contrib.module.Mish is deprecated. "
                      "Please use torch.nn.Mish for replacement.", FutureWarning)

    def forward(self, x):
        return F.mish(x)


class SiLU(nn.Module):
    """silu(x) = x * sigmoid(x), element-wise (also known as Swish)."""

    def __init__(self):
        super().__init__()
        warnings.warn("torch_npu.contrib.module.SiLU is deprecated. "
                      "Please use torch.nn.SiLU for replacement.", FutureWarning)

    def forward(self, x):
        return torch_npu.npu_silu(x)


Swish = SiLU
