"""LinearA8W8Quant: torch_npu's older int8 x int8 quantised linear layer.

LinearQuant replaced it (and adds int4 and the int32 accumulator output); it
stays for the models written against it and warns on construction. Its
forward is the same dequantised integer matmul (see _quant_matmul).
"""

import warnings

import torch
import torch.nn as nn

from ._quant_matmul import declare_quant_linear, quant_linear

__all__ = ["LinearA8W8Quant"]

# None means int8. int32 is missing on purpose: only LinearQuant has it.
_OUTPUT_DTYPES = (None, torch.int8, torch.float16, torch.bfloat16)


class LinearA8W8Quant(nn.Module):
    """LinearA8W8Quant(in_features, out_features, *, bias=True, offset=False, pertoken_scale=False,
    device=None, dtype=None, output_dtype=None).

    Load the int8 ``weight`` (out_features, in_features), ``scale`` and any
    enabled ``offset`` / ``pertoken_scale`` / ``bias`` before calling.
    """

    def __init__(self, in_features, out_features, *, bias=True, offset=False, pertoken_scale=False,
                 device=None, dtype=None, output_dtype=None):
        super().__init__()
        warnings.warn("torch_npu.contrib.module.LinearA8W8Quant is deprecated and will be removed in a future "
                      "version. Use torch_npu.contrib.module.LinearQuant instead.", FutureWarning)
        declare_quant_linear(self, in_features, out_features, device,
                             bias=bias, offset=offset, pertoken_scale=pertoken_scale)
        self.output_dtype = output_dtype

    def forward(self, linear_quant_input):
        # Checked per call, not at construction: output_dtype is a plain attribute users may reassign.
        if self.output_dtype not in _OUTPUT_DTYPES:
            raise ValueError("output_dtype should be torch.int8, torch.float16 or torch.bfloat16, "
                             f"but now it is {self.output_dtype}.")
        return quant_linear(self, linear_quant_input, self.weight, fn="LinearA8W8Quant")
