"""torch.ops.npu: normalisation fused with an add, a cast, a quantiser or an
activation (op-plugin's AddRmsNorm*/RmsNorm*Quant, GemmaRmsNorm, AddLayerNorm,
DeepNorm and GroupNorm{Silu,Swish} families), with the backward operators of
the trainable ones.

RMS norm (``rstd = rsqrt(mean(x^2) + epsilon)`` over gamma's dimensions,
``y = x * rstd * gamma (+ beta)``, float32 inside; torch_npu.op_plugin.norm):

- npu_add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1, beta, scales2,
  zero_points2, *, axis=-1, epsilon, div_mode, dst_type) -> (y1, y2, x):
  x = x1 + x2, y = rms_norm(x) + beta, y1/y2 = round(y / scales + zero_points)
  (``y * scales`` with div_mode=False), saturated to int8 (default) or cast to
  float8; y2 is all zeros without scales2, as in the kernel's reference.
- npu_add_rms_norm_dynamic_quant(x1, x2, gamma, *, smooth_scale1,
  smooth_scale2, beta, epsilon, output_mask, y_dtype) -> (y1, y2, x, scale1,
  scale2): per-row symmetric dynamic quantisation of y (times the smooth
  scale): scale = max|row| / qmax (127 int8, 7 int4, 448 / 57344 float8),
  y_i = round(row / scale). Branch 2 runs when output_mask[1], or without
  output_mask when both smooth scales are given; a branch that does not run
  returns empty (0,) tensors, as op-plugin's meta function.
- npu_add_rms_norm_dynamic_mx_quant / npu_rms_norm_dynamic_mx_quant:
  y (rounded to x's dtype, as the kernel stores it) quantised by
  npu_dynamic_mx_quant along the last dimension in 32-blocks (scale_alg 0 or
  1); MX scales are uint8 E8M0 bytes of shape x.shape[:-1] + (ceil(n / 64), 2).
  rstd is always returned (the real op returns an empty rstd unless the inputs
  require grad; op-plugin's meta function gives it its full shape).
- npu_add_rms_norm_cast -> (y float32, y in x's dtype, rstd, x).
- npu_add_rms_norm_v2 (in place: x1 <- y, x2 <- x1 + x2; returns rstd) and
  npu_add_rms_norm_v2_functional -> (rstd, y, x).
- npu_rms_norm_quant (per-tensor scale / offset of one element) and
  npu_rms_norm_quant_v2 (scale of one element or one per column, optional
  offset and beta, div_mode; also returns rstd): round(y / scale + offset)
  (the kernel divides, as aclnnRmsNormQuant documents, though op-plugin's API
  page writes ``* scale``), int8, int4 (torch.quint4x2: eight per int32, low
  nibble first) or float8; npu_rms_norm_quant also hifloat8 (uint8 codes, below).
- _npu_rms_norm_backward_quant: npu_rms_norm_backward's dx (float32)
  quantised statically to int8 (quant_mode "static"), dgamma in float32; rstd
  may be given with or without the normalised dimensions.
- npu_gemma_rms_norm: y = x * rstd * (1 + gamma).

In the add-fused RMS ops the sum x1 + x2 is formed in x1's dtype (the x
output) and that sum is normalised, so each equals npu_add_rms_norm followed by
the separate quantiser (vllm-ascend's fusion replaces exactly that pair).

Layer / group norm (statistics in float32, float64 inputs kept in float64):

- npu_add_layer_norm -> (y, mean, rstd, x) over gamma's dimensions; with x1 and
  x2 of different dtypes y and x are float32, as the op-plugin kernel call
  allocates them. npu_add_layer_norm_backward(dy, x1, x2, rstd, mean, gamma,
  dsum) -> (dx, dx, dgamma, dbeta): dx = layer-norm input gradient + dsum (the
  gradient reaching the x output); a missing dy / dsum counts as zeros.
- npu_deep_norm -> (mean, rstd, y) of layer_norm(alpha * x + gx);
  npu_deep_norm_backward -> (dx = alpha * dgx, dgx, dbeta, dgamma).
- npu_group_norm_silu / npu_group_norm_swish: group norm over dimension 1 (and
  everything after it) then silu / ``y * sigmoid(swish_scale * y)``; mean and
  rstd of shape (N, group) in the dtype op-plugin's meta function gives.
  npu_group_norm_swish_grad -> (dx, dweight, dbias) of that composition
  (dweight / dbias are zeros where grad_input_mask leaves them out).

Every backward operator equals autograd through the forward formula; the
forward operators are compositions of differentiable ATen ops, so autograd
through them needs no backward operator.

HiFloat8 output (dst_dtype=torch_npu.hifloat8) is emulated for npu_rms_norm_quant, the
one op here whose documentation lists it: the float result of its formula
(before rounding) is encoded with torch_npu._hifloat8.encode (nearest, ties away
from zero, saturating at +-32768; HiFloat8 has no CAST_RINT) and returned as
uint8 codes, the dtype op-plugin's meta gives. The other quantising ops raise
"not supported on vNPU" for hifloat8: their documentation lists no hifloat8 output.
"""

