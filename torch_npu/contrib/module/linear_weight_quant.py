"""LinearWeightQuant: float activations times an int8 weight that is
dequantised on the fly, the layer form of npu_weight_quant_batchmatmul.

    W = (weight + antiquant_offset) * antiquant_scale     in x's dtype
    y = x @ W + bias                                      accumulated in float32, returned in x's dtype
    y = round(y * quant_scale + quant_offset), saturated to int8     only with quant_scale

The weight is (in_features, out_features), the kernel's layout. The
antiquantisation parameters hold one value per output column, (n,), or with
``antiquant_group_size`` g one row per g input rows, (ceil(k / g), n).
vNPU evaluates the formula with ATen operators; nothing here trains.
"""

import torch
import torch.nn as nn
from torch.nn.parameter import Parameter

__all__ = ["LinearWeightQuant"]

_INT8_MIN, _INT8_MAX = -128, 127


def _over_input_rows(param, in_rows, group_size):
    """A per-group parameter (groups, n) repeated to one row per input row, (k, n);
    a per-column one (n,) broadcasts as it is."""
    if group_size <= 0 or param.dim() != 2:
        return param
    return param.repeat_interleave(group_size, dim=0)[:in_rows]


def _as_in_by_out(weight, in_rows):
    """The weight oriented (k, n) for activations of k features.

    nn.Linear's (n, k) layout is accepted too and transposed: torch_npu's
    own test loads one. A square weight is taken as (k, n).
    """
    if weight.dim() == 2 and weight.shape[1] == in_rows != weight.shape[0]:
        weight = weight.t()
    if weight.dim() != 2 or weight.shape[0] != in_rows:
        raise ValueError(f"LinearWeightQuant: weight should be (in_features={in_rows}, out_features), "
                         f"but got {tuple(weight.shape)}")
    return weight


class LinearWeightQuant(nn.Module):
    """LinearWeightQuant(in_features, out_features, bias=True, device=None, dtype=None,
    antiquant_offset=False, quant_scale=False, quant_offset=False, antiquant_group_size=0,
    weight_dtype=None).

    Load the int8 ``weight``, ``antiquant_scale`` and whichever optional
    parameters are enabled before the first call. ``dtype`` is accepted for
    torch_npu's signature and not used; ``weight_dtype`` must be None or
    int8 on vNPU (the other packed formats are not emulated).
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None,
                 antiquant_offset=False, quant_scale=False, quant_offset=False, antiquant_group_size=0,
                 weight_dtype=None):
        super().__init__()
        if weight_dtype is not None and weight_dtype != torch.int8:
            raise RuntimeError(f"LinearWeightQuant: weight_dtype {weight_dtype} is not supported on vNPU; "
                               f"only int8 weights are.")
        self.in_features, self.out_features = in_features, out_features
        self.antiquant_group_size = antiquant_group_size

        def frozen(*shape):
            # Placeholders for values the user loads from a quantisation tool.
            return Parameter(torch.empty(shape, device=device), requires_grad=False)

        self.weight = frozen(in_features, out_features)
        self.antiquant_scale = frozen(out_features)
        # Declared in this order (the state_dict's): the optional per-column values.
        for name, wanted in (("antiquant_offset", antiquant_offset), ("quant_scale", quant_scale),
                             ("quant_offset", quant_offset), ("bias", bias)):
            setattr(self, name, frozen(out_features) if wanted else None)

    def _dequantised(self, weight, dtype):
        rows, group = weight.shape[0], self.antiquant_group_size
        dequantised = weight.to(dtype)
        if self.antiquant_offset is not None:
            dequantised = dequantised + _over_input_rows(self.antiquant_offset.to(dtype), rows, group)
        return dequantised * _over_input_rows(self.antiquant_scale.to(dtype), rows, group)

    def _requantised(self, y):
        y = y * self.quant_scale.float()
        if self.quant_offset is not None:
            y = y + self.quant_offset.float()
        return y.round().clamp(_INT8_MIN, _INT8_MAX).to(torch.int8)

    def forward(self, x):
        weight = _as_in_by_out(self.weight, x.shape[-1])
        y = x.float() @ self._dequantised(weight, x.dtype).float()
        if self.bias is not None:
            y = y + self.bias.float()
        if self.quant_scale is None:
            return y.to(x.dtype)
        return self._requantised(y)
