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

# Each activation's class name -> the torch_npu operator that computes it.
_OPERATORS = {"Mish": "npu_mish", "SiLU": "npu_silu"}


def _warn_replaced_by_torch_nn(name):
    warn(f"torch_npu.contrib.module.{name} is deprecated. Please use torch.nn.{name} for replacement.",
         FutureWarning)


def _operator_for(module_type):
    # Walks up the class hierarchy so that a user's subclass of Mish still computes mish.
    for cls in module_type.__mro__:
        if cls.__name__ in _OPERATORS:
            return getattr(torch_npu, _OPERATORS[cls.__name__])
    raise TypeError(f"{module_type.__name__} derives from neither Mish nor SiLU")


class _TorchNpuActivation(nn.Module):
    """Shared by Mish and SiLU: both are one element-wise torch_npu operator."""

    def __init__(self):
        nn.Module.__init__(self)
        _warn_replaced_by_torch_nn(type(self).__name__)

    def forward(self, x):
        return _operator_for(type(self))(x)


class Mish(_TorchNpuActivation):
    """mish(x) = x * tanh(softplus(x)) = x * tanh(ln(1 + exp(x)))."""


class SiLU(_TorchNpuActivation):
    """silu(x) = x * sigmoid(x), also published as Swish."""


Swish = SiLU