import math

import torch
import torch.nn.functional as F

from torch_npu import _dtypes, _hifloat8
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.dynamic_quant import _TARGETS, _finish
from torch_npu.op_plugin.mx_quant import npu_dynamic_mx_quant
from torch_npu.op_plugin.norm import npu_rms_norm, npu_rms_norm_backward

_HALVES = (torch.float16, torch.bfloat16)
_FLOATS = _HALVES + (torch.float32,)
_D = _dtypes.DType
_HIF8 = _D.hifloat8
# dst_type codes: torch's ScalarType numbers and torch_npu's constants.
_INT8 = (1, _D.int8)
_INT4 = (16,)
_INT4_ANY = (16, _D.int4)
_FP8 = (23, 24, _D.float8_e5m2, _D.float8_e4m3fn)
_FP4 = (_D.float4_e2m1fn_x2, _D.float4_e1m2fn_x2)
_TORCH_NAMES = {1: "torch.int8", 16: "torch.quint4x2", 23: "torch.float8_e5m2", 24: "torch.float8_e4m3fn"}


def _name(code):
    return _TORCH_NAMES.get(code) or _dtypes.NAMES.get(code, str(code))


def _dtype_name(d):
    return " or ".join(str(t) for t in d)


# ------------------------------------------------------------------ argument checks


def _check_dtype(fn, name, t, dtypes):
    check(t.dtype in dtypes, f"{fn}: {name} should be {_dtype_name(dtypes)}, got {t.dtype}.")


def _check_same(fn, x1, x2, n1="x1", n2="x2", dtype=True):
    check(x1.shape == x2.shape, f"{fn}: {n1} {list(x1.shape)} and {n2} {list(x2.shape)} should have the same shape.")
    check(not dtype or x1.dtype == x2.dtype,
          f"{fn}: {n1} ({x1.dtype}) and {n2} ({x2.dtype}) should have the same dtype.")
    check(x1.device == x2.device, f"{fn}: {n2} is on {x2.device} but {n1} is on {x1.device}; Expected all tensors "
          "to be on the same device.")


def _norm_dims(fn, x, gamma, name="gamma", x_name="x"):
    """The dimensions of x that gamma normalises (its last gamma.dim() ones)."""
    nd = gamma.dim()
    check(nd >= 1 and x.dim() >= nd and list(x.shape[x.dim() - nd:]) == list(gamma.shape),
          f"{fn}: {name} of shape {list(gamma.shape)} should match the last dimensions of {x_name}, whose shape is "
          f"{list(x.shape)}.")
    check(gamma.is_floating_point(), f"{fn}: {name} should be a floating tensor, got {gamma.dtype}.")
    check(x.device == gamma.device, f"{fn}: {name} is on {gamma.device} but {x_name} is on {x.device}; Expected all "
          "tensors to be on the same device.")
    return tuple(range(x.dim() - nd, x.dim()))


def _check_like(fn, name, t, ref, ref_name="gamma"):
    if t is not None:
        check(t.shape == ref.shape, f"{fn}: {name} of shape {list(t.shape)} should have {ref_name}'s shape "
                                    f"{list(ref.shape)}.")
        check(t.device == ref.device, f"{fn}: {name} is on {t.device} but {ref_name} is on {ref.device}.")


def _check_rank(fn, name, t, lo, hi):
    check(lo <= t.dim() <= hi, f"{fn}: {name} should have {lo} to {hi} dimensions, got {t.dim()}.")


def _stat(fn, name, t, x, dims):
    """A saved statistic (mean / rstd) shaped to broadcast over x's normalised dimensions."""
    lead = x.shape[:x.dim() - len(dims)]
    check(t.numel() == math.prod(lead),
          f"{fn}: {name} of shape {list(t.shape)} should hold one value per normalised row of x "
          f"(shape {list(lead) + [1] * len(dims)}).")
    return t.reshape(tuple(lead) + (1,) * len(dims))


def _acc(t):
    """The dtype arithmetic runs in: float32, or float64 for float64 tensors."""
    return t.double() if t.dtype == torch.float64 else t.float()


# ------------------------------------------------------------------ quantisers


# HiFloat8 target: the float result encoded by the codec (uint8 codes; it saturates at +-32768).
_HIF8_TARGET = (torch.uint8, -_hifloat8.MAX, _hifloat8.MAX)


