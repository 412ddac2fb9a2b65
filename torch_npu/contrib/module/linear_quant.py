"""LinearQuant: y = x W^T with int8 (or packed int4) x and W, dequantised (A8W8 / A4W4).

The module holds the quantised weight (out_features, in_features) and the
dequantisation parameters; forward is npu_quant_matmul's formula (see
_quant_matmul). All parameters are frozen (requires_grad=False): this is
an inference layer, the integer matmul has no gradient.
"""

import torch
import torch.nn as nn
from torch.nn.parameter import Parameter

from ._quant_matmul import quant_matmul, unpack_int4

__all__ = ["LinearQuant"]


class LinearQuant(nn.Module):
    """LinearQuant(in_features, out_features, *, bias=True, offset=False, pertoken_scale=False,
    device=None, dtype=None, output_dtype=None).

    Set ``weight`` (int8, or int32 holding eight int4 each), ``scale``
    (out_features or 1) and the optional ``offset`` / ``pertoken_scale`` /
    ``bias`` (int32) before calling. Output dtype: ``output_dtype`` (int8 when
    None, float16, bfloat16, or int32: the accumulator, scales unused).
    """

    def __init__(self, in_features, out_features, *, bias=True, offset=False, pertoken_scale=False,
                 device=None, dtype=None, output_dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.output_dtype = output_dtype
        self.weight = Parameter(torch.empty((out_features, in_features), device=device), False)
        self.scale = Parameter(torch.empty(out_features, device=device), False)
        self.offset = Parameter(torch.empty(out_features, dtype=torch.float32, device=device), False) \
            if offset else None
        self.pertoken_scale = Parameter(torch.empty(out_features, dtype=torch.float32, device=device),
                                        False) if pertoken_scale else None
        self.bias = Parameter(torch.empty(out_features, dtype=torch.int32, device=device), False) \
            if bias else None

    def forward(self, linear_quant_input):
        x, w = linear_quant_input, self.weight
        if not ((x.dtype == torch.int32 and w.dtype == torch.int32)
                or (x.dtype == torch.int8 and w.dtype == torch.int8)):
            raise ValueError("input and weight should be both torch.int32 or both torch.int8 datatype, "
                             f"but now input is {x.dtype}, weight is {w.dtype}.")
        if x.dtype == torch.int32:  # A4W4: unpack the int4 nibbles of both along k
            x, w = unpack_int4(x), unpack_int4(w)
        return quant_matmul(x, w.transpose(-2, -1), self.scale, offset=self.offset,
                            pertoken_scale=self.pertoken_scale, bias=self.bias,
                            output_dtype=self.output_dtype, fn="LinearQuant")
