"""Quantisers: npu_quantize (static scales) and npu_dynamic_quant /
npu_dynamic_quant_asymmetric (op-plugin's DynamicQuant / DynamicQuantV2), the
activation quantisers of w8a8 / w4a8 inference (vllm-ascend) and of
MindSpeed's quantised MoE.

npu_quantize(input, scales, zero_points, dtype, axis=1, div_mode=True):
``round(input / scales + zero_points)`` (div_mode) or
``round(input * scales + zero_points)``, in float32, half to even, saturated
to ``dtype``: torch.qint8 (int8 out), torch.quint8 (uint8), torch.int32, or
(div_mode=False only) torch.quint4x2 (int4, packed as below). ``scales`` and
``zero_points`` run along ``axis`` (size input.shape[axis], or 1); with
div_mode=False the axis is the last one unless ``axis`` is -2, as in the
op-plugin documentation, and they may also be given at input's rank.

In float32, after the optional smoothing ``x = input * smooth_scales``
(per row group with ``group_index``: the cumulative row counts of the groups,
one smooth_scales row each, as MoE experts' tokens; rows after the last
count are not smoothed, as in op-plugin's reference):

    symmetric:   scale = max|x| / qmax             y = round(x / scale)
    asymmetric:  scale = (max x - min x) / (qmax - qmin)
                 offset = qmax - max x / scale      y = round(x / scale + offset)

over each row (quant_mode "pertoken": scale of shape input.shape[:-1]), each
column ("perchannel": reduced over dim -2, smooth_scales one per row of that
dimension; scale of shape input.shape[:-2] + input.shape[-1:]) or the whole
tensor ("pertensor": shape (1,)). Rounding is half to even (``rint``),
saturated to the target. A constant (e.g. all-zero) range has scale 0 and
quantises to 0 (symmetric) or qmax (asymmetric: its offset).
Targets (``dst_type``: a dtype, which the dispatcher passes as its
ScalarType number): int8 (the default; qmax 127), quint4x2 (int4: qmax 7,
eight values per int32 along the last dimension, low nibble first, as
npu_quantize packs them), float8_e4m3fn / float8_e5m2 (symmetric only; qmax
448 / 57344, or ``dst_type_max``; the scaled value is cast to the float8
type, rounding to nearest even).
"""

import torch

from torch_npu import _dtypes
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.tensor_ops import _pack_int4

# dst_type numbers of the supported targets -> (dtype, qmin, qmax): torch's
# ScalarType numbers (a torch.dtype passed as an int) and torch_npu's own
# constants (torch_npu.int8, torch_npu.int4, torch_npu.float8_*; torch_npu/_dtypes.py).
_TARGETS = {
    1: (torch.int8, -128.0, 127.0), _dtypes.DType.int8: (torch.int8, -128.0, 127.0),
    16: (torch.quint4x2, -8.0, 7.0), _dtypes.DType.int4: (torch.quint4x2, -8.0, 7.0),
    24: (torch.float8_e4m3fn, -448.0, 448.0), _dtypes.DType.float8_e4m3fn: (torch.float8_e4m3fn, -448.0, 448.0),
    23: (torch.float8_e5m2, -57344.0, 57344.0), _dtypes.DType.float8_e5m2: (torch.float8_e5m2, -57344.0, 57344.0),
}


def _target(fn, dst_type, dst_type_max, asymmetric):
    check(dst_type is None or dst_type in _TARGETS,
          f"{fn}: dst_type {_dtypes.NAMES.get(dst_type, dst_type)} is not supported on vNPU; expected torch.int8, "
          f"torch.quint4x2 (or torch_npu.int4), torch.float8_e4m3fn or torch.float8_e5m2.")
    dtype, qmin, qmax = _TARGETS[1 if dst_type is None else dst_type]
    floating = dtype.is_floating_point
    check(not (asymmetric and floating), f"{fn}: dst_type {dtype} is not supported for asymmetric quantisation; "
                                         f"expected torch.int8 or torch.quint4x2.")
    if floating and dst_type_max:
        check(0 < dst_type_max <= qmax, f"{fn}: dst_type_max should be in (0, {qmax}] for {dtype}, got "
                                        f"{dst_type_max}.")
        qmin, qmax = -dst_type_max, dst_type_max
    return dtype, qmin, qmax


