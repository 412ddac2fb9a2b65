"""NpuFusedAdamP: AdamP (Heo et al., "AdamP: Slowing Down the Slowdown for
Momentum Optimizers on Scale-invariant Weights").

Per parameter p with gradient g, step t:

    m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2
    denom = sqrt(v) / sqrt(1 - beta2^t) + eps
    d = (beta1 m + (1 - beta1) g) / denom if nesterov else m / denom
    for p of two or more dimensions, first per output channel (rows of
    p.view(p.size(0), -1)), else for the whole tensor: if every
    |cos(g, p)| < delta / sqrt(row length), p looks scale-invariant:
    d -= p_n * <p_n, d> (p_n = p / (||p|| + eps) per row) and the weight
    decay is scaled by wd_ratio
    p *= 1 - lr * weight_decay * ratio      (when weight_decay > 0)
    p -= lr / (1 - beta1^t) * d

(cosines use (||x|| + eps) denominators.) vNPU computes the moments with
foreach ops over each (group, dtype) bucket and the projection per parameter.
As on torch_npu, the arguments are not range-checked.
"""

import math

import torch

from .npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedAdamP"]


def _rows_per_channel(x):
    return x.reshape(x.size(0), -1)


def _rows_whole(x):
    return x.reshape(1, -1)


def _project(p, grad, update, delta, wd_ratio, eps):
    """Removes from ``update`` its radial component when p is scale-invariant;
    returns (update, weight-decay ratio)."""
    expand = [-1] + [1] * (p.dim() - 1)
    for rows in (_rows_per_channel, _rows_whole):
        p_rows, g_rows = rows(p), rows(grad)
        p_norm = p_rows.norm(dim=1).add(eps)
        cosine = (p_rows * g_rows).sum(dim=1).abs() / g_rows.norm(dim=1).add(eps) / p_norm
        if bool(cosine.max() < delta / math.sqrt(p_rows.size(1))):
            unit = p / p_norm.view(expand)
            radial = rows(unit * update).sum(dim=1).view(expand)
            return update - unit * radial, wd_ratio
    return update, 1.0


class NpuFusedAdamP(NpuFusedOptimizerBase):
    """AdamP: Adam whose step loses its radial part on scale-invariant weights."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, delta=0.1, wd_ratio=0.1,
                 nesterov=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, delta=delta, wd_ratio=wd_ratio,
                        nesterov=nesterov)
        super().__init__(params, defaults)

    def _sparse_grad_message(self):
        return "NpuFusedAdamP does not support sparse gradients, please consider SparseAdam instead"

    def _init_param_state(self, p):
        self._init_adam_moments(p)

    def _group_step(self, group_index):
        group = self.param_groups[group_index]
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        for params, grads, states in self._buckets(group_index):
            steps = []
            for p in params:
                self.state[p]["step"] += 1
                steps.append(self.state[p]["step"])
            exp_avgs, exp_avg_sqs = states["exp_avg"], states["exp_avg_sq"]
            torch._foreach_mul_(exp_avgs, beta1)
            torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)

            denoms = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(denoms, [math.sqrt(1 - beta2 ** t) for t in steps])
            torch._foreach_add_(denoms, eps)
            if group["nesterov"]:
                numerators = torch._foreach_mul(exp_avgs, beta1)
                torch._foreach_add_(numerators, grads, alpha=1 - beta1)
            else:
                numerators = exp_avgs
            updates = torch._foreach_div(numerators, denoms)

            for p, grad, update, t in zip(params, grads, updates, steps):
                ratio = 1.0
                if p.dim() > 1:
                    update, ratio = _project(p, grad, update, group["delta"], group["wd_ratio"], eps)
                if weight_decay > 0:
                    p.mul_(1 - lr * weight_decay * ratio)
                p.add_(update, alpha=-lr / (1 - beta1 ** t))