def _quant_target(fn, arg, code, allowed):
    """(dtype, qmin, qmax) of a dst_type code (None: int8)."""
    code = 1 if code is None else code
    if code == _HIF8 and _HIF8 in allowed:
        return _HIF8_TARGET
    check(code != _HIF8, f"{fn}: {arg}=torch_npu.hifloat8 is not supported on vNPU: op-plugin documents "
                         f"hifloat8 output for npu_rms_norm_quant only, not for {fn}.")
    check(code in allowed, f"{fn}: {arg} {_name(code)} is not supported; expected "
                           f"{', '.join(_name(c) for c in allowed)}.")
    return _TARGETS[code]


def _static_quant(fn, y, scale, offset, div_mode, target):
    """round(y / scale + offset) (y * scale with div_mode=False) in the target type; NaN -> 0 for integers."""
    dtype, qmin, qmax = target
    s = scale.to(y.dtype)
    q = y / s if div_mode else y * s
    if offset is not None:
        q = q + offset.to(y.dtype)
    if target is _HIF8_TARGET:
        return _hifloat8.encode(q)
    if not dtype.is_floating_point:
        q = torch.where(torch.isnan(q), torch.zeros_like(q), q)
    return _finish(fn, q, dtype, qmin, qmax)


def _dynamic_quant(fn, y, smooth, target):
    """Per-row symmetric quantisation of float32 y (times smooth): (y_q, scale of shape y.shape[:-1])."""
    dtype, qmin, qmax = target
    if smooth is not None:
        y = y * smooth.float()
    scale = y.abs().amax(-1, keepdim=True) / qmax
    positive = scale > 0
    q = torch.where(positive, y / torch.where(positive, scale, torch.ones_like(scale)), torch.zeros_like(y))
    return _finish(fn, q, dtype, qmin, qmax), scale.squeeze(-1)


def _check_mx(fn, x, scale_alg, round_mode, dst_type):
    check(dst_type in _FP8 + _FP4, f"{fn}: dst_type {_name(dst_type)} is not supported; expected "
                                   f"{', '.join(_name(c) for c in _FP8 + _FP4)}.")
    check(scale_alg in (0, 1), f"{fn}: scale_alg should be 0 or 1, got {scale_alg}.")
    check(round_mode in ("rint", "round", "floor"),
          f"{fn}: round_mode should be 'rint', 'round' or 'floor', got {round_mode!r}.")
    if dst_type in _FP8:
        check(round_mode == "rint", f"{fn}: round_mode should be 'rint' for a float8 dst_type, got {round_mode!r}.")
    else:
        check(scale_alg == 0, f"{fn}: scale_alg should be 0 for a float4 dst_type, got {scale_alg}.")
        check(x.shape[-1] % 2 == 0, f"{fn}: the last dimension of x should be even for a float4 dst_type (two "
                                    f"elements a byte), got shape {list(x.shape)}.")


def _mx_gamma(fn, x, gamma, beta):
    check(gamma.dim() == 1 and gamma.shape[0] == x.shape[-1],
          f"{fn}: gamma should be 1-D with {x.shape[-1]} (the last dimension of x) elements, got shape "
          f"{list(gamma.shape)}.")
    check(gamma.dtype in (x.dtype, torch.float32), f"{fn}: gamma should be {x.dtype} or torch.float32, got "
                                                   f"{gamma.dtype}.")
    _norm_dims(fn, x, gamma)
    if beta is not None:
        _check_like(fn, "beta", beta, gamma)
        check(beta.dtype == gamma.dtype, f"{fn}: beta ({beta.dtype}) should have gamma's dtype ({gamma.dtype}).")


# ------------------------------------------------------------------ RMS norm family


def _rms(x, gamma, beta, epsilon):
    """(float32 rms_norm(x) * gamma + beta, rstd)."""
    y, rstd = npu_rms_norm(x.float(), gamma.float(), epsilon)
    if beta is not None:
        y = y + beta.float()
    return y, rstd


def _add(fn, x1, x2, dtypes, lo=1, hi=8):
    _check_dtype(fn, "x1", x1, dtypes)
    _check_same(fn, x1, x2)
    _check_rank(fn, "x1", x1, lo, hi)
    return x1 + x2


