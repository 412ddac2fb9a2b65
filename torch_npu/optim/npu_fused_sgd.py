"""NpuFusedSGD: SGD with optional momentum / Nesterov momentum.

torch.optim.SGD's update through its multi-tensor (foreach) path, with
torch_npu's signature: ``lr`` has no default (a group without its own ``lr``
is refused, as on torch_npu), argument errors carry torch_npu's error suffix.
"""

import math

import torch
from torch.optim.optimizer import required

from torch_npu.utils._error_code import ErrCode, pta_error
from .npu_fused_optim_base import _FusedOptimizerMixin, _refuse_invalid

__all__ = ["NpuFusedSGD"]

_LR_PLACEHOLDER = 1e-3


class NpuFusedSGD(_FusedOptimizerMixin, torch.optim.SGD):
    """Stochastic gradient descent: ``buf = momentum * buf + (1 - dampening) * g``
    (``buf = g`` at the first step), ``p -= lr * (g + momentum * buf if nesterov
    else buf)``, with ``g = grad + weight_decay * p``."""

    def __init__(self, params, lr=required, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        _refuse_invalid(
            (lr is not required and lr < 0.0, "learning rate", lr),
            (momentum < 0.0, "momentum value", momentum),
            (weight_decay < 0.0, "weight_decay value", weight_decay))
        if nesterov and (momentum <= 0.0 or not math.isclose(dampening, 0.0, abs_tol=1e-15)):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening" + pta_error(ErrCode.VALUE))
        if lr is required:
            # torch.optim.SGD compares lr with 0, so give it a number and put the
            # "required" marker back afterwards; every group must bring its own lr.
            params = list(params)
            groups = params if len(params) > 0 and isinstance(params[0], dict) else [{"params": params}]
            if any("lr" not in group for group in groups):
                raise ValueError("parameter group didn't specify a value of required optimization parameter lr")
        super().__init__(params, lr=_LR_PLACEHOLDER if lr is required else lr, momentum=momentum,
                         dampening=dampening, weight_decay=weight_decay, nesterov=nesterov, foreach=True)
        if lr is required:
            self.defaults["lr"] = required