def _smoothed(fn, x, smooth_scales, group_index, quant_mode):
    check(x.dtype in (torch.float16, torch.bfloat16),
          f"{fn}: input should be float16 or bfloat16, got {x.dtype}.")
    check(x.dim() >= 2, f"{fn}: input should have at least 2 dimensions, got {x.dim()}.")
    check(quant_mode in ("pertoken", "pertensor", "perchannel"),
          f"{fn}: quant_mode should be 'pertoken', 'pertensor' or 'perchannel', got {quant_mode!r}.")
    h = x.shape[-1]
    x32 = x.float()
    if smooth_scales is None:
        check(group_index is None, f"{fn}: group_index needs smooth_scales (one row per group).")
        return x32
    check(smooth_scales.dtype == x.dtype, f"{fn}: smooth_scales should have input's dtype {x.dtype}, got "
                                          f"{smooth_scales.dtype}.")
    if quant_mode == "perchannel":
        check(group_index is None, f"{fn}: group_index is not supported with quant_mode='perchannel'.")
        check(tuple(smooth_scales.shape) == (x.shape[-2],),
              f"{fn}: with quant_mode='perchannel', smooth_scales should have shape [{x.shape[-2]}] (dim -2 of "
              f"input), got {list(smooth_scales.shape)}.")
        return x32 * smooth_scales.float()[:, None]
    if group_index is None:
        check(tuple(smooth_scales.shape) == (h,), f"{fn}: smooth_scales should have shape [{h}] (the last "
                                                  f"dimension of input), got {list(smooth_scales.shape)}.")
        return x32 * smooth_scales.float()
    check(group_index.dtype == torch.int32 and group_index.dim() == 1,
          f"{fn}: group_index should be a 1-D int32 tensor, got {group_index.dtype} of shape "
          f"{list(group_index.shape)}.")
    groups = group_index.shape[0]
    check(tuple(smooth_scales.shape) == (groups, h),
          f"{fn}: with group_index of {groups} groups, smooth_scales should have shape [{groups}, {h}], got "
          f"{list(smooth_scales.shape)}.")
    rows = x32.reshape(-1, h)
    # Row r belongs to the first group whose cumulative count exceeds r; rows
    # beyond the last count get a row of ones.
    group_of_row = torch.searchsorted(group_index.to(torch.int64), torch.arange(rows.shape[0], device=x.device),
                                      right=True)
    scales = torch.cat([smooth_scales.float(), torch.ones(1, h, device=x.device)])
    return (rows * scales[group_of_row]).reshape(x32.shape)


def _reduce(x32, quant_mode, reduce):
    if quant_mode == "pertoken":
        return reduce(x32, -1, True)
    if quant_mode == "perchannel":
        return reduce(x32, -2, True)
    return reduce(x32.reshape(1, -1), -1, True).reshape((1,) * x32.dim())


def _scale_shape(input, quant_mode):
    if quant_mode == "pertoken":
        return input.shape[:-1]
    if quant_mode == "perchannel":
        return input.shape[:-2] + input.shape[-1:]
    return (1,)


def _finish(fn, q, dtype, qmin, qmax):
    if dtype.is_floating_point:
        return q.clamp(qmin, qmax).to(dtype)
    q = torch.round(q).clamp(qmin, qmax).to(torch.int8)
    if dtype is torch.quint4x2:
        check(q.shape[-1] % 8 == 0, f"{fn}: for int4 output the last dimension of input should be a multiple "
                                    f"of 8, got {q.shape[-1]}.")
        return _pack_int4(q)
    return q


def npu_dynamic_quant(input, *, smooth_scales=None, group_index=None, dst_type=None, quant_mode="pertoken",
                      dst_type_max=0.0):
    fn = "npu_dynamic_quant"
    dtype, qmin, qmax = _target(fn, dst_type, dst_type_max, asymmetric=False)
    x = _smoothed(fn, input, smooth_scales, group_index, quant_mode)
    amax = _reduce(x.abs(), quant_mode, lambda t, d, k: t.amax(d, keepdim=k))
    scale = amax / qmax
    q = torch.where(scale > 0, x / torch.where(scale > 0, scale, 1.0), 0.0)
    return _finish(fn, q, dtype, qmin, qmax), scale.reshape(_scale_shape(input, quant_mode))