def npu_add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1=None, beta=None, scales2=None, zero_points2=None,
                           *, axis=-1, epsilon=1e-6, div_mode=True, dst_type=None):
    fn = "npu_add_rms_norm_quant"
    check(axis == -1, f"{fn}: axis only supports -1, got {axis}.")
    target = _quant_target(fn, "dst_type", dst_type, _INT8 + _FP8)
    x = _add(fn, x1, x2, _FLOATS)
    _norm_dims(fn, x, gamma)
    for name, t in (("scales1", scales1), ("zero_points1", zero_points1), ("beta", beta), ("scales2", scales2),
                    ("zero_points2", zero_points2)):
        _check_like(fn, name, t, gamma)
    check(zero_points2 is None or scales2 is not None, f"{fn}: zero_points2 needs scales2.")
    y, _ = _rms(x, gamma, beta, epsilon)
    y1 = _static_quant(fn, y, scales1, zero_points1, div_mode, target)
    if scales2 is None:
        y2 = torch.zeros_like(y1)
    else:
        y2 = _static_quant(fn, y, scales2, zero_points2, div_mode, target)
    return y1, y2, x


def npu_add_rms_norm_dynamic_quant(x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None, beta=None,
                                   epsilon=1e-6, output_mask=None, y_dtype=None):
    fn = "npu_add_rms_norm_dynamic_quant"
    target = _quant_target(fn, "y_dtype", y_dtype, _INT8 + _INT4_ANY + _FP8)
    x = _add(fn, x1, x2, _HALVES, lo=2, hi=8)
    check(gamma.dim() == 1, f"{fn}: gamma should be 1-D, got shape {list(gamma.shape)}.")
    _norm_dims(fn, x, gamma)
    for name, t in (("smooth_scale1", smooth_scale1), ("smooth_scale2", smooth_scale2), ("beta", beta)):
        _check_like(fn, name, t, gamma)
    if output_mask is None:
        check(smooth_scale2 is None or smooth_scale1 is not None,
              f"{fn}: smooth_scale2 needs smooth_scale1 when output_mask is not given.")
        out1, out2 = True, smooth_scale1 is not None and smooth_scale2 is not None
    else:
        check(len(output_mask) == 2, f"{fn}: output_mask should hold two booleans, got {list(output_mask)}.")
        out1, out2 = bool(output_mask[0]), bool(output_mask[1])
        check(out1 or out2, f"{fn}: When the output_mask is not empty, at least one of y1 and y2 must be output.")
        check(smooth_scale1 is None or out1, f"{fn}: smooth_scale1 is given, so output_mask[0] should be True.")
        check(smooth_scale2 is None or out2, f"{fn}: smooth_scale2 is given, so output_mask[1] should be True.")
    y, _ = _rms(x, gamma, beta, epsilon)
    outputs = []
    for wanted, smooth in ((out1, smooth_scale1), (out2, smooth_scale2)):
        if wanted:
            outputs.append(_dynamic_quant(fn, y, smooth, target))
        else:
            empty_y = torch.empty(0, dtype=torch.int32 if target[0] is torch.quint4x2 else target[0], device=x.device)
            outputs.append((empty_y, torch.empty(0, dtype=torch.float32, device=x.device)))
    (y1, scale1), (y2, scale2) = outputs
    return y1, y2, x, scale1, scale2


def npu_add_rms_norm_dynamic_mx_quant(x1, x2, gamma, *, beta=None, epsilon=1e-6, scale_alg=0, round_mode="rint",
                                      dst_type=_D.float4_e2m1fn_x2):
    fn = "npu_add_rms_norm_dynamic_mx_quant"
    x = _add(fn, x1, x2, _HALVES, lo=1, hi=7)
    _mx_gamma(fn, x, gamma, beta)
    _check_mx(fn, x, scale_alg, round_mode, dst_type)
    y, rstd = _rms(x, gamma, beta, epsilon)
    q, mxscale = npu_dynamic_mx_quant(y.to(x.dtype), axis=-1, round_mode=round_mode, dst_type=dst_type,
                                      block_size=32, scale_alg=scale_alg)
    return q, x, mxscale, rstd


def npu_rms_norm_dynamic_mx_quant(x, gamma, *, beta=None, epsilon=1e-6, scale_alg=0, round_mode="rint",
                                  dst_type=_D.float4_e2m1fn_x2):
    fn = "npu_rms_norm_dynamic_mx_quant"
    _check_dtype(fn, "x", x, _HALVES)
    _check_rank(fn, "x", x, 1, 7)
    _mx_gamma(fn, x, gamma, beta)
    _check_mx(fn, x, scale_alg, round_mode, dst_type)
    y, rstd = _rms(x, gamma, beta, epsilon)
    q, mxscale = npu_dynamic_mx_quant(y.to(x.dtype), axis=-1, round_mode=round_mode, dst_type=dst_type,
                                      block_size=32, scale_alg=scale_alg)
    return q, mxscale, rstd


