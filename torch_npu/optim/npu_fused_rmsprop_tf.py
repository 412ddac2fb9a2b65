"""NpuFusedRMSpropTF: TensorFlow-style RMSprop (as in timm's RMSpropTF).

Differences from torch.optim.RMSprop: the squared average starts at 1, eps
goes inside the square root, and with momentum the learning rate is folded
into the momentum buffer (``lr_in_momentum``, TensorFlow's order) unless
disabled. Per parameter p with gradient g:

    if weight_decay: p -= weight_decay * p   (decoupled_decay)
                     or g = g + weight_decay * p
    v += (1 - alpha) (g^2 - v)
    avg = sqrt(v - a^2 + eps), a += (1 - alpha) (g - a)  (centered)
        or sqrt(v + eps)
    momentum > 0: buf = momentum buf + lr g / avg, p -= buf  (lr_in_momentum)
                  buf = momentum buf + g / avg, p -= lr buf  (otherwise)
    else:         p -= lr g / avg

vNPU computes it with foreach ops over each (group, dtype) bucket.
"""

import torch

from .npu_fused_optim_base import NpuFusedOptimizerBase, _refuse_invalid

__all__ = ["NpuFusedRMSpropTF"]


class NpuFusedRMSpropTF(NpuFusedOptimizerBase):
    """RMSprop with TensorFlow's epsilon placement, state initialisation and
    momentum/learning-rate order."""

    def __init__(self, params, lr=1e-2, alpha=0.9, eps=1e-10, weight_decay=0, momentum=0., centered=False,
                 decoupled_decay=False, lr_in_momentum=True):
        _refuse_invalid(
            (lr < 0.0, "learning rate", lr),
            (eps < 0.0, "epsilon value", eps),
            (momentum < 0.0, "momentum value", momentum),
            (weight_decay < 0.0, "weight_decay value", weight_decay),
            (alpha < 0.0, "alpha value", alpha))
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, decoupled_decay=decoupled_decay, lr_in_momentum=lr_in_momentum)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)

    def _sparse_grad_message(self):
        return "NpuFusedRMSpropTF does not support sparse gradients."

    def _init_param_state(self, p, momentum, centered):
        state = self.state[p]
        state.setdefault("step", 0)
        if "square_avg" not in state:
            state["square_avg"] = torch.ones_like(p, memory_format=torch.preserve_format)
        if momentum > 0 and "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if centered and "grad_avg" not in state:
            state["grad_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)

    def _init_group_param_state(self, p, group):
        self._init_param_state(p, group["momentum"], group["centered"])

    def _group_step(self, group_index):
        group = self.param_groups[group_index]
        one_minus_alpha = 1.0 - group["alpha"]
        lr, eps, weight_decay, momentum = group["lr"], group["eps"], group["weight_decay"], group["momentum"]
        for params, grads, states in self._buckets(group_index):
            for p in params:
                self.state[p]["step"] += 1
            if weight_decay != 0:
                if group.get("decoupled_decay", False):
                    torch._foreach_add_(params, params, alpha=-weight_decay)
                else:
                    grads = torch._foreach_add(grads, params, alpha=weight_decay)

            square_avgs = states["square_avg"]
            diff = torch._foreach_mul(grads, grads)
            torch._foreach_sub_(diff, square_avgs)
            torch._foreach_add_(square_avgs, diff, alpha=one_minus_alpha)

            if group["centered"]:
                grad_avgs = states["grad_avg"]
                diff = torch._foreach_sub(grads, grad_avgs)
                torch._foreach_add_(grad_avgs, diff, alpha=one_minus_alpha)
                avgs = torch._foreach_addcmul(square_avgs, grad_avgs, grad_avgs, value=-1)
                torch._foreach_add_(avgs, eps)
            else:
                avgs = torch._foreach_add(square_avgs, eps)
            torch._foreach_sqrt_(avgs)

            if momentum > 0:
                bufs = states["momentum_buffer"]
                torch._foreach_mul_(bufs, momentum)
                if group.get("lr_in_momentum", False):
                    torch._foreach_addcdiv_(bufs, grads, avgs, value=lr)
                    torch._foreach_sub_(params, bufs)
                else:
                    torch._foreach_addcdiv_(bufs, grads, avgs)
                    torch._foreach_add_(params, bufs, alpha=-lr)
            else:
                torch._foreach_addcdiv_(params, grads, avgs, value=-lr)
