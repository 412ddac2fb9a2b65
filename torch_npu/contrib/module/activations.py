"""Mish and SiLU (Swish) modules, kept for models written before torch.nn had them.

Both are deprecated in real torch_npu in favour of torch.nn.Mish / SiLU and
warn so on construction. Mish is x * tanh(softplus(x)) through npu_mish,
SiLU x * sigmoid(x) through npu_silu (vNPU defines both in ATen operators).
"""

import warnings

import torch.nn as nn

import torch_npu

__all__ = ["Mish", "SiLU", "Swish"]


class Mish(nn.Module):
    """mish(x) = x * tanh(ln(1 + exp(x))), element-wise."""

    def __init__(self):
        super().__init__()
        warnings.warn("torch_npu.contrib.module.Mish is deprecated. "
                      "Please use torch.nn.Mish for replacement.", FutureWarning)

    def forward(self, x):
        return torch_npu.npu_mish(x)


class SiLU(nn.Module):
    """silu(x) = x * sigmoid(x), element-wise (also known as Swish)."""

    def __init__(self):
        super().__init__()
        warnings.warn("torch_npu.contrib.module.SiLU is deprecated. "
                      "Please use torch.nn.SiLU for replacement.", FutureWarning)

    def forward(self, x):
        return torch_npu.npu_silu(x)


Swish = SiLU