def npu_add_rms_norm_cast(x1, x2, gamma, epsilon=1e-6):
    fn = "npu_add_rms_norm_cast"
    x = _add(fn, x1, x2, _FLOATS)
    _norm_dims(fn, x, gamma)
    y, rstd = _rms(x, gamma, None, epsilon)
    return y, y.to(x.dtype), rstd, x


def _add_rms_norm_v2(fn, x1, x2, gamma, epsilon):
    x = _add(fn, x1, x2, _FLOATS)
    _norm_dims(fn, x, gamma)
    y, rstd = _rms(x, gamma, None, epsilon)
    return rstd, y.to(x.dtype), x


def npu_add_rms_norm_v2(x1, x2, gamma, epsilon=1e-6):
    rstd, y, x = _add_rms_norm_v2("npu_add_rms_norm_v2", x1, x2, gamma, epsilon)
    x1.copy_(y)
    x2.copy_(x)
    return rstd


def npu_add_rms_norm_v2_functional(x1, x2, gamma, epsilon=1e-6):
    return _add_rms_norm_v2("npu_add_rms_norm_v2_functional", x1, x2, gamma, epsilon)


def _row_gamma(fn, x, name, t):
    """gamma / beta of shape (n,) or (1, n), n the last dimension of x, as (n,)."""
    n = x.shape[-1]
    check(tuple(t.shape) in ((n,), (1, n)), f"{fn}: {name} should have shape [{n}] or [1, {n}] (n the last "
                                           f"dimension of x), got {list(t.shape)}.")
    check(t.is_floating_point(), f"{fn}: {name} should be a floating tensor, got {t.dtype}.")
    check(t.device == x.device, f"{fn}: {name} is on {t.device} but x is on {x.device}.")
    return t.reshape(n)


def _rms_norm_quant(fn, x, gamma, beta, scale, offset, epsilon, div_mode, dst_dtype, scale_sizes, hif8=False):
    target = _quant_target(fn, "dst_dtype", dst_dtype, _INT8 + _INT4 + _FP8 + ((_HIF8,) if hif8 else ()))
    _check_dtype(fn, "x", x, _FLOATS)
    _check_rank(fn, "x", x, 1, 8)
    gamma = _row_gamma(fn, x, "gamma", gamma)
    if beta is not None:
        beta = _row_gamma(fn, x, "beta", beta)
    sizes = " or ".join(f"[{s}]" for s in scale_sizes)
    check(scale.dim() == 1 and scale.shape[0] in scale_sizes,
          f"{fn}: scale should have shape {sizes}, got {list(scale.shape)}.")
    check(scale.device == x.device, f"{fn}: scale is on {scale.device} but x is on {x.device}.")
    _check_like(fn, "offset", offset, scale, "scale")
    y, rstd = _rms(x, gamma, beta, epsilon)
    return _static_quant(fn, y, scale, offset, div_mode, target), rstd


def npu_rms_norm_quant(x, gamma, beta, scale, offset, epsilon=1e-6, *, dst_dtype=None):
    y, _ = _rms_norm_quant("npu_rms_norm_quant", x, gamma, beta, scale, offset, epsilon, True, dst_dtype, (1,),
                           hif8=True)
    return y


def npu_rms_norm_quant_v2(x, gamma, scale, *, offset=None, beta=None, epsilon=1e-6, div_mode=True, dst_dtype=None):
    n = x.shape[-1] if x.dim() else 1
    return _rms_norm_quant("npu_rms_norm_quant_v2", x, gamma, beta, scale, offset, epsilon, div_mode, dst_dtype,
                           (1, n))


def _npu_rms_norm_backward_quant(dy, x, rstd, gamma, scale_x, *, offset_x=None, div_mode=True, quant_mode="static",
                                 dst_type=1):
    fn = "_npu_rms_norm_backward_quant"
    check(quant_mode == "static", f"{fn}: quant_mode only supports 'static', got {quant_mode!r}.")
    target = _quant_target(fn, "dst_type", dst_type, _INT8)
    _check_dtype(fn, "dy", dy, _FLOATS)
    _check_same(fn, dy, x, "dy", "x")
    check(dy.dim() >= 1, f"{fn}: dy must have at least 1 dimension, but got {dy.dim()}.")
    dims = _norm_dims(fn, x, gamma)
    rstd = _stat(fn, "rstd", rstd, x, dims)
    check(scale_x.numel() == 1, f"{fn}: scale_x should have shape [1], got {list(scale_x.shape)}.")
    check(offset_x is None or offset_x.numel() == 1, f"{fn}: offset_x should have shape [1], got "
                                                     f"{list(offset_x.shape) if offset_x is not None else None}.")
    dx, dgamma = npu_rms_norm_backward(dy.float(), x.float(), gamma.float(), rstd.float())
    div_mode = True if div_mode is None else div_mode
    return _static_quant(fn, dx, scale_x.reshape(()), None if offset_x is None else offset_x.reshape(()), div_mode,
                         target), dgamma