def npu_dynamic_quant_asymmetric(input, *, smooth_scales=None, group_index=None, dst_type=None,
                                 quant_mode="pertoken", dst_type_max=0.0):
    fn = "npu_dynamic_quant_asymmetric"
    dtype, qmin, qmax = _target(fn, dst_type, dst_type_max, asymmetric=True)
    x = _smoothed(fn, input, smooth_scales, group_index, quant_mode)
    high = _reduce(x, quant_mode, lambda t, d, k: t.amax(d, keepdim=k))
    low = _reduce(x, quant_mode, lambda t, d, k: t.amin(d, keepdim=k))
    scale = (high - low) / (qmax - qmin)
    safe = torch.where(scale > 0, scale, 1.0)
    offset = torch.where(scale > 0, qmax - high / safe, qmax)
    q = torch.where(scale > 0, x / safe, 0.0) + offset
    shape = _scale_shape(input, quant_mode)
    return _finish(fn, q, dtype, qmin, qmax), scale.reshape(shape), offset.reshape(shape)


# c10::ScalarType numbers npu_quantize takes -> (storage dtype, qmin, qmax).
_QUANTIZE_TARGETS = {
    12: (torch.int8, -128.0, 127.0),         # torch.qint8
    13: (torch.uint8, 0.0, 255.0),           # torch.quint8
    3: (torch.int32, -2.0 ** 31, 2.0 ** 31 - 1),
    16: (torch.quint4x2, -8.0, 7.0),
}


def _along(fn, name, t, x, axis):
    """``t`` shaped to broadcast along ``axis`` of x."""
    if t.dim() == x.dim():
        check(all(a in (1, b) for a, b in zip(t.shape, x.shape)),
              f"{fn}: {name} of shape {list(t.shape)} does not broadcast to input's {list(x.shape)}.")
        return t.float()
    check(t.dim() == 1 and t.shape[0] in (1, x.shape[axis]),
          f"{fn}: {name} should be 1-D with {x.shape[axis]} (input.shape[{axis}]) or 1 elements, got shape "
          f"{list(t.shape)}.")
    shape = [1] * x.dim()
    shape[axis] = t.shape[0]
    return t.float().reshape(shape)


def npu_quantize(input, scales, zero_points, dtype, axis=1, div_mode=True):
    fn = "npu_quantize"
    allowed = (12, 13, 3) if div_mode else (12, 16)
    names = "torch.qint8, torch.quint8 or torch.int32" if div_mode else "torch.qint8 or torch.quint4x2"
    check(dtype in allowed, f"{fn}: dtype {dtype} is not supported with div_mode={div_mode}; expected {names}.")
    check(input.dtype in (torch.float32, torch.float16, torch.bfloat16),
          f"{fn}: input should be float32, float16 or bfloat16, got {input.dtype}.")
    check(input.dim() >= 1, f"{fn}: input should have at least one dimension.")
    if div_mode:
        check(-input.dim() <= axis < input.dim(), f"{fn}: axis {axis} is out of range for input of rank "
                                                  f"{input.dim()}.")
        axis %= input.dim()
    else:
        check(axis >= -2, f"{fn}: axis should be -2 or more with div_mode=False, got {axis}.")
        axis = input.dim() - 2 if axis == -2 else input.dim() - 1
        check(axis >= 0, f"{fn}: axis -2 needs input of rank 2 or more.")
    y = input.float()
    s = _along(fn, "scales", scales, input, axis)
    y = y / s if div_mode else y * s
    if zero_points is not None:
        y = y + _along(fn, "zero_points", zero_points, input, axis)
    target, qmin, qmax = _QUANTIZE_TARGETS[dtype]
    q = torch.round(y).clamp(qmin, qmax)
    if target is torch.quint4x2:
        check(q.shape[-1] % 8 == 0, f"{fn}: for torch.quint4x2 the last dimension of input should be a multiple "
                                    f"of 8, got {q.shape[-1]}.")
        return _pack_int4(q.to(torch.int8))
    if target is torch.int32:
        return q.double().clamp(qmin, qmax).to(torch.int32)
    return q.to(target)


