"""The batch-norm statistics operators behind ``torch.nn.SyncBatchNorm``, on npu.

ATen has these only for CUDA (no CPU kernel to fall back to), so without them
``SyncBatchNorm`` (and ``convert_sync_batchnorm``'d models) fail on npu with
"Could not run 'aten::batch_norm_stats' with arguments from the 'CPU'
backend"; real torch_npu has them in op-plugin. Each is a composition of ATen
ops with CUDA's semantics (per-channel statistics over every dimension but
1, half inputs keeping float statistics, running statistics updated in
place with the unbiased variance):

- ``batch_norm_stats``: this rank's mean and invstd;
- ``batch_norm_gather_stats_with_counts``: the group's, from every rank's
  mean, invstd and element count;
- ``batch_norm_elemt``: the normalisation with given statistics;
- ``batch_norm_backward_reduce`` / ``batch_norm_backward_elemt``: the
  backward's per-rank sums and the input gradient from the group's sums.
"""

import torch

from torch_npu import _C

_LIB = torch.library.Library("aten", "IMPL")


def _reduced_dims(t):
    return [d for d in range(t.dim()) if d != 1]


def _per_channel(v, like):
    """A (C,) vector shaped to broadcast along dimension 1 of `like`."""
    return v.reshape([1, -1] + [1] * (like.dim() - 2))


def _stats_dtype(t):
    return torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype


def _check_input(name, t):
    if t.dim() < 2:
        raise RuntimeError(f"{name}: expected an input of at least 2 dimensions (N, C, ...), got {t.dim()}")


def _batch_norm_stats(input, eps):
    _check_input("batch_norm_stats", input)
    x = input.to(_stats_dtype(input))
    dims = _reduced_dims(x)
    mean = x.mean(dims)
    var = x.var(dims, unbiased=False)
    return mean, torch.rsqrt(var + eps)


def _batch_norm_elemt(input, weight, bias, mean, invstd, eps):
    _check_input("batch_norm_elemt", input)
    x = input.to(_stats_dtype(input))
    out = (x - _per_channel(mean, x)) * _per_channel(invstd, x)
    if weight is not None:
        out = out * _per_channel(weight.to(x.dtype), x)
    if bias is not None:
        out = out + _per_channel(bias.to(x.dtype), x)
    return out.to(input.dtype)


def _batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps, counts):
    counts = counts.to(mean.dtype).reshape(-1, 1)
    total = counts.sum()  # stays on the device: SyncBatchNorm checks sizes itself
    group_mean = (counts * mean).sum(0) / total
    var = (1.0 / (invstd * invstd) - eps).clamp_min(0)
    group_var = (counts * (var + (mean - group_mean) ** 2)).sum(0) / total
    group_invstd = torch.rsqrt(group_var + eps)
    with torch.no_grad():
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(group_mean.to(running_mean.dtype), alpha=momentum)
        if running_var is not None:
            unbiased = group_var * (total / (total - 1))
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
    return group_mean, group_invstd


def _batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g):
    dtype = _stats_dtype(input)
    dy = grad_out.to(dtype)
    x = input.to(dtype)
    dims = _reduced_dims(x)
    sum_dy = dy.sum(dims)
    sum_dy_xmu = (dy * (x - _per_channel(mean, x))).sum(dims)
    empty = sum_dy.new_empty(0)
    # Outputs nobody asked for are empty (CUDA leaves them undefined).
    grad_weight = (sum_dy_xmu * invstd).to(weight.dtype) if weight_g and weight is not None else empty
    grad_bias = sum_dy.to(weight.dtype if weight is not None else dtype) if bias_g else empty
    if not input_g:
        sum_dy, sum_dy_xmu = empty, empty
    return sum_dy, sum_dy_xmu, grad_weight, grad_bias


def _batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    dtype = _stats_dtype(input)
    dy = grad_out.to(dtype)
    x = input.to(dtype)
    total = count.to(dtype).sum()
    mean_dy = _per_channel(sum_dy / total, x)
    mean_dy_xmu = _per_channel(sum_dy_xmu / total, x)
    inv = _per_channel(invstd, x)
    scale = inv if weight is None else inv * _per_channel(weight.to(dtype), x)
    grad_in = (dy - mean_dy - (x - _per_channel(mean, x)) * inv * inv * mean_dy_xmu) * scale
    return grad_in.to(input.dtype)


for _name, _kernel in (
        ("batch_norm_stats", _batch_norm_stats),
        ("batch_norm_elemt", _batch_norm_elemt),
        ("batch_norm_gather_stats_with_counts", _batch_norm_gather_stats_with_counts),
        ("batch_norm_backward_reduce", _batch_norm_backward_reduce),
        ("batch_norm_backward_elemt", _batch_norm_backward_elemt)):
    _LIB.impl(_name, _kernel, "PrivateUse1")
    _C._note_op_route("aten::" + _name, "python_composite")