def npu_gemma_rms_norm(self, gamma, epsilon=1e-6):
    fn = "npu_gemma_rms_norm"
    _check_dtype(fn, "self", self, _FLOATS)
    _norm_dims(fn, self, gamma, x_name="self")
    return npu_rms_norm(self, gamma.float() + 1.0, epsilon)


# ------------------------------------------------------------------ layer norm family


def _layer_norm(x, dims, gamma, beta, epsilon):
    """(y, mean, rstd) of x's last len(dims) dimensions, all in x's dtype."""
    return torch.native_layer_norm(x, list(x.shape[x.dim() - len(dims):]), gamma.to(x.dtype), beta.to(x.dtype),
                                   epsilon)


def _layer_norm_backward(dy, x, mean, rstd, gamma, dims):
    """(dx, dgamma, dbeta) of y = (x - mean) * rstd * gamma + beta, everything in x's dtype."""
    xhat = (x - mean) * rstd
    g = dy * gamma.to(x.dtype)
    dx = rstd * (g - g.mean(dims, keepdim=True) - xhat * (g * xhat).mean(dims, keepdim=True))
    lead = tuple(range(x.dim() - len(dims)))
    dgamma = (dy * xhat).sum(lead) if lead else dy * xhat
    dbeta = dy.sum(lead) if lead else dy
    return dx, dgamma, dbeta


def _add_layer_norm_sum(fn, x1, x2, gamma, beta):
    _check_dtype(fn, "x1", x1, _FLOATS + (torch.float64,))
    _check_dtype(fn, "x2", x2, _FLOATS + (torch.float64,))
    _check_same(fn, x1, x2, dtype=False)
    dims = _norm_dims(fn, x1, gamma, x_name="x1")
    if beta is not None:
        _check_like(fn, "beta", beta, gamma)
    out = x1.dtype if x1.dtype == x2.dtype else torch.float32
    return x1.to(out) + x2.to(out), dims


def npu_add_layer_norm(x1, x2, gamma, beta, epsilon=1e-5, additional_output=False):
    x, dims = _add_layer_norm_sum("npu_add_layer_norm", x1, x2, gamma, beta)
    y, mean, rstd = _layer_norm(_acc(x), dims, gamma, beta, epsilon)
    return y.to(x.dtype), mean.float(), rstd.float(), x


def npu_add_layer_norm_backward(dy_opt, x1, x2, rstd, mean, gamma, dsum_opt):
    fn = "npu_add_layer_norm_backward"
    x, dims = _add_layer_norm_sum(fn, x1, x2, gamma, None)
    xa = _acc(x)
    for name, t in (("dy", dy_opt), ("dsum", dsum_opt)):
        if t is not None:
            _check_same(fn, x1, t, "x1", name, dtype=False)
    dy = torch.zeros_like(xa) if dy_opt is None else dy_opt.to(xa.dtype)
    mean = _stat(fn, "mean", mean, x, dims).to(xa.dtype)
    rstd = _stat(fn, "rstd", rstd, x, dims).to(xa.dtype)
    dx, dgamma, dbeta = _layer_norm_backward(dy, xa, mean, rstd, gamma, dims)
    if dsum_opt is not None:
        dx = dx + dsum_opt.to(xa.dtype)
    dx = dx.to(x1.dtype)
    return dx, dx, dgamma.float(), dbeta.float()


def _deep_norm_input(fn, x, gx, gamma, alpha):
    _check_dtype(fn, "x", x, _FLOATS + (torch.float64,))
    _check_same(fn, x, gx, "x", "gx")
    dims = _norm_dims(fn, x, gamma)
    return _acc(x) * alpha + _acc(gx), dims


def npu_deep_norm(x, gx, beta, gamma, alpha=0.3, epsilon=1e-6):
    fn = "npu_deep_norm"
    xs, dims = _deep_norm_input(fn, x, gx, gamma, alpha)
    _check_like(fn, "beta", beta, gamma)
    y, mean, rstd = _layer_norm(xs, dims, gamma, beta, epsilon)
    return mean.float(), rstd.float(), y.to(x.dtype)


def npu_deep_norm_backward(dy, x, gx, gamma, mean, rstd, alpha=0.3):
    fn = "npu_deep_norm_backward"
    xs, dims = _deep_norm_input(fn, x, gx, gamma, alpha)
    _check_same(fn, x, dy, "x", "dy", dtype=False)
    mean = _stat(fn, "mean", mean, x, dims).to(xs.dtype)
    rstd = _stat(fn, "rstd", rstd, x, dims).to(xs.dtype)
    dgx, dgamma, dbeta = _layer_norm_backward(dy.to(xs.dtype), xs, mean, rstd, gamma, dims)
    return (dgx * alpha).to(x.dtype), dgx.to(gx.dtype), dbeta.float(), dgamma.float()


