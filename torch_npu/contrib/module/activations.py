"""Mish and SiLU (alias Swish) as modules, for models written before torch.nn had them.

Real torch_npu deprecates both in favour of torch.nn.Mish / torch.nn.SiLU and
says so with a FutureWarning each time one is built; the wording is theirs.
The arithmetic is done by the torch_npu operators (npu_mish, npu_silu, defined
with their gradients in vNPU's ATen operators), looked up at call time so that
importing contrib does not depend on the order torch_npu registers them.
"""

from warnings import warn

from torch import nn

import torch_npu

__all__ = ["Mish", "SiLU", "Swish"]

class _TorchNpuActivation(nn.Module):
    """Shared by Mish and SiLU: each is one element-wise torch_npu operator."""

    replacement = ""  # the torch.nn module to use instead
    operator = ""     # the torch_npu operator that computes it

    def __init__(self):
        nn.Module.__init__(self)
        warn(f"torch_npu.contrib.module.{self.replacement} is deprecated. "
             f"Please use torch.nn.{self.replacement} for replacement.", FutureWarning)

    def forward(self, x):
        return getattr(torch_npu, self.operator)(x)


class Mish(_TorchNpuActivation):
    """mish(x) = x * tanh(softplus(x)) = x * tanh(ln(1 + exp(x)))."""
    replacement, operator = "Mish", "npu_mish"


class SiLU(_TorchNpuActivation):
    """silu(x) = x * sigmoid(x), also published as Swish."""
    replacement, operator = "SiLU", "npu_silu"


Swish = SiLU