def npu_dynamic_block_quant(x, *, min_scale=0.0, round_mode="rint", dst_type=1, row_block_size=1,
                            col_block_size=128, dst_type_max=0.0):
    """Quantises each block of row_block_size x col_block_size elements of
    the last two dimensions (a partial block at the edges counts its own
    elements): scale = max(max|block| / qmax, min_scale), y = x / scale
    rounded half to even (int8: saturated to [-127, 127], as op-plugin's
    reference) or cast (float8). scale has shape
    x.shape[:-2] + (ceil(rows / row_block_size), ceil(cols / col_block_size))."""
    fn = "npu_dynamic_block_quant"
    check(x.dtype in (torch.float16, torch.bfloat16), f"{fn}: x should be float16 or bfloat16, got {x.dtype}.")
    check(x.dim() in (2, 3), f"{fn}: x should be 2-D or 3-D, got {x.dim()}-D.")
    check(round_mode == "rint", f"{fn}: round_mode should be 'rint', got {round_mode!r}.")
    check(min_scale >= 0, f"{fn}: min_scale should be >= 0, got {min_scale}.")
    check(row_block_size >= 1 and col_block_size >= 1,
          f"{fn}: row_block_size and col_block_size should be positive, got {row_block_size} and {col_block_size}.")
    check(dst_type in _TARGETS and _TARGETS[dst_type][0] is not torch.quint4x2,
          f"{fn}: dst_type {_dtypes.NAMES.get(dst_type, dst_type)} is not supported on vNPU; expected torch.int8, "
          f"torch.float8_e5m2 or torch.float8_e4m3fn.")
    dtype, _, qmax = _TARGETS[dst_type]
    if dtype is torch.int8:
        qmax = 127.0
    elif dst_type_max:
        check(0 < dst_type_max <= qmax, f"{fn}: dst_type_max should be in (0, {qmax}], got {dst_type_max}.")
        qmax = dst_type_max
    rows, cols = x.shape[-2], x.shape[-1]
    nr, nc = -(-rows // row_block_size), -(-cols // col_block_size)
    padded = torch.nn.functional.pad(x.float(), (0, nc * col_block_size - cols, 0, nr * row_block_size - rows))
    blocks = padded.reshape(*x.shape[:-2], nr, row_block_size, nc, col_block_size)
    amax = blocks.abs().amax(dim=(-3, -1))
    scale = torch.maximum(amax / qmax, torch.tensor(float(min_scale), device=x.device))
    per = scale.repeat_interleave(row_block_size, -2).repeat_interleave(col_block_size, -1)[..., :rows, :cols]
    q = torch.where(per > 0, x.float() / torch.where(per > 0, per, 1.0), 0.0)
    if dtype is torch.int8:
        y = torch.round(q).clamp(-qmax, qmax).to(torch.int8)
    else:
        y = q.clamp(-qmax, qmax).to(dtype)
    return y, scale


define("npu_dynamic_block_quant(Tensor x, *, float min_scale=0.0, str round_mode=\"rint\", int dst_type=1, "
       "int row_block_size=1, int col_block_size=128, float dst_type_max=0.0) -> (Tensor y, Tensor scale)",
       npu_dynamic_block_quant)
define("npu_quantize(Tensor self, Tensor scales, Tensor? zero_points, int dtype, int axis=1, bool div_mode=True) "
       "-> Tensor", npu_quantize)
define("npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, int? dst_type=None, "
       "str quant_mode=\"pertoken\", float dst_type_max=0.0) -> (Tensor, Tensor)", npu_dynamic_quant)
define("npu_dynamic_quant_asymmetric(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, "
       "int? dst_type=None, str quant_mode=\"pertoken\", float dst_type_max=0.0) -> (Tensor, Tensor, Tensor)",
       npu_dynamic_quant_asymmetric)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
