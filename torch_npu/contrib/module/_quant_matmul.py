"""The integer matmul + dequantisation shared by the quantised linear modules.

Real torch_npu's npu_quant_matmul (QuantBatchMatmul) multiplies int8 (or
int4, packed eight to an int32) matrices with int32 accumulation and
dequantises on the way out:

    y = (x1 @ x2 + bias) * scale [* pertoken_scale per row] [+ offset]

then casts to ``output_dtype``: float16 / bfloat16, or int8 (the default,
rounded half to even and saturated to [-128, 127]); int32 (LinearQuant
only) is the accumulator itself, ``x1 @ x2 + bias``, whose scales take no part. The modules check their
arguments here (with real torch_npu's ValueError messages) and compute
through vNPU's torch_npu.npu_quant_matmul (torch_npu/op_plugin/quant.py).

int4 packing (int32 inputs): eight signed 4-bit values per int32 along the
last dim, lowest nibble first, as npu_quantize packs them.
"""

import torch
from torch.nn.parameter import Parameter

__all__ = ["quant_matmul", "unpack_int4", "dequant_scale", "declare_quant_linear", "quant_linear"]

_OUTPUT_DTYPES = (None, torch.int8, torch.float16, torch.bfloat16, torch.int32)


def unpack_int4(packed):
    """(..., k // 8) int32 -> (..., k) int8 of the signed nibbles, lowest nibble first."""
    shifts = torch.arange(0, 32, 4, device=packed.device, dtype=torch.int32)
    nibbles = (packed[..., None] >> shifts) & 0xF
    nibbles = torch.where(nibbles >= 8, nibbles - 16, nibbles)
    return nibbles.reshape(*packed.shape[:-1], packed.shape[-1] * 8).to(torch.int8)


def dequant_scale(scale):
    """The float32 value of a scale: float scales as they are; an int64 scale (what
    npu_trans_quant_param produces) carries the float32 bits in its low 32 bits."""
    if scale.dtype == torch.int64:
        low = (scale & 0xFFFFFFFF).to(torch.int64)
        low = torch.where(low >= 2 ** 31, low - 2 ** 32, low).to(torch.int32)
        return low.view(torch.float32)
    return scale.float()


def quant_matmul(x1, x2, scale, offset=None, pertoken_scale=None, bias=None, output_dtype=None,
                 fn="npu_quant_matmul"):
    """(x1 @ x2 + bias) * scale ... as described in the module docstring; x2 is (k, n) (int4: unpacked)."""
    if output_dtype not in _OUTPUT_DTYPES:
        raise RuntimeError(f"{fn}: output_dtype {output_dtype} is not supported on vNPU; "
                           f"supported: torch.int8 (or None), torch.float16, torch.bfloat16, torch.int32.")
    if x1.dtype not in (torch.int8, torch.int32) or x1.dtype != x2.dtype:
        raise ValueError(f"{fn}: input and weight should be both torch.int32 or both torch.int8 "
                         f"datatype, but now input is {x1.dtype}, weight is {x2.dtype}.")
    if x1.shape[-1] != x2.shape[-2]:
        raise ValueError(f"{fn}: the last dim of the input ({x1.shape[-1]}) should equal the in "
                         f"features of the weight ({x2.shape[-2]}).")
    return torch.ops.npu.npu_quant_matmul(x1, x2, scale, offset=offset, pertoken_scale=pertoken_scale, bias=bias,
                                          output_dtype=output_dtype)


def declare_quant_linear(module, in_features, out_features, device, *, bias, offset, pertoken_scale):
    """Give ``module`` the parameters of a quantised linear layer, uninitialised.

    The user loads them (``module.weight.data = ...``) from a quantisation
    tool's output, so they are allocated empty and frozen: the integer matmul
    has no gradient. ``weight`` (out_features, in_features) and ``scale``
    (out_features) take the default dtype until loaded; the optional
    ``offset`` and ``pertoken_scale`` are float32, ``bias`` int32, and each is
    None when not asked for. Declared in this order, the state_dict order.
    """
    def frozen(*shape, dtype=None):
        return Parameter(torch.empty(shape, dtype=dtype, device=device), requires_grad=False)

    module.in_features = in_features
    module.out_features = out_features
    module.weight = frozen(out_features, in_features)
    module.scale = frozen(out_features)
    module.offset = frozen(out_features, dtype=torch.float32) if offset else None
    module.pertoken_scale = frozen(out_features, dtype=torch.float32) if pertoken_scale else None
    module.bias = frozen(out_features, dtype=torch.int32) if bias else None


def quant_linear(module, x, weight, fn):
    """``x @ weight^T`` dequantised with the parameters ``declare_quant_linear`` gave ``module``."""
    return quant_matmul(x, weight.t(), module.scale, offset=module.offset, pertoken_scale=module.pertoken_scale,
                        bias=module.bias, output_dtype=module.output_dtype, fn=fn)
