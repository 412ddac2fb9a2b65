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


def _ramped(after_warmup):
    """A schedule ``f(x, warmup)`` that rises linearly to 1 over [0, warmup), then follows ``after_warmup``."""
    def schedule(x, warmup=WARMUP_DEFAULT):
        if x < warmup:
            return x / warmup
        return after_warmup(x, warmup)
    return schedule


def _cosine_decay(x, warmup):
    return 0.5 * (1.0 + math.cos(math.pi * x))


def _no_decay(x, warmup):
    return 1.0


def _linear_decay(x, warmup):
    # from 1 at x = warmup to 0 at x = 1, and 0 from there on
    return max((x - 1.0) / (warmup - 1.0), 0.0)


def _poly_decay(x, warmup):
    remaining = max(1.0 - x, 0.0)  # past t_total the formula would take a root of a negative number
    return remaining ** DEGREE_DEFAULT


# schedule name -> lr factor as a function of (progress = step / t_total, warmup)
SCHEDULES = {
    "warmup_cosine": _ramped(_cosine_decay),
    "warmup_constant": _ramped(_no_decay),
    "warmup_linear": _ramped(_linear_decay),
    "warmup_poly": _ramped(_poly_decay),
}

# Added to the norm before dividing, so that all-zero gradients give a finite coefficient.
_CLIP_EPS = 1e-6


def _clip_together(grads, max_norm) -> None:
    """Scales the bucket's gradients in place so that their joint L2 norm is at most ``max_norm``."""
    coefficient = max_norm / (_total_norm(grads, 2.0) + _CLIP_EPS)
    if coefficient >= 1:
        return
    for grad in grads:
        grad.mul_(coefficient.to(grad.device))


class NpuFusedBertAdam(NpuFusedOptimizerBase):
    """BERT's Adam: ``lr`` (required), ``warmup`` (fraction of ``t_total``, -1
    for none), ``t_total`` (-1: constant lr), ``schedule``, ``b1``, ``b2``,
    ``e`` (epsilon), ``weight_decay`` (decoupled), ``max_grad_norm`` (-1: no clipping)."""

    # An attribute (as in torch_npu) besides the per-group value: it has to survive pickling.
    _pickled_attributes = ("max_grad_norm",)

    def __init__(self, params, lr=required, warmup=-1, t_total=-1, schedule="warmup_linear", b1=0.9, b2=0.999,
                 e=1e-6, weight_decay=0.01, max_grad_norm=1.0):
        bad_warmup = warmup >= 1.0 or (warmup < 0.0 and warmup != -1)   # -1: no warmup
        _refuse_invalid(
            (lr is not required and lr < 0.0, "learning rate", lr),
            (bad_warmup, "warmup", warmup),
            (schedule not in SCHEDULES, "schedule parameter", schedule),
            (not 0.0 <= b1 < 1.0, "b1 parameter", b1),
            (not 0.0 <= b2 < 1.0, "b2 parameter", b2),
            (e < 0.0, "epsilon value", e))
        self.max_grad_norm = max_grad_norm
        super().__init__(params, dict(
            lr=lr, schedule=schedule, warmup=warmup, t_total=t_total, b1=b1, b2=b2, e=e,
            weight_decay=weight_decay, max_grad_norm=max_grad_norm))

    def _init_param_state(self, p):
        self._init_adam_moments(p)

    def _advance_lrs(self, group, params):
        """Each parameter's learning rate for this step (its own step count), counting the step."""
        lrs = []
        for param in params:
            state = self.state[param]
            progress_factor = 1.0
            if group["t_total"] != -1:
                schedule = SCHEDULES[group["schedule"]]
                progress_factor = schedule(state["step"] / group["t_total"], group["warmup"])
            lrs.append(group["lr"] * progress_factor)
            state["step"] += 1
        return lrs

    def _group_step(self, group_index):
        group = self.param_groups[group_index]
        clip_norm = group.get("max_grad_norm", self.max_grad_norm)   # groups from old pickles lack the key
        b1, b2 = group["b1"], group["b2"]
        for params, grads, states in self._buckets(group_index):
            if clip_norm > 0:
                _clip_together(grads, clip_norm)
            m, v = states["exp_avg"], states["exp_avg_sq"]
            # moments: m <- b1 m + (1 - b1) g,  v <- b2 v + (1 - b2) g^2
            torch._foreach_mul_(m, b1)
            torch._foreach_add_(m, grads, alpha=1.0 - b1)
            torch._foreach_mul_(v, b2)
            torch._foreach_addcmul_(v, grads, grads, value=1.0 - b2)
            # direction: m / (sqrt(v) + e), plus the decoupled weight decay; no bias correction (BERT's choice)
            denominators = torch._foreach_add(torch._foreach_sqrt(v), group["e"])
            direction = torch._foreach_div(m, denominators)
            if group["weight_decay"] > 0.0:
                torch._foreach_add_(direction, params, alpha=group["weight_decay"])
            torch._foreach_mul_(direction, self._advance_lrs(group, params))
            torch._foreach_sub_(params, direction)
