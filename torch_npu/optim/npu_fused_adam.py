"""NpuFusedAdam: Adam (L2 weight decay added to the gradient, optional AMSGrad).

torch.optim.Adam's update through its multi-tensor (foreach) path, with
torch_npu's signature, defaults and argument checks.
"""

import torch

from .npu_fused_optim_base import _FusedOptimizerMixin, _refuse_invalid

__all__ = ["NpuFusedAdam"]


def _check_adam_args(lr, betas, eps, weight_decay):
    _refuse_invalid(
        (lr < 0.0, "learning rate", lr),
        (eps < 0.0, "epsilon value", eps),
        (not 0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0]),
        (not 0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1]),
        (weight_decay < 0.0, "weight_decay value", weight_decay))


class NpuFusedAdam(_FusedOptimizerMixin, torch.optim.Adam):
    """Adam with bias correction; ``weight_decay`` is an L2 penalty added to the gradient."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False):
        _check_adam_args(lr, betas, eps, weight_decay)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=True)
