"""NpuFusedLamb: LAMB (You et al., "Large Batch Optimization for Deep
Learning: Training BERT in 76 minutes"), in the form torch_npu implements.

Per parameter p with gradient g (divided by the global gradient norm first
when ``use_global_grad_norm`` is set and that norm exceeds 1):

    m = beta1 m + (1 - beta1) g
    v = beta2 v + (1 - beta2) g^2
    r = m / (sqrt(v) + eps) + weight_decay * p        (no bias correction)
    w = min(||p||, 10), a = ||r||
    trust = 1 if w == 0 or a == 0 or adam else w / a
    p -= lr * trust * r

vNPU computes it with foreach ops over each (group, dtype) bucket; the
global gradient norm is the float32 L2 norm of all gradients of all groups.
"""

import torch

from .npu_fused_optim_base import NpuFusedOptimizerBase, _refuse_invalid, _total_norm

__all__ = ["NpuFusedLamb"]


class NpuFusedLamb(NpuFusedOptimizerBase):
    """LAMB: Adam's direction rescaled per parameter by the trust ratio
    ||p|| / ||update|| (``adam=True`` keeps the ratio at 1)."""

    _pickled_attributes = ("adam", "use_global_grad_norm", "global_grad_norm")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, adam=False,
                 use_global_grad_norm=False):
        _refuse_invalid(
            (lr < 0.0, "learning rate", lr),
            (not 0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0]),
            (not 0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1]),
            (eps < 0.0, "epsilon value", eps))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self.adam = adam
        self.use_global_grad_norm = use_global_grad_norm
        self.global_grad_norm = torch.ones(1)
        super().__init__(params, defaults)

    def _sparse_grad_message(self):
        return "NpuFusedLamb does not support sparse gradients, please consider SparseAdam instead."

    def _init_param_state(self, p):
        self._init_adam_moments(p)

    def _before_group_steps(self):
        if self.use_global_grad_norm:
            grads = [g for by_dtype in self.combined_grads_indexed_by_group for grads in by_dtype for g in grads]
            if len(grads) > 0:
                self.global_grad_norm = _total_norm(grads, 2.0)

    def _group_step(self, group_index):
        group = self.param_groups[group_index]
        beta1, beta2 = group["betas"]
        eps, weight_decay, lr = group["eps"], group["weight_decay"], group["lr"]
        global_norm = self.global_grad_norm
        divide = self.use_global_grad_norm and bool(global_norm.item() > 1)
        for params, grads, states in self._buckets(group_index):
            for p in params:
                self.state[p]["step"] += 1
            if divide:
                grads = [g / global_norm.to(device=g.device, dtype=g.dtype) for g in grads]
            exp_avgs, exp_avg_sqs = states["exp_avg"], states["exp_avg_sq"]
            torch._foreach_mul_(exp_avgs, beta1)
            torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)

            updates = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_add_(updates, eps)
            updates = torch._foreach_div(exp_avgs, updates)
            if weight_decay != 0:
                torch._foreach_add_(updates, params, alpha=weight_decay)

            if self.adam:
                torch._foreach_add_(params, updates, alpha=-lr)
                continue
            weight_norms = torch._foreach_norm(params)
            update_norms = torch._foreach_norm(updates)
            for p, update, w_norm, u_norm in zip(params, updates, weight_norms, update_norms):
                w_norm = w_norm.clamp(0, 10)
                trust = torch.where((w_norm == 0) | (u_norm == 0), torch.ones_like(w_norm), w_norm / u_norm)
                p.addcmul_(update, trust, value=-lr)