# ------------------------------------------------------------------ group norm family


def _group_shape(fn, input, group, weight, bias, group_name):
    _check_dtype(fn, "input", input, _FLOATS + (torch.float64,))
    _check_rank(fn, "input", input, 2, 8)
    check(group > 0, f"{fn}: {group_name} should be positive, got {group}.")
    n, c = input.shape[0], input.shape[1]
    check(c % group == 0, f"{fn}: input.shape[1] ({c}) should be divisible by {group_name} ({group}).")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            check(t.dim() == 1 and t.shape[0] == c, f"{fn}: {name} should be 1-D with {c} (input.shape[1]) "
                                                    f"elements, got shape {list(t.shape)}.")
            check(t.is_floating_point(), f"{fn}: {name} should be a floating tensor, got {t.dtype}.")
            check(t.device == input.device, f"{fn}: {name} is on {t.device} but input is on {input.device}.")
    return n, c, math.prod(input.shape[2:])


def _group_norm(input, weight, bias, n, c, hw, group, eps):
    xa = _acc(input)
    w = None if weight is None else weight.to(xa.dtype)
    b = None if bias is None else bias.to(xa.dtype)
    return torch.native_group_norm(xa, w, b, n, c, hw, group, eps)


def npu_group_norm_silu(input, weight, bias, group, eps=1e-5):
    fn = "npu_group_norm_silu"
    n, c, hw = _group_shape(fn, input, group, weight, bias, "group")
    y, mean, rstd = _group_norm(input, weight, bias, n, c, hw, group, eps)
    stat = weight.dtype if weight is not None and bias is not None else input.dtype
    return F.silu(y).to(input.dtype), mean.to(stat), rstd.to(stat)


def npu_group_norm_swish(input, num_groups, weight, bias, eps=1e-5, swish_scale=1.0):
    fn = "npu_group_norm_swish"
    n, c, hw = _group_shape(fn, input, num_groups, weight, bias, "num_groups")
    eps = 1e-5 if eps is None else eps
    swish_scale = 1.0 if swish_scale is None else swish_scale
    y, mean, rstd = _group_norm(input, weight, bias, n, c, hw, num_groups, eps)
    out = y * torch.sigmoid(y * swish_scale)
    return out.to(input.dtype), mean.to(weight.dtype), rstd.to(weight.dtype)


def npu_group_norm_swish_grad(grad, input, num_groups, weight, bias, mean, rstd, grad_input_mask, swish_scale=1.0):
    fn = "npu_group_norm_swish_grad"
    n, c, hw = _group_shape(fn, input, num_groups, weight, bias, "num_groups")
    _check_same(fn, input, grad, "input", "grad", dtype=False)
    for name, t in (("mean", mean), ("rstd", rstd)):
        check(t.numel() == n * num_groups, f"{fn}: {name} should have shape [{n}, {num_groups}], got "
                                           f"{list(t.shape)}.")
    check(len(grad_input_mask) == 3, f"{fn}: grad_input_mask should hold three booleans.")
    swish_scale = 1.0 if swish_scale is None else swish_scale
    xa = _acc(input)
    w, b = weight.to(xa.dtype), bias.to(xa.dtype)
    m = mean.reshape(n, num_groups).to(xa.dtype)
    r = rstd.reshape(n, num_groups).to(xa.dtype)
    # The group norm output y again, then the swish derivative at it.
    shape = (n, num_groups, -1)
    xhat = ((xa.reshape(shape) - m.unsqueeze(-1)) * r.unsqueeze(-1)).reshape(xa.shape)
    affine = (1, c) + (1,) * (input.dim() - 2)
    y = xhat * w.reshape(affine) + b.reshape(affine)
    s = torch.sigmoid(y * swish_scale)
    dy = grad.to(xa.dtype) * (s + y * swish_scale * s * (1 - s))
    mask = [True, bool(grad_input_mask[1]), bool(grad_input_mask[2])]
    dx, dw, db = torch.ops.aten.native_group_norm_backward(dy, xa, m, r, w, n, c, hw, num_groups, mask)
    dw = torch.zeros_like(weight) if dw is None else dw.to(weight.dtype)
    db = torch.zeros_like(bias) if db is None else db.to(bias.dtype)
    return dx.to(input.dtype), dw, db


