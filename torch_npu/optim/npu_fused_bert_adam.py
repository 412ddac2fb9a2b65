"""NpuFusedBertAdam: the Adam variant of pytorch-pretrained-bert's BertAdam
(decoupled weight decay, no bias correction, warmup schedules, gradient
clipping), in the form torch_npu implements.

Per (group, dtype) bucket, before the update, when max_grad_norm > 0 the
bucket's gradients are clipped in place together: scaled by
max_grad_norm / (||g|| + 1e-6) when that is below 1 (||g||: float32 L2 norm
over the bucket; pytorch-pretrained-bert clips each parameter on its own).
Per parameter, with the step count s (0 at the first step):

    m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2
    u = m / (sqrt(v) + e) + weight_decay * p        (weight_decay > 0)
    lr_s = lr * schedule(s / t_total, warmup)  (lr when t_total == -1)
    p -= lr_s * u

Schedules, x = s / t_total: below ``warmup`` all are x / warmup; after it
warmup_cosine 0.5 (1 + cos(pi x)), warmup_constant 1, warmup_linear
max((x - 1) / (warmup - 1), 0), warmup_poly (1 - x)^0.5 (vNPU takes 0 past
x = 1, where the formula has no real value). The step count is kept per
parameter in the optimizer state, so it survives state_dict round trips.
"""

import math

import torch
from torch.optim.optimizer import required

from .npu_fused_optim_base import NpuFusedOptimizerBase, _refuse_invalid, _total_norm

__all__ = ["NpuFusedBertAdam"]

WARMUP_DEFAULT = 0.002
DEGREE_DEFAULT = 0.5


def _warmup_cosine(x, warmup=WARMUP_DEFAULT):
    return x / warmup if x < warmup else 0.5 * (1.0 + math.cos(math.pi * x))


def _warmup_constant(x, warmup=WARMUP_DEFAULT):
    return x / warmup if x < warmup else 1.0


def _warmup_linear(x, warmup=WARMUP_DEFAULT):
    return x / warmup if x < warmup else max((x - 1.0) / (warmup - 1.0), 0.0)


def _warmup_poly(x, warmup=WARMUP_DEFAULT, degree=DEGREE_DEFAULT):
    return x / warmup if x < warmup else max(1.0 - x, 0.0) ** degree


SCHEDULES = {
    "warmup_cosine": _warmup_cosine,
    "warmup_constant": _warmup_constant,
    "warmup_linear": _warmup_linear,
    "warmup_poly": _warmup_poly,
}


class NpuFusedBertAdam(NpuFusedOptimizerBase):
    """BERT's Adam: ``lr`` (required), ``warmup`` (fraction of ``t_total``, -1
    for none), ``t_total`` (-1: constant lr), ``schedule``, ``b1``, ``b2``,
    ``e`` (epsilon), ``weight_decay`` (decoupled), ``max_grad_norm`` (-1: no clipping)."""

    _pickled_attributes = ("max_grad_norm",)

    def __init__(self, params, lr=required, warmup=-1, t_total=-1, schedule="warmup_linear", b1=0.9, b2=0.999,
                 e=1e-6, weight_decay=0.01, max_grad_norm=1.0):
        _refuse_invalid(
            (lr is not required and lr < 0.0, "learning rate", lr),
            ((warmup < 0.0 and warmup != -1) or warmup >= 1.0, "warmup", warmup),
            (schedule not in SCHEDULES, "schedule parameter", schedule),
            (not 0.0 <= b1 < 1.0, "b1 parameter", b1),
            (not 0.0 <= b2 < 1.0, "b2 parameter", b2),
            (e < 0.0, "epsilon value", e))
        defaults = dict(lr=lr, schedule=schedule, warmup=warmup, t_total=t_total, b1=b1, b2=b2, e=e,
                        weight_decay=weight_decay, max_grad_norm=max_grad_norm)
        self.max_grad_norm = max_grad_norm
        super().__init__(params, defaults)

    def _init_param_state(self, p):
        self._init_adam_moments(p)

    def _scheduled_lr(self, group, step):
        if group["t_total"] == -1:
            return group["lr"]
        return group["lr"] * SCHEDULES[group["schedule"]](step / group["t_total"], group["warmup"])

    def _group_step(self, group_index):
        group = self.param_groups[group_index]
        beta1, beta2 = group["b1"], group["b2"]
        max_grad_norm = group.get("max_grad_norm", self.max_grad_norm)
        for params, grads, states in self._buckets(group_index):
            if max_grad_norm > 0:
                clip_coef = max_grad_norm / (_total_norm(grads, 2.0) + 1e-6)
                if clip_coef < 1:
                    for g in grads:
                        g.mul_(clip_coef.to(g.device))
            exp_avgs, exp_avg_sqs = states["exp_avg"], states["exp_avg_sq"]
            torch._foreach_mul_(exp_avgs, beta1)
            torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)

            updates = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_add_(updates, group["e"])
            updates = torch._foreach_div(exp_avgs, updates)
            if group["weight_decay"] > 0.0:
                torch._foreach_add_(updates, params, alpha=group["weight_decay"])
            lrs = []
            for p in params:
                state = self.state[p]
                lrs.append(self._scheduled_lr(group, state["step"]))
                state["step"] += 1
            torch._foreach_mul_(updates, lrs)
            torch._foreach_sub_(params, updates)
