"""NpuFusedAdadelta: Adadelta (Zeiler 2012) with an lr scale and L2 weight decay.

torch.optim.Adadelta's update through its multi-tensor (foreach) path, with
torch_npu's signature, defaults and argument checks.
"""

import torch

from .npu_fused_optim_base import _FusedOptimizerMixin, _refuse_invalid

__all__ = ["NpuFusedAdadelta"]


class NpuFusedAdadelta(_FusedOptimizerMixin, torch.optim.Adadelta):
    """Adadelta: ``v = rho v + (1-rho) g^2``, ``d = sqrt(u + eps) / sqrt(v + eps) * g``,
    ``p -= lr d``, ``u = rho u + (1-rho) d^2``, with ``g = grad + weight_decay * p``."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0):
        _refuse_invalid(
            (lr < 0.0, "learning rate", lr),
            (rho < 0.0 or rho > 1.0, "rho value", rho),
            (eps < 0.0, "epsilon value", eps),
            (weight_decay < 0.0, "weight_decay value", weight_decay))
        super().__init__(params, lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=True)
