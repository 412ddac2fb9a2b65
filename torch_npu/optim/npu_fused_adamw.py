"""NpuFusedAdamW: Adam with decoupled weight decay (optional AMSGrad).

torch.optim.AdamW's update through its multi-tensor (foreach) path, with
torch_npu's signature, defaults and argument checks.
"""

import torch

from .npu_fused_adam import _check_adam_args
from .npu_fused_optim_base import _FusedOptimizerMixin

__all__ = ["NpuFusedAdamW"]


class NpuFusedAdamW(_FusedOptimizerMixin, torch.optim.AdamW):
    """AdamW: ``p *= 1 - lr * weight_decay`` then the bias-corrected Adam step."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        _check_adam_args(lr, betas, eps, weight_decay)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=True)
