"""Mish and SiLU (alias Swish) as modules, for models written before torch.nn had them.

Real torch_npu deprecates both in favour of torch.nn.Mish / torch.nn.SiLU and
says so with a FutureWarning each time one is built; the wording is theirs.
The arithmetic is done by the torch_npu operators (npu_mish, npu_silu, defined
with their gradients in vNPU's ATen operators), looked up when called so that
importing contrib does not depend on the order torch_npu registers them.
"""

import warnings

import torch.nn as nn

import torch_npu

__all__ = ["Mish", "SiLU", "Swish"]

_DEPRECATION = ("torch_npu.contrib.module.{name} is deprecated. "
                "Please use torch.nn.{name} for replacement.")


class _ReplacedActivation(nn.Module):
    """An element-wise activation that torch.nn now provides under the same name.

    Subclasses name the torch_npu operator that computes it in ``operator``.
    """

    operator = ""

    def __init__(self):
        super().__init__()
        warnings.warn(_DEPRECATION.format(name=type(self).__name__), FutureWarning)

    def forward(self, x):
        kernel = getattr(torch_npu, self.operator)
        return kernel(x)


class Mish(_ReplacedActivation):
    """mish(x) = x * tanh(softplus(x)) = x * tanh(ln(1 + exp(x)))."""

    operator = "npu_mish"


class SiLU(_ReplacedActivation):
    """silu(x) = x * sigmoid(x), also published as Swish."""

    operator = "npu_silu"


Swish = SiLU
