"""LinearWeightQuant: y = x @ dequant(W) + bias with an int8 weight and float activations.

Real torch_npu runs npu_weight_quant_batchmatmul (WeightQuantBatchMatmul):
the weight (in_features, out_features) is dequantised on the fly,

    W_f = (W + antiquant_offset) * antiquant_scale

per output channel (shape (n,)), or per group of ``antiquant_group_size``
rows of k (scale/offset of shape (ceil(k / group), n)), computed in x's
dtype; the product accumulates in float32 and is returned in x's dtype.
With ``quant_scale`` the result is requantised to int8:
round(y * quant_scale + quant_offset), saturated. This is that formula in
ATen operators. Inference only.
"""

import torch
import torch.nn as nn
from torch.nn.parameter import Parameter

__all__ = ["LinearWeightQuant"]


def _per_row(param, k, group_size):
    """A per-channel (n,) or per-group (groups, n) parameter, expanded to (k, n) or kept (n,)."""
    if group_size > 0 and param.dim() == 2:
        return param.repeat_interleave(group_size, dim=0)[:k]
    return param


class LinearWeightQuant(nn.Module):
    """LinearWeightQuant(in_features, out_features, bias=True, device=None, dtype=None,
    antiquant_offset=False, quant_scale=False, quant_offset=False, antiquant_group_size=0,
    weight_dtype=None).

    Set ``weight`` (int8, (in_features, out_features), or nn.Linear's
    (out_features, in_features) when the two differ), ``antiquant_scale``
    and the enabled optional parameters before calling. ``weight_dtype``
    other than None / torch.int8 (e.g. hifloat8) is not supported on vNPU.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None,
                 antiquant_offset=False, quant_scale=False, quant_offset=False, antiquant_group_size=0,
                 weight_dtype=None):
        super().__init__()
        if weight_dtype not in (None, torch.int8):
            raise RuntimeError(f"LinearWeightQuant: weight_dtype {weight_dtype} is not supported on vNPU; "
                               f"only int8 weights are.")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.empty((in_features, out_features), device=device), False)
        self.antiquant_scale = Parameter(torch.empty(out_features, device=device), False)

        def optional(enabled):
            return Parameter(torch.empty(out_features, device=device), False) if enabled else None

        self.antiquant_offset = optional(antiquant_offset)
        self.quant_scale = optional(quant_scale)
        self.quant_offset = optional(quant_offset)
        self.bias = optional(bias)
        self.antiquant_group_size = antiquant_group_size

    def forward(self, x):
        weight = self.weight
        k = x.shape[-1]
        if weight.dim() == 2 and weight.shape[0] != k and weight.shape[1] == k:
            # An (out_features, in_features) weight, as nn.Linear stores it
            # (real torch_npu's own test passes one): the kernel reads it transposed.
            weight = weight.t()
        if weight.dim() != 2 or weight.shape[0] != k:
            raise ValueError(f"LinearWeightQuant: weight should be (in_features={k}, out_features), "
                             f"but got {tuple(weight.shape)}")
        # Dequantise into the activations' dtype, as the kernel does, then
        # multiply with float32 accumulation.
        w = weight.to(x.dtype)
        if self.antiquant_offset is not None:
            w = w + _per_row(self.antiquant_offset.to(x.dtype), k, self.antiquant_group_size)
        w = w * _per_row(self.antiquant_scale.to(x.dtype), k, self.antiquant_group_size)
        y = torch.matmul(x.float(), w.float())
        if self.bias is not None:
            y = y + self.bias.float()
        if self.quant_scale is not None:
            y = y * self.quant_scale.float()
            if self.quant_offset is not None:
                y = y + self.quant_offset.float()
            return torch.round(y).clamp(-128, 127).to(torch.int8)
        return y.to(x.dtype)
