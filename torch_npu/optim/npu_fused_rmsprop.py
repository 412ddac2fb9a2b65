"""NpuFusedRMSprop: RMSprop as torch.optim (eps added after the square root;
optional momentum and centered variant; L2 weight decay).

torch.optim.RMSprop's update through its multi-tensor (foreach) path, with
torch_npu's signature, defaults and argument checks.
"""

import torch

from .npu_fused_optim_base import _FusedOptimizerMixin, _refuse_invalid

__all__ = ["NpuFusedRMSprop"]


class NpuFusedRMSprop(_FusedOptimizerMixin, torch.optim.RMSprop):
    """RMSprop: ``v = alpha v + (1-alpha) g^2``, ``avg = sqrt(v - m^2 if centered else v) + eps``,
    ``p -= lr * (buf = momentum buf + g / avg if momentum else g / avg)``."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False):
        _refuse_invalid(
            (lr < 0.0, "learning rate", lr),
            (eps < 0.0, "epsilon value", eps),
            (momentum < 0.0, "momentum value", momentum),
            (weight_decay < 0.0, "weight_decay value", weight_decay),
            (alpha < 0.0, "alpha value", alpha))
        super().__init__(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                         centered=centered, foreach=True)
