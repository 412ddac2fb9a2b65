"""LinearQuant: an inference linear layer over quantised integers (A8W8 and A4W4).

Activations and weight are both int8, or both int32 words packing eight int4
values each; the product is accumulated in integers and dequantised by
npu_quant_matmul's formula (see _quant_matmul). The layer only holds the
parameters a quantisation tool produced: nothing here trains.
"""

import torch
import torch.nn as nn

from ._quant_matmul import declare_quant_linear, quant_linear, unpack_int4

__all__ = ["LinearQuant"]

# Packed int4 travels as int32 words; plain int8 as itself.
_PACKED_INT4 = torch.int32
_INTEGER_DTYPES = (torch.int8, _PACKED_INT4)


class LinearQuant(nn.Module):
    """LinearQuant(in_features, out_features, *, bias=True, offset=False, pertoken_scale=False,
    device=None, dtype=None, output_dtype=None).

    Load ``weight`` and ``scale`` (per output channel, or a single value) and,
    when enabled, ``offset``, ``pertoken_scale`` and the int32 ``bias`` before
    the first call. ``output_dtype`` is int8 when None, or float16 / bfloat16;
    int32 returns the integer accumulator, ignoring the scales. ``dtype`` is
    accepted for torch_npu's signature and not used.
    """

    def __init__(self, in_features, out_features, *, bias=True, offset=False, pertoken_scale=False,
                 device=None, dtype=None, output_dtype=None):
        super().__init__()
        declare_quant_linear(self, in_features, out_features, device,
                             bias=bias, offset=offset, pertoken_scale=pertoken_scale)
        self.output_dtype = output_dtype

    def forward(self, linear_quant_input):
        activations, weight = linear_quant_input, self.weight
        if activations.dtype not in _INTEGER_DTYPES or activations.dtype != weight.dtype:
            raise ValueError("input and weight should be both torch.int32 or both torch.int8 datatype, "
                             f"but now input is {activations.dtype}, weight is {weight.dtype}.")
        if activations.dtype == _PACKED_INT4:
            # Both operands pack along the reduction dim, so both widen to int8 alike.
            activations, weight = unpack_int4(activations), unpack_int4(weight)
        return quant_linear(self, activations, weight, fn="LinearQuant")
