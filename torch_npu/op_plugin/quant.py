"""Quantised matrix products: npu_quant_matmul (int8 x int8, dequantised on
the way out) and npu_weight_quant_batchmatmul (float activations x an int8
weight dequantised on the way in).

npu_quant_matmul (QuantBatchMatmul):

    acc = x1 @ x2                       int32 accumulation (exact here, see below)
    y   = (acc + bias_int32) * scale [* pertoken_scale per row] [+ bias_float] [+ offset]

then ``output_dtype``: int8 (the default; rounded half to even, saturated to
[-128, 127]), float16 or bfloat16. output_dtype=torch.int32 (int8 inputs,
a float32 / bfloat16 scale, an int32 bias or none) returns the accumulator
itself, ``x1 @ x2 (+ bias)``: CANN's QuantMatmul documents that its scales
take no part in that case (aclnnQuantMatmulV5, "各scale实际不参与计算"). An int32 bias is added to the accumulator; a float bias (the
bfloat16 / float16 output variants) after dequantisation. ``scale`` of
dtype int64 is what npu_trans_quant_param makes: the float32 bits sit in the
low 32 bits. The product is summed in float64, exact for every int8 / int4
matrix an emulator can hold (|sum| < 2^53), so the result equals an int32
accumulation.

npu_weight_quant_batchmatmul (WeightQuantBatchMatmul):

    W = (weight + antiquant_offset) * antiquant_scale      in x's dtype
    y = x @ W + bias                                      float32 accumulation, x's dtype

per output channel (scale (n,) or (1, n)) or per group of
``antiquant_group_size`` rows of k (scale (ceil(k / group), n)); with
``quant_scale`` the result is requantised to int8,
round(y * quant_scale + quant_offset) saturated.

int4 (int32 tensors): eight signed 4-bit values per int32 along the last
dimension, lowest nibble first, as npu_quantize packs them: x1 is (m, k // 8),
x2 (k, n // 8), or (k // 8, n) as the transpose of a contiguous (n, k // 8). Inference
operators: real torch_npu registers no backward for either.

npu_ifmr (the IFMR calibration of AMCT) searches the int8 scale / offset
that minimise the squared quantisation error of ``data``: an initial range
from the ``cumsum`` histogram's percentiles, scaled by each factor of
arange(search_start, search_end, search_step), the factor with the least
error wins (the first one on ties).
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.tensor_ops import _pack_int4, _unpack_int4

_QMM_OUTPUT_DTYPES = (None, torch.int8, torch.float16, torch.bfloat16, torch.int32)


def _scale_value(scale):
    """float32 value of a dequantisation scale (int64 scales carry float32 bits)."""
    if scale.dtype == torch.int64:
        low = scale & 0xFFFFFFFF
        low = torch.where(low >= 2 ** 31, low - 2 ** 32, low).to(torch.int32)
        return low.view(torch.float32)
    return scale.float()


def _saturate_int8(y):
    return torch.round(y).clamp(-128, 127).to(torch.int8)


def npu_quant_matmul(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None, output_dtype=None,
                     group_sizes=None):
    fn = "npu_quant_matmul"
    check(output_dtype in _QMM_OUTPUT_DTYPES,
          f"{fn}: output_dtype {output_dtype} is not supported on vNPU; supported: torch.int8 (or None), "
          f"torch.float16, torch.bfloat16, torch.int32.")
    if output_dtype == torch.int32:
        check(x1.dtype == torch.int8, f"{fn}: output_dtype torch.int32 needs int8 x1 and x2, got {x1.dtype}.")
        check(scale.dtype in (torch.float32, torch.bfloat16),
              f"{fn}: output_dtype torch.int32 needs a float32 or bfloat16 scale, got {scale.dtype}.")
        check(bias is None or bias.dtype == torch.int32,
              f"{fn}: output_dtype torch.int32 needs an int32 bias or none, got {bias.dtype if bias is not None else None}.")
        check(offset is None and pertoken_scale is None,
              f"{fn}: output_dtype torch.int32 takes no offset and no pertoken_scale.")
    check(x1.dtype in (torch.int8, torch.int32) and x1.dtype == x2.dtype,
          f"{fn}: x1 and x2 should be both int8 or both int32 (packed int4), got {x1.dtype} and {x2.dtype}.")
    check(x1.dim() >= 2 and x2.dim() >= 2,
          f"{fn}: x1 and x2 should have at least 2 dimensions, got {x1.dim()} and {x2.dim()}.")
    check(group_sizes is None or len(group_sizes) == 0,
          f"{fn}: group_sizes (per-group scales) is not supported on vNPU.")
    if x1.dtype == torch.int32:
        x1 = _unpack_int4(x1)
        if x2.shape[-2] * 8 == x1.shape[-1] and x2.transpose(-2, -1).is_contiguous() and not x2.is_contiguous():
            x2 = _unpack_int4(x2.transpose(-2, -1)).transpose(-2, -1)  # packed along k
        else:
            x2 = _unpack_int4(x2)
    check(x1.shape[-1] == x2.shape[-2],
          f"{fn}: the k dimension of x1 ({x1.shape[-1]}) and x2 ({x2.shape[-2]}) should be equal.")
    n = x2.shape[-1]
    check(scale.dtype in (torch.int64, torch.float32, torch.bfloat16),
          f"{fn}: scale should be int64, float32 or bfloat16, got {scale.dtype}.")
    check(scale.dim() == 1 and scale.shape[0] in (1, n),
          f"{fn}: scale should have shape (1,) or ({n},), got {list(scale.shape)}.")
    check(offset is None or output_dtype in (None, torch.int8),
          f"{fn}: offset is only supported when output_dtype is torch.int8.")
    check(pertoken_scale is None or (pertoken_scale.dim() == 1 and pertoken_scale.shape[0] == x1.shape[-2]),
          f"{fn}: pertoken_scale should have shape ({x1.shape[-2]},), "
          f"got {list(pertoken_scale.shape) if pertoken_scale is not None else None}.")
    acc = torch.matmul(x1.double(), x2.double())
    int_bias = bias is not None and bias.dtype == torch.int32
    if int_bias:
        acc = acc + bias.double()
    if output_dtype == torch.int32:
        return acc.to(torch.int64).to(torch.int32)  # the scales take no part (see the module docstring)
    y = acc.float() * _scale_value(scale)
    if pertoken_scale is not None:
        y = y * pertoken_scale.float().unsqueeze(-1)
    if bias is not None and not int_bias:
        y = y + bias.float()
    if offset is not None:
        y = y + offset.float()
    if output_dtype is None or output_dtype == torch.int8:
        return _saturate_int8(y)
    return y.to(output_dtype)


def _per_k(param, k, group_size, dtype):
    """antiquant parameter as a factor of the (k, n) weight: (n,) / (1, n) per
    channel, (ceil(k / group), n) per group."""
    param = param.to(dtype)
    if group_size > 0 and param.dim() == 2 and param.shape[0] > 1:
        return param.repeat_interleave(group_size, dim=0)[:k]
    return param.reshape(-1)


def npu_weight_quant_batchmatmul(x, weight, antiquant_scale, antiquant_offset=None, quant_scale=None,
                                 quant_offset=None, bias=None, antiquant_group_size=0, inner_precise=0,
                                 weight_dtype=None):
    fn = "npu_weight_quant_batchmatmul"
    check(x.dtype in (torch.float16, torch.bfloat16, torch.float32),
          f"{fn}: x should be float16 or bfloat16, got {x.dtype}.")
    check(weight.dtype in (torch.int8, torch.int32),
          f"{fn}: weight should be int8 or int32 (packed int4), got {weight.dtype}.")
    check(weight_dtype is None, f"{fn}: weight_dtype {weight_dtype} is not supported on vNPU.")
    if weight.dtype == torch.int32:
        weight = _unpack_int4(weight)
    check(weight.dim() == 2, f"{fn}: weight should be 2-dimensional (k, n), got {weight.dim()} dimensions.")
    k, n = weight.shape
    check(x.shape[-1] == k, f"{fn}: the last dimension of x ({x.shape[-1]}) should equal k of weight ({k}).")
    check(antiquant_group_size == 0 or (antiquant_group_size % 32 == 0 and 32 <= antiquant_group_size < k),
          f"{fn}: antiquant_group_size should be 0 or a multiple of 32 in [32, k-1], got {antiquant_group_size}.")
    if antiquant_group_size > 0 and antiquant_scale.dim() == 2:
        groups = -(-k // antiquant_group_size)
        check(antiquant_scale.shape[0] == groups and antiquant_scale.shape[1] == n,
              f"{fn}: with antiquant_group_size {antiquant_group_size} antiquant_scale should have shape "
              f"({groups}, {n}), got {list(antiquant_scale.shape)}.")
    else:
        check(antiquant_scale.numel() in (1, n),
              f"{fn}: antiquant_scale should have shape ({n},) or (1, {n}), got {list(antiquant_scale.shape)}.")
    w = weight.to(x.dtype)
    if antiquant_offset is not None:
        w = w + _per_k(antiquant_offset, k, antiquant_group_size, x.dtype)
    w = w * _per_k(antiquant_scale, k, antiquant_group_size, x.dtype)
    y = torch.matmul(x.float(), w.float())
    if bias is not None:
        y = y + bias.float()
    if quant_scale is not None:
        y = y * _scale_value(quant_scale).reshape(-1)
        if quant_offset is not None:
            y = y + quant_offset.float().reshape(-1)
        return _saturate_int8(y)
    check(quant_offset is None, f"{fn}: quant_offset needs quant_scale.")
    return y.to(x.dtype)


def npu_ifmr(data, data_min, data_max, cumsum, min_percentile, max_percentile, search_start, search_end,
             search_step, with_offset):
    """(scale, offset), each of shape (1,) float32."""
    fn = "npu_ifmr"
    check(data.is_floating_point(), f"{fn}: data should be a floating-point tensor, got {data.dtype}.")
    check(cumsum.dim() == 1 and cumsum.numel() > 0, f"{fn}: cumsum should be a non-empty 1-D histogram cumsum.")
    check(search_step > 0 and search_end > search_start,
          f"{fn}: the search range [{search_start}, {search_end}) with step {search_step} is empty.")
    x = data.float().reshape(-1)
    bins = cumsum.numel()
    cdf = cumsum.float() / x.numel()
    lo, hi = data_min.float().reshape(-1)[:1], data_max.float().reshape(-1)[:1]
    max_index = (cdf < max_percentile).sum().float()
    min_index = (cdf < 1 - min_percentile).sum().float()
    max_init = max_index / bins * (hi - lo) + lo
    min_init = min_index / bins * (hi - lo) + lo
    steps = torch.arange(search_start, search_end, search_step, dtype=torch.float32, device=data.device)
    if with_offset:
        max_list = max_init.clamp(min=0) * steps
        min_list = min_init.clamp(max=0).expand_as(steps)
        scale = (max_list - min_list) / 255
        scale = torch.where(scale < 1.192092896e-07, torch.ones_like(scale), scale)
        offset = -(torch.round(min_list / scale) + 128)
    else:
        max_list = torch.max(max_init.abs(), min_init.abs()) * steps
        scale = max_list / 127
        offset = torch.zeros_like(scale)
    s, o = scale.unsqueeze(1), offset.unsqueeze(1)  # (steps, 1) against (1, numel)
    quant = (torch.round(x / s) + o).clamp(-128, 127)
    loss = ((quant - o) * s - x).square().sum(dim=1)
    best = torch.argmin(loss)
    return scale[best].reshape(1), offset[best].reshape(1)


def npu_trans_quant_param(scale, offset=None, round_mode=0):
    """float32 scale (and offset) packed into int64 as the quantised matmuls
    read it: the scale's top 19 bits (FP19; round_mode 1 rounds to nearest
    even first, 0 truncates) in bits 0-31, bit 46 set, and the offset rounded
    and saturated to [-256, 255] in bits 37-45 (9 bits)."""
    fn = "npu_trans_quant_param"
    check(scale.dtype == torch.float32, f"{fn}: scale should be float32, got {scale.dtype}.")
    check(scale.dim() in (1, 2) and scale.numel() > 0, f"{fn}: scale should be a non-empty 1-D or 2-D tensor, "
                                                        f"got shape {list(scale.shape)}.")
    check(round_mode in (None, 0, 1), f"{fn}: round_mode should be 0 (truncate) or 1 (round), got {round_mode}.")
    bits = scale.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    if round_mode == 1:
        bits = bits + 0xFFF + ((bits >> 13) & 1)  # to nearest FP19, ties to even
    out = (bits & 0xFFFFE000) | (1 << 46)
    if offset is not None:
        check(offset.dtype == torch.float32, f"{fn}: offset should be float32, got {offset.dtype}.")
        check(offset.dim() in (1, 2), f"{fn}: offset should be 1-D or 2-D, got shape {list(offset.shape)}.")
        off = torch.round(offset).clamp(-256, 255).to(torch.int64) & 0x1FF
        if scale.dim() == 1:
            out, off = torch.broadcast_tensors(out.reshape(-1), off.reshape(-1))
        out = (out & 0x4000FFFFFFFF) | (off << 37)
    return out


def npu_convert_weight_to_int4pack(weight, inner_k_tiles=0):
    """int32 weight of int4 values (k, n) -> int32 (k, n // 8), eight per
    int32 along n, low nibble first (what npu_weight_quant_batchmatmul and
    npu_quant_matmul read)."""
    fn = "npu_convert_weight_to_int4pack"
    check(weight.dtype == torch.int32, f"{fn}: weight should be int32 (holding int4 values), got {weight.dtype}.")
    check(weight.dim() == 2 and weight.shape[-1] % 8 == 0,
          f"{fn}: weight should be 2-D with a last dimension that is a multiple of 8, got {list(weight.shape)}.")
    check(bool(((weight >= -8) & (weight <= 7)).all()), f"{fn}: weight values should be int4, in [-8, 7].")
    return _pack_int4(weight.to(torch.int8))


define("npu_trans_quant_param(Tensor scale, Tensor? offset=None, int? round_mode=0) -> Tensor",
       npu_trans_quant_param)
define("npu_convert_weight_to_int4pack(Tensor weight, int inner_k_tiles=0) -> Tensor",
       npu_convert_weight_to_int4pack)
define("npu_quant_matmul(Tensor x1, Tensor x2, Tensor scale, *, Tensor? offset=None, Tensor? pertoken_scale=None, "
       "Tensor? bias=None, ScalarType? output_dtype=None, SymInt[]? group_sizes=None) -> Tensor", npu_quant_matmul)
define("npu_weight_quant_batchmatmul(Tensor x, Tensor weight, Tensor antiquant_scale, Tensor? antiquant_offset=None, "
       "Tensor? quant_scale=None, Tensor? quant_offset=None, Tensor? bias=None, int antiquant_group_size=0, "
       "int inner_precise=0, int? weight_dtype=None) -> Tensor", npu_weight_quant_batchmatmul)
define("npu_ifmr(Tensor data, Tensor data_min, Tensor data_max, Tensor cumsum, float min_percentile, "
       "float max_percentile, float search_start, float search_end, float search_step, bool with_offset) "
       "-> (Tensor, Tensor)", npu_ifmr)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
