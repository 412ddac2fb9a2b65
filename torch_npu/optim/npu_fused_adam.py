"""NpuFusedAdam: Adam (L2 weight decay added to the gradient, optional AMSGrad).

torch.optim.Adam's update through its multi-tensor (foreach) path, with
torch_npu's signature, defaults and argument checks.
"""

import torch

from torch_npu.utils._error_code import ErrCode, pta_error
from .npu_fused_optim_base import _FusedOptimizerMixin

__all__ = ["NpuFusedAdam"]


def _check_adam_args(lr, betas, eps, weight_decay):
    if lr < 0.0:
        raise ValueError("Invalid learning rate: {}".format(lr) + pta_error(ErrCode.VALUE))
    if eps < 0.0:
        raise ValueError("Invalid epsilon value: {}".format(eps) + pta_error(ErrCode.VALUE))
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]) + pta_error(ErrCode.VALUE))
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]) + pta_error(ErrCode.VALUE))
    if weight_decay < 0.0:
        raise ValueError("Invalid weight_decay value: {}".format(weight_decay) + pta_error(ErrCode.VALUE))


class NpuFusedAdam(_FusedOptimizerMixin, torch.optim.Adam):
    """Adam with bias correction; ``weight_decay`` is an L2 penalty added to the gradient."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False):
        _check_adam_args(lr, betas, eps, weight_decay)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=True)
