"""NpuFusedAdadelta: Adadelta (Zeiler 2012) with an lr scale and L2 weight decay.

torch.optim.Adadelta's update through its multi-tensor (foreach) path, with
torch_npu's signature, defaults and argument checks.
"""

import torch

from torch_npu.utils._error_code import ErrCode, pta_error
from .npu_fused_optim_base import _FusedOptimizerMixin

__all__ = ["NpuFusedAdadelta"]


class NpuFusedAdadelta(_FusedOptimizerMixin, torch.optim.Adadelta):
    """Adadelta: ``v = rho v + (1-rho) g^2``, ``d = sqrt(u + eps) / sqrt(v + eps) * g``,
    ``p -= lr d``, ``u = rho u + (1-rho) d^2``, with ``g = grad + weight_decay * p``."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0):
        if lr < 0.0:
            raise ValueError("Invalid learning rate: {}".format(lr) + pta_error(ErrCode.VALUE))
        if rho < 0.0 or rho > 1.0:
            raise ValueError("Invalid rho value: {}".format(rho) + pta_error(ErrCode.VALUE))
        if eps < 0.0:
            raise ValueError("Invalid epsilon value: {}".format(eps) + pta_error(ErrCode.VALUE))
        if weight_decay < 0.0:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay) + pta_error(ErrCode.VALUE))
        super().__init__(params, lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=True)