define("npu_add_rms_norm_quant(Tensor x1, Tensor x2, Tensor gamma, Tensor scales1, Tensor? zero_points1, "
       "Tensor? beta=None, Tensor? scales2=None, Tensor? zero_points2=None, *, int axis=-1, float epsilon=1e-06, "
       "bool div_mode=True, int? dst_type=None) -> (Tensor, Tensor, Tensor)", npu_add_rms_norm_quant)
define("npu_add_rms_norm_dynamic_quant(Tensor x1, Tensor x2, Tensor gamma, *, Tensor? smooth_scale1=None, "
       "Tensor? smooth_scale2=None, Tensor? beta=None, float epsilon=1e-6, bool[2]? output_mask=None, "
       "int? y_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)", npu_add_rms_norm_dynamic_quant)
define("npu_add_rms_norm_dynamic_mx_quant(Tensor x1, Tensor x2, Tensor gamma, *, Tensor? beta=None, "
       "float epsilon=1e-06, int scale_alg=0, str round_mode=\"rint\", int dst_type=296) "
       "-> (Tensor, Tensor, Tensor, Tensor)", npu_add_rms_norm_dynamic_mx_quant)
define("npu_add_rms_norm_cast(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
       "-> (Tensor, Tensor, Tensor, Tensor)", npu_add_rms_norm_cast)
define("npu_add_rms_norm_v2(Tensor(a!) x1, Tensor(b!) x2, Tensor gamma, float epsilon=1e-06) -> Tensor",
       npu_add_rms_norm_v2)
define("npu_add_rms_norm_v2_functional(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
       "-> (Tensor, Tensor, Tensor)", npu_add_rms_norm_v2_functional)
define("npu_rms_norm_quant(Tensor x, Tensor gamma, Tensor beta, Tensor scale, Tensor offset, float epsilon=1e-06, *, "
       "int? dst_dtype=None) -> Tensor", npu_rms_norm_quant)
define("npu_rms_norm_quant_v2(Tensor x, Tensor gamma, Tensor scale, *, Tensor? offset=None, Tensor? beta=None, "
       "float epsilon=1e-06, bool div_mode=True, int? dst_dtype=None) -> (Tensor, Tensor)", npu_rms_norm_quant_v2)
define("npu_rms_norm_dynamic_mx_quant(Tensor x, Tensor gamma, *, Tensor? beta=None, float epsilon=1e-06, "
       "int scale_alg=0, str round_mode=\"rint\", int dst_type=296) -> (Tensor, Tensor, Tensor)",
       npu_rms_norm_dynamic_mx_quant)
define("_npu_rms_norm_backward_quant(Tensor dy, Tensor x, Tensor rstd, Tensor gamma, Tensor scale_x, *, "
       "Tensor? offset_x=None, bool? div_mode=True, str quant_mode=\"static\", int? dst_type=1) -> (Tensor, Tensor)",
       _npu_rms_norm_backward_quant)
define("npu_gemma_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)", npu_gemma_rms_norm)
define("npu_add_layer_norm(Tensor x1, Tensor x2, Tensor gamma, Tensor beta, float epsilon=1e-05, "
       "bool additional_output=False) -> (Tensor, Tensor, Tensor, Tensor)", npu_add_layer_norm)
define("npu_add_layer_norm_backward(Tensor? dy_opt, Tensor x1, Tensor x2, Tensor rstd, Tensor mean, Tensor gamma, "
       "Tensor? dsum_opt) -> (Tensor, Tensor, Tensor, Tensor)", npu_add_layer_norm_backward)
define("npu_deep_norm(Tensor x, Tensor gx, Tensor beta, Tensor gamma, float alpha=0.3, float epsilon=1e-06) "
       "-> (Tensor, Tensor, Tensor)", npu_deep_norm)
define("npu_deep_norm_backward(Tensor dy, Tensor x, Tensor gx, Tensor gamma, Tensor mean, Tensor rstd, "
       "float alpha=0.3) -> (Tensor, Tensor, Tensor, Tensor)", npu_deep_norm_backward)
define("npu_group_norm_silu(Tensor input, Tensor? weight, Tensor? bias, int group, float eps=0.00001) "
       "-> (Tensor, Tensor, Tensor)", npu_group_norm_silu)
define("npu_group_norm_swish(Tensor input, int num_groups, Tensor weight, Tensor bias, float? eps=1e-5, "
       "float? swish_scale=1.0) -> (Tensor, Tensor, Tensor)", npu_group_norm_swish)
define("npu_group_norm_swish_grad(Tensor grad, Tensor input, int num_groups, Tensor weight, Tensor bias, "
       "Tensor mean, Tensor rstd, bool[3] grad_input_mask, float? swish_scale=1.0) -> (Tensor, Tensor, Tensor)",
       npu_group_norm_swish_grad)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
