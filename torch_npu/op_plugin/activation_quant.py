"""Activations fused with quantisation, and the standalone quantisers around them.

Operators (op-plugin's schemas, ``op_plugin_functions.yaml``):

- SwiGLU + int quantisation: ``npu_swiglu_quant`` (SwiGluQuantV2: smoothing per
  MoE group, static or dynamic, int8 / int4) and ``npu_dequant_swiglu_quant``
  (DequantSwigluQuant(V2): int32 matmul accumulators dequantised, SwiGLU or the
  GPT-OSS clamped variant, quantised to int8, float8, HiFloat8 or FP4).
- SwiGLU + MX quantisation: ``npu_swiglu_mx_quant``,
  ``npu_swiglu_mx_quant_with_dual_axis`` and its training counterpart
  ``_npu_swiglu_backward_mx_quant_with_dual_axis`` (the SwiGLU gradient
  quantised along both axes).
- SwiGLU + HiFloat8: ``npu_swiglu_group_quant`` (quant_mode 2 static, 3
  dynamic per MoE group) and ``npu_swiglu_group_quant_backward``.
- GELU: ``npu_gelu_quant`` (static or dynamic, int8 / float8 / HiFloat8) and
  ``npu_gelu_mul`` (gelu(first half) * second half).
- Quantisers: ``npu_group_quant`` (per row group scales, int8 / int4),
  ``npu_grouped_dynamic_block_quant`` (block scales restarting at each group),
  ``npu_quant_max`` (static float8 / HiFloat8 cast plus amax),
  ``npu_kronecker_quant`` (FlatQuant: p1 @ x @ p2, then int4 per token or
  MXFP4), ``npu_rotate_quant`` (block rotation, then per token int8 / int4 or
  MX), ``npu_anti_mx_quant`` (MX dequantisation), and the ``.out`` overloads
  ``_quantize_per_tensor_impl`` / ``_quantize_per_channel_impl`` (aclnnQuantize
  into a given int8 / uint8 / int32 tensor).

Emulation choices:

- Arithmetic is float32 (the kernels' vector unit); results are rounded half to
  even (``torch.round``) and saturated to the target. float8 targets saturate at
  their largest finite value and round to nearest even; FP4 targets are codes
  packed two per byte (element 2i in the low nibble), as mx_quant.py packs
  them; int4 is eight values per int32 (``npu_group_quant``,
  ``npu_kronecker_quant``, ``npu_rotate_quant``) or two per int8
  (``npu_swiglu_quant``, as SwiGluQuantV2 writes it), low nibble first.
- HiFloat8 (Ascend's tapered 8-bit float, torch_npu.hifloat8, stored in uint8):
  sign, a 2-4 bit "dot" prefix that says how many exponent bits follow (4, 3, 2,
  1 or 0; 0000 marks the denormals 2^-22 .. 2^-16), a sign-magnitude exponent
  with an implicit leading one, and 1-3 mantissa bits. Finite values go from
  2^-22 to 32768; 0x80 is NaN and 0x6F / 0xEF are +-inf. Values are rounded to
  the nearest HiFloat8 value, ties away from zero (the kernels' "round" mode,
  the only one they allow for HiFloat8), finite values saturate at +-32768.
  The "hybrid" rounding mode raises "not supported on vNPU".
- MX scales and elements come from mx_quant.py (npu_dynamic_mx_quant and its
  grouped / dual-axis forms): the SwiGLU output is rounded to x's dtype first,
  as the fused kernels keep it in x's dtype in their buffers.
- Rows a kernel leaves unwritten (past the sum of a group_index) are zero here.
- A scale output the kernel does not write (static modes) is zeros; where
  op-plugin returns no tensor (npu_gelu_quant's static scale) the op returns
  None, as real torch_npu does.
- Values that depend on tensor contents (group_index sums) are never read
  back, except argument checks on concrete tensors, so the ops trace under
  FakeTensor / torch.compile.
"""

import collections
import math

import torch

from torch_npu import _dtypes
from torch_npu._hifloat8 import encode as _hif8_encode
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.activation import npu_gelu, npu_swiglu, npu_swiglu_backward
from torch_npu.op_plugin.dynamic_quant import npu_quantize
from torch_npu.op_plugin.mx_quant import (_E1M2, _E2M1, _concrete, _pack, _quantise, npu_dynamic_mx_quant,
                                          npu_dynamic_mx_quant_with_dual_axis, npu_grouped_dynamic_mx_quant)
from torch_npu.op_plugin.tensor_ops import _pack_int4

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_HALVES = (torch.float16, torch.bfloat16)
_ROUND_MODES = ("rint", "round", "floor", "ceil", "trunc")

# ------------------------------------------------------------------ targets

_Target = collections.namedtuple("_Target", "name storage qmax elem")
_INT8 = _Target("torch.int8", torch.int8, 127.0, None)
_INT4 = _Target("torch.quint4x2 (int4)", torch.int8, 7.0, None)
_HIF8 = _Target("torch_npu.hifloat8", torch.uint8, 32768.0, None)
_E5M2 = _Target("torch.float8_e5m2", torch.float8_e5m2, 57344.0, None)
_E4M3 = _Target("torch.float8_e4m3fn", torch.float8_e4m3fn, 448.0, None)
_FP4_E2M1 = _Target("torch_npu.float4_e2m1fn_x2", torch.uint8, 6.0, _E2M1)
_FP4_E1M2 = _Target("torch_npu.float4_e1m2fn_x2", torch.uint8, 1.75, _E1M2)
_D = _dtypes.DType
# dtype numbers (torch's ScalarType numbers and torch_npu's constants) -> target.
_TARGETS = {
    1: _INT8, _D.int8: _INT8, 16: _INT4, _D.int4: _INT4, _D.hifloat8: _HIF8,
    23: _E5M2, _D.float8_e5m2: _E5M2, 24: _E4M3, _D.float8_e4m3fn: _E4M3,
    _D.float4_e2m1fn_x2: _FP4_E2M1, _D.float4_e1m2fn_x2: _FP4_E1M2,
}
_MX = (_E5M2, _E4M3, _FP4_E2M1, _FP4_E1M2)


def _target(fn, name, value, allowed):
    t = _TARGETS.get(value)
    check(t is not None and t in allowed,
          f"{fn}: {name} {_dtypes.NAMES.get(value, value)} is not supported; expected "
          f"{', '.join(a.name for a in allowed)}.")
    return t


def _check_round_mode(fn, target, round_mode):
    check(round_mode in _ROUND_MODES + ("hybrid",),
          f"{fn}: round_mode should be one of {list(_ROUND_MODES)}, got {round_mode!r}.")
    if target is _HIF8:
        check(round_mode != "hybrid", f"{fn}: round_mode 'hybrid' is not supported on vNPU: its HiFloat8 rounding "
                                      "rule is not documented; use 'round'.")
        check(round_mode == "round", f"{fn}: round_mode should be 'round' for torch_npu.hifloat8, got "
                                     f"{round_mode!r}.")
    elif target.elem is not None:
        check(round_mode in ("rint", "round", "floor"),
              f"{fn}: round_mode should be 'rint', 'round' or 'floor' for {target.name}, got {round_mode!r}.")
    else:
        check(round_mode == "rint", f"{fn}: round_mode should be 'rint' for {target.name}, got {round_mode!r}.")


def _round(t, mode):
    if mode == "rint":
        return torch.round(t)
    if mode == "round":  # half away from zero
        return torch.sign(t) * torch.floor(t.abs() + 0.5)
    return {"floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc}[mode](t)


def _to_target(v, target, round_mode="rint"):
    """float32 ``v`` (already scaled) in the target's element type: int8 (int4: int8 values in [-8, 7], packed by
    the caller), float8, HiFloat8 bytes, or FP4 codes packed two per byte."""
    if target.elem is not None:
        return _pack(_quantise(v, 1.0, target.elem, round_mode))
    if target is _HIF8:
        return _hif8_encode(v)
    if target.storage.is_floating_point:
        return v.clamp(-target.qmax, target.qmax).to(target.storage)
    q = _round(torch.nan_to_num(v, nan=0.0), round_mode).clamp(-target.qmax - 1, target.qmax)
    return q.to(torch.int8)


def _pack_int4_in_int8(q):
    """int8 values in [-8, 7] (..., 2n) -> int8 (..., n), two per byte, element 2i in the low nibble."""
    low = q[..., 0::2].to(torch.int16) & 0xF
    high = q[..., 1::2].to(torch.int16) & 0xF
    return ((high << 4) | low).to(torch.uint8).view(torch.int8)


# ------------------------------------------------------------------ shared pieces


def _rows(x):
    n = 1
    for s in x.shape[:-1]:
        n *= s
    return n


def _groups_of_rows(fn, group_index, rows, counts, device, dtypes=(torch.int32, torch.int64)):
    """Group of each row (G for rows past the last group) from cumulative ends or counts."""
    check(group_index.dim() == 1 and group_index.shape[0] >= 1,
          f"{fn}: group_index should be a non-empty 1-D tensor, got shape {list(group_index.shape)}.")
    check(group_index.dtype in dtypes, f"{fn}: group_index should be {' or '.join(str(d) for d in dtypes)}, got "
                                       f"{group_index.dtype}.")
    ends = group_index.to(torch.int64)
    if counts:
        ends = torch.cumsum(ends, 0)
    if _concrete(group_index):
        values = group_index.tolist()
        check(all(v >= 0 for v in values), f"{fn}: group_index should be non-negative, got {values}.")
        check(counts or all(a <= b for a, b in zip(values, values[1:])),
              f"{fn}: group_index (cumulative) should be non-decreasing, got {values}.")
    return torch.searchsorted(ends.to(device), torch.arange(rows, device=device), right=True)


def _table(fn, name, t, groups, width, fill, dtype=torch.float32):
    """Per-group factors as a (groups + 1, width) table, the last row ``fill`` (for rows past the last group):
    t of shape (groups, width), (1, width) or (width,) per channel, (groups,) or (1,) per group."""
    t = t.to(dtype)
    if t.dim() == 2 and t.shape[1] == width and t.shape[0] in (1, groups):
        tab = t.expand(groups, width)
    elif t.dim() == 1 and t.shape[0] == width:
        tab = t.unsqueeze(0).expand(groups, width)
    elif t.dim() == 1 and t.shape[0] in (1, groups):
        tab = t.unsqueeze(1).expand(groups, width)
    else:
        check(False, f"{fn}: {name} should have shape [{groups}, {width}], [{width}] or [{groups}], got "
                     f"{list(t.shape)}.")
    return torch.cat([tab, torch.full((1, width), fill, dtype=dtype, device=tab.device)])


def _swap_halves(v, dim):
    a, b = v.chunk(2, dim)
    return torch.cat((b, a), dim)


def _swiglu(v, dim, activate_left):
    """silu(activated half) * other half; the activated half is the first one when activate_left."""
    return npu_swiglu(v if activate_left else _swap_halves(v, dim), dim)


def _glu(v, dim, activate_left, swiglu_mode, limit, alpha, bias):
    """swiglu_mode 0: SwiGLU; 1: GPT-OSS's clamped variant on (even, odd) elements; 2: the variant on halves."""
    if swiglu_mode == 0:
        return _swiglu(v, dim, activate_left)
    if swiglu_mode == 1:
        moved = v.movedim(dim, -1)
        act, lin = moved[..., 0::2], moved[..., 1::2]
    else:
        a, b = v.movedim(dim, -1).chunk(2, -1)
        act, lin = (a, b) if activate_left else (b, a)
    act = act.clamp(max=limit)
    lin = lin.clamp(min=-limit, max=limit)
    return (act * torch.sigmoid(alpha * act) * (lin + bias)).movedim(-1, dim)


def _check_dim(fn, name, dim, rank):
    check(-rank <= dim < rank, f"{fn}: {name} {dim} is out of range for x of rank {rank} (expected in "
                               f"[{-rank}, {rank - 1}]).")
    return dim % rank


# ------------------------------------------------------------------ npu_swiglu_quant


def npu_swiglu_quant(x, smooth_scales=None, offsets=None, group_index=None, activate_left=False, quant_mode=0,
                     group_list_type=0, dst_type=None):
    fn = "npu_swiglu_quant"
    check(quant_mode in (0, 1), f"{fn}: quant_mode should be 0 (static) or 1 (dynamic), got {quant_mode}.")
    check(group_list_type in (0, 1), f"{fn}: group_list_type should be 0 (cumsum) or 1 (count), got "
                                     f"{group_list_type}.")
    check(dst_type in (None, torch.int8, torch.quint4x2),
          f"{fn}: dst_type should be torch.int8 or torch.quint4x2 (int4), got {dst_type}.")
    target = _INT4 if dst_type == torch.quint4x2 else _INT8
    check(x.dtype in _FLOATS, f"{fn}: x should be float16, bfloat16 or float32, got {x.dtype}.")
    check(x.dim() > 1, f"{fn}: x should have more than 1 dimension, got shape {list(x.shape)}.")
    width = x.shape[-1]
    check(width % 2 == 0, f"{fn}: the last dimension of x should be even, got {width}.")
    check(target is _INT8 or width % 4 == 0,
          f"{fn}: the last dimension of x should be a multiple of 4 for int4 output, got {width}.")
    n = width // 2
    rows = _rows(x)
    act = _swiglu(x.reshape(rows, width).float(), -1, activate_left)
    if group_index is None:
        groups = 1
        group = torch.zeros(rows, dtype=torch.int64, device=x.device)
    else:
        check(group_index.dtype == torch.int32, f"{fn}: group_index should be int32, got {group_index.dtype}.")
        groups = group_index.shape[0] if group_index.dim() == 1 else 0
        group = _groups_of_rows(fn, group_index, rows, group_list_type == 1, x.device)
    if quant_mode == 0:
        check((smooth_scales is None) == (offsets is None) and
              (smooth_scales is None or smooth_scales.shape == offsets.shape),
              f"{fn}: smooth_scales and offsets should have the same shape when quant_mode is 0, got "
              f"{None if smooth_scales is None else list(smooth_scales.shape)} and "
              f"{None if offsets is None else list(offsets.shape)}.")
    for name, t in (("smooth_scales", smooth_scales), ("offsets", offsets)):
        if t is not None:
            check(t.dtype == torch.float32, f"{fn}: {name} should be float32, got {t.dtype}.")
    if smooth_scales is not None:  # rows past the last group are not smoothed
        act = act * _table(fn, "smooth_scales", smooth_scales, groups, n, 1.0)[group]
    if quant_mode == 0:
        if offsets is not None:
            act = act + _table(fn, "offsets", offsets, groups, n, 0.0)[group]
        q = _to_target(act, target)
        scale = torch.zeros(rows, dtype=torch.float32, device=x.device)
    else:  # the kernel's scale is the multiplier: qmax / row max
        amax = act.abs().amax(-1)
        scale = target.qmax / amax
        q = _to_target(torch.where(amax[:, None] > 0, act * scale[:, None], 0.0), target)
    if target is _INT4:
        q = _pack_int4_in_int8(q)
    return q.reshape(*x.shape[:-1], q.shape[-1]), scale.reshape(x.shape[:-1])


# ------------------------------------------------------------------ npu_dequant_swiglu_quant


def npu_dequant_swiglu_quant(x, weight_scale=None, activation_scale=None, bias=None, quant_scale=None,
                             quant_offset=None, group_index=None, activate_left=False, quant_mode=0, dst_type=None,
                             round_mode=None, activate_dim=None, swiglu_mode=0, clamp_limit=7.0, glu_alpha=1.702,
                             glu_bias=1.0):
    fn = "npu_dequant_swiglu_quant"
    check(x.dim() > 1, f"{fn}: x should have more than 1 dimension, got shape {list(x.shape)}.")
    check(quant_mode in (0, 1), f"{fn}: quant_mode should be 0 (static) or 1 (dynamic), got {quant_mode}.")
    check(swiglu_mode in (0, 1, 2), f"{fn}: swiglu_mode should be 0, 1 or 2, got {swiglu_mode}.")
    check(math.isfinite(clamp_limit) and clamp_limit > 0, f"{fn}: clamp_limit should be positive and finite, got "
                                                          f"{clamp_limit}.")
    check(math.isfinite(glu_alpha) and math.isfinite(glu_bias),
          f"{fn}: glu_alpha and glu_bias should be finite, got {glu_alpha} and {glu_bias}.")
    check(x.dtype in (torch.int32, torch.float16, torch.bfloat16),
          f"{fn}: x should be int32, float16 or bfloat16, got {x.dtype}.")
    target = _target(fn, "dst_type", 1 if dst_type is None else dst_type,
                     (_INT8, _HIF8, _E5M2, _E4M3, _FP4_E2M1, _FP4_E1M2))
    if round_mode is None:
        mode = "round" if target is _HIF8 else "rint"
    else:
        check(0 <= round_mode < len(_ROUND_MODES),
              f"{fn}: round_mode should be 0 (rint), 1 (round), 2 (floor), 3 (ceil) or 4 (trunc), got {round_mode}.")
        mode = _ROUND_MODES[round_mode]
    check(target.elem is None or mode in ("rint", "round", "floor"),
          f"{fn}: round_mode '{mode}' is not supported on vNPU for {target.name}: the FP4 rounding emulated here is "
          f"'rint', 'round' or 'floor'.")
    if target.elem is None:
        _check_round_mode(fn, target, mode)
    d = _check_dim(fn, "activate_dim", -1 if activate_dim is None else activate_dim, x.dim())
    last = d == x.dim() - 1
    check(x.shape[d] % 2 == 0, f"{fn}: dimension {d} of x (activate_dim) should be even, got {x.shape[d]}.")
    check(group_index is None or last, f"{fn}: group_index should be None when activate_dim is not the last "
                                       "dimension.")
    check(swiglu_mode != 1 or activate_left, f"{fn}: activate_left should be True with swiglu_mode=1.")
    width = x.shape[-1]
    rows = _rows(x)
    if group_index is None:
        groups = 1
        group = torch.zeros(rows, dtype=torch.int64, device=x.device)
    else:
        check(group_index.dim() == 1, f"{fn}: group_index should be 1-D (token counts per group), got shape "
                                      f"{list(group_index.shape)}.")
        groups = group_index.shape[0]
        group = _groups_of_rows(fn, group_index, rows, True, x.device, dtypes=(torch.int64,))
    valid = group < groups
    for name, t in (("weight_scale", weight_scale), ("activation_scale", activation_scale)):
        if t is not None:
            check(t.dtype == torch.float32, f"{fn}: {name} should be float32, got {t.dtype}.")
    x2 = x.reshape(rows, width)
    if x.dtype == torch.int32:
        if bias is not None and bias.dtype == torch.int32:  # added to the int32 accumulator
            x2 = x2.to(torch.int64) + _table(fn, "bias", bias, groups, width, 0, torch.int64)[group]
        v = x2.float()
        if weight_scale is not None:
            v = v * _table(fn, "weight_scale", weight_scale, groups, width, 1.0)[group]
        if activation_scale is not None:
            check(activation_scale.numel() == rows,
                  f"{fn}: activation_scale should have one value per token ({rows}, x.shape[:-1]), got shape "
                  f"{list(activation_scale.shape)}.")
            v = v * activation_scale.reshape(rows, 1).float()
        if bias is not None and bias.dtype != torch.int32:
            check(bias.dtype in _FLOATS, f"{fn}: bias should be int32, float32, float16 or bfloat16, got "
                                         f"{bias.dtype}.")
            v = v + _table(fn, "bias", bias, groups, width, 0.0)[group]
    else:  # float x is already dequantised (the kernel reads no weight_scale for it)
        check(activation_scale is None and bias is None,
              f"{fn}: activation_scale and bias should be None for {x.dtype} x.")
        v = x2.float()
    out = _glu(v.reshape(x.shape), d, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias)
    out_shape = out.shape
    out = out.reshape(-1, out_shape[-1])
    h = out.shape[-1]
    for name, t in (("quant_scale", quant_scale), ("quant_offset", quant_offset)):
        if t is not None:
            check(t.dtype in _FLOATS, f"{fn}: {name} should be float32, float16 or bfloat16, got {t.dtype}.")
    if quant_mode == 1:
        if quant_scale is not None:  # smoothing
            out = out * _table(fn, "quant_scale", quant_scale, groups, h, 1.0)[group]
        amax = out.abs().amax(-1)
        scale = amax / target.qmax
        q_in = torch.where(amax[:, None] > 0, out * (target.qmax / amax)[:, None], 0.0)
    else:
        if quant_scale is not None:
            out = out / _table(fn, "quant_scale", quant_scale, groups, h, 1.0)[group]
        if quant_offset is not None:
            out = out + _table(fn, "quant_offset", quant_offset, groups, h, 0.0)[group]
        scale = torch.zeros(out.shape[0], dtype=torch.float32, device=x.device)
        q_in = out
    if group_index is not None:  # rows past the groups: left unwritten by the kernel, zero here
        q_in = torch.where(valid[:, None], q_in, 0.0)
        scale = torch.where(valid, scale, 0.0)
    y = _to_target(q_in, target, mode)
    return y.reshape(*out_shape[:-1], y.shape[-1]), scale.reshape(out_shape[:-1])


# ------------------------------------------------------------------ SwiGLU + MX


def _check_mx_common(fn, x, dst_type, scale_alg, round_mode):
    check(x.dtype in _HALVES, f"{fn}: x should be float16 or bfloat16, got {x.dtype}.")
    target = _target(fn, "dst_type", dst_type, _MX)
    check(scale_alg in (0, 1, 2), f"{fn}: scale_alg should be 0, 1 or 2, got {scale_alg}.")
    check(scale_alg != 1 or target.elem is None, f"{fn}: scale_alg=1 is only for float8 dst_type, got "
                                                 f"{target.name}.")
    check(scale_alg != 2 or target is _FP4_E2M1, f"{fn}: scale_alg=2 is only for torch_npu.float4_e2m1fn_x2, got "
                                                 f"{target.name}.")
    _check_round_mode(fn, target, round_mode)
    return target


def _ends(fn, group_index, counts, rows):
    """int32 cumulative group ends; on concrete tensors checks they stay within ``rows``."""
    check(group_index.dim() == 1 and group_index.shape[0] >= 1,
          f"{fn}: group_index should be a non-empty 1-D tensor, got shape {list(group_index.shape)}.")
    check(group_index.dtype == torch.int64, f"{fn}: group_index should be int64, got {group_index.dtype}.")
    ends = torch.cumsum(group_index, 0) if counts else group_index
    if _concrete(group_index):
        values = ends.tolist()
        check(all(v >= 0 for v in group_index.tolist()) and all(a <= b for a, b in zip(values, values[1:])),
              f"{fn}: group_index should be non-negative and its cumulative ends non-decreasing, got "
              f"{group_index.tolist()}.")
        check(values[-1] <= rows, f"{fn}: group_index covers {values[-1]} rows, more than the {rows} there are.")
    return ends.to(torch.int32)


def _grouped_rows_mx(fn, y, ends, round_mode, dst_type, scale_alg, dst_type_max):
    """MX quantisation of 2-D ``y`` along its rows in groups (blocks restart at each group's first row), rows past
    the last group quantised as zeros; the scale has y.shape[0] // 64 + G pair rows."""
    m = y.shape[0]
    groups = ends.shape[0]
    covered = torch.arange(m, device=y.device) < ends[-1].to(y.device)
    y = torch.where(covered[:, None], y, torch.zeros((), dtype=y.dtype, device=y.device))
    # One more group holds the rows past the last end; its scale pair rows come after the real groups' and are cut.
    ext = torch.cat([ends, torch.full((1,), m, dtype=torch.int32, device=ends.device)])
    q, scale = npu_grouped_dynamic_mx_quant(y, ext, round_mode=round_mode, dst_type=dst_type, blocksize=32,
                                            scale_alg=scale_alg, dst_type_max=dst_type_max)
    return q, scale[:m // 64 + groups]


def npu_swiglu_mx_quant(x, group_index=None, activate_dim=-1, activate_left=False, swiglu_mode=0, clamp_limit=7.0,
                        glu_alpha=1.702, glu_bias=1.0, group_mode=0, axis=-1, dst_type=_D.float4_e2m1fn_x2,
                        round_mode="rint", scale_alg=0, max_dtype_value=0.0):
    fn = "npu_swiglu_mx_quant"
    check(x.dim() > 1, f"{fn}: x should have more than 1 dimension, got shape {list(x.shape)}.")
    check(swiglu_mode in (0, 1), f"{fn}: swiglu_mode should be 0 or 1, got {swiglu_mode}.")
    check(math.isfinite(clamp_limit) and clamp_limit > 0, f"{fn}: clamp_limit should be positive and finite, got "
                                                          f"{clamp_limit}.")
    check(math.isfinite(glu_alpha) and math.isfinite(glu_bias),
          f"{fn}: glu_alpha and glu_bias should be finite, got {glu_alpha} and {glu_bias}.")
    check(group_mode in (0, 1), f"{fn}: group_mode should be 0 (count) or 1 (cumsum), got {group_mode}.")
    target = _check_mx_common(fn, x, dst_type, scale_alg, round_mode)
    rank = x.dim()
    d = _check_dim(fn, "activate_dim", activate_dim, rank)
    q_axis = _check_dim(fn, "axis", axis, rank)
    check(d >= rank - 2 and q_axis >= rank - 2, f"{fn}: activate_dim and axis should be one of the last two "
                                                f"dimensions, got {activate_dim} and {axis}.")
    check(x.shape[d] % 2 == 0, f"{fn}: dimension {d} of x (activate_dim) should be even, got {x.shape[d]}.")
    check(swiglu_mode == 0 or d == rank - 1, f"{fn}: swiglu_mode should be 0 when activate_dim is not the last "
                                             "dimension.")
    dst_type_max = max_dtype_value if scale_alg == 2 else 0.0
    y = _glu(x.float(), d, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias).to(x.dtype)
    check(target.elem is None or y.shape[-1] % 2 == 0,
          f"{fn}: the last dimension of the SwiGLU output should be even for {target.name}, got {y.shape[-1]}.")
    if group_index is None:
        return npu_dynamic_mx_quant(y, axis=q_axis, round_mode=round_mode, dst_type=dst_type, block_size=32,
                                    scale_alg=scale_alg, dst_type_max=dst_type_max)
    check(rank == 2 or (d == rank - 1 and q_axis == rank - 1),
          f"{fn}: x should be 2-D with group_index when activate_dim or axis is not the last dimension, got "
          f"shape {list(x.shape)}.")
    rows = _rows(y)
    ends = _ends(fn, group_index, group_mode == 0, rows)
    if q_axis == rank - 1:  # groups only bound the rows that are computed
        flat = y.reshape(rows, y.shape[-1])
        covered = torch.arange(rows, device=y.device) < ends[-1].to(y.device)
        flat = torch.where(covered[:, None], flat, torch.zeros((), dtype=y.dtype, device=y.device))
        return npu_dynamic_mx_quant(flat.reshape(y.shape), axis=-1, round_mode=round_mode, dst_type=dst_type,
                                    block_size=32, scale_alg=scale_alg, dst_type_max=dst_type_max)
    return _grouped_rows_mx(fn, y, ends, round_mode, dst_type, scale_alg, dst_type_max)


def _dual_axis(fn, y, group_index, round_mode, dst_type, scale_alg):
    if group_index is None:
        return npu_dynamic_mx_quant_with_dual_axis(y, round_mode=round_mode, dst_type=dst_type, scale_alg=scale_alg)
    check(y.dim() == 2, f"{fn}: x should be 2-D with group_index, got {y.dim()}-D.")
    ends = _ends(fn, group_index, False, y.shape[0])
    if _concrete(group_index):
        check(group_index[-1].item() == y.shape[0],
              f"{fn}: the last group_index value should equal the number of rows {y.shape[0]}, got "
              f"{group_index[-1].item()}.")
    y1, scale1 = npu_dynamic_mx_quant(y, axis=-1, round_mode=round_mode, dst_type=dst_type, block_size=32,
                                      scale_alg=scale_alg)
    y2, scale2 = _grouped_rows_mx(fn, y, ends, round_mode, dst_type, scale_alg, 0.0)
    return y1, scale1, y2, scale2


def npu_swiglu_mx_quant_with_dual_axis(x, group_index=None, activate_left=True, round_mode="rint", scale_alg=1,
                                       dst_type=24, dst_type_max=0.0):
    fn = "npu_swiglu_mx_quant_with_dual_axis"
    check(x.dim() >= 2, f"{fn}: x should have at least 2 dimensions, got shape {list(x.shape)}.")
    check(x.shape[-1] % 2 == 0, f"{fn}: the last dimension of x should be even, got {x.shape[-1]}.")
    target = _check_mx_common(fn, x, dst_type, scale_alg, round_mode)
    check(scale_alg in (0, 1), f"{fn}: scale_alg should be 0 (OCP) or 1 (cuBLAS), got {scale_alg}.")
    check(dst_type_max == 0, f"{fn}: dst_type_max is reserved and should be 0, got {dst_type_max}.")
    check(target.elem is None or x.shape[-1] % 4 == 0,
          f"{fn}: the last dimension of x should be a multiple of 4 for {target.name}, got {x.shape[-1]}.")
    y = _swiglu(x.float(), -1, activate_left).to(x.dtype)
    return _dual_axis(fn, y, group_index, round_mode, dst_type, scale_alg)


def _npu_swiglu_backward_mx_quant_with_dual_axis(x, y_grad, group_index=None, activate_left=True, round_mode="rint",
                                                 scale_alg=1, dst_type=24, dst_type_max=0.0):
    fn = "_npu_swiglu_backward_mx_quant_with_dual_axis"
    check(x.dim() >= 2, f"{fn}: x should have at least 2 dimensions, got shape {list(x.shape)}.")
    check(x.shape[-1] > 0 and x.shape[-1] % 64 == 0,
          f"{fn}: the last dimension of x should be a positive multiple of 64, got {x.shape[-1]}.")
    _check_mx_common(fn, x, dst_type, scale_alg, round_mode)
    check(scale_alg in (0, 1), f"{fn}: scale_alg should be 0 (OCP) or 1 (cuBLAS), got {scale_alg}.")
    check(dst_type_max == 0, f"{fn}: dst_type_max is reserved and should be 0, got {dst_type_max}.")
    check(y_grad.dtype == x.dtype, f"{fn}: y_grad should have x's dtype {x.dtype}, got {y_grad.dtype}.")
    check(tuple(y_grad.shape) == tuple(x.shape[:-1]) + (x.shape[-1] // 2,),
          f"{fn}: y_grad should have shape {list(x.shape[:-1]) + [x.shape[-1] // 2]}, got {list(y_grad.shape)}.")
    xf = x.float() if activate_left else _swap_halves(x.float(), -1)
    grad = npu_swiglu_backward(y_grad.float(), xf, -1)
    if not activate_left:
        grad = _swap_halves(grad, -1)
    return _dual_axis(fn, grad.to(x.dtype), group_index, round_mode, dst_type, scale_alg)


# ------------------------------------------------------------------ SwiGLU + HiFloat8 (SwigluGroupQuant)


def _swiglu_group_parts(fn, x, weight, group_index, clamp_limit):
    """(rows, swiglu (rows, D/2) float32 after the optional clamp, weighted output, group per row, groups)."""
    check(x.dtype in _FLOATS, f"{fn}: x should be float16, bfloat16 or float32, got {x.dtype}.")
    check(x.dim() >= 1 and x.shape[-1] % 2 == 0,
          f"{fn}: x should have an even last dimension, got shape {list(x.shape)}.")
    check(clamp_limit == -1.0 or clamp_limit > 0, f"{fn}: clamp_limit should be -1.0 (off) or positive, got "
                                                  f"{clamp_limit}.")
    rows = _rows(x)
    a, b = x.reshape(rows, x.shape[-1]).float().chunk(2, -1)
    if clamp_limit > 0:
        a = a.clamp(max=clamp_limit)
        b = b.clamp(min=-clamp_limit, max=clamp_limit)
    y = npu_swiglu(torch.cat((a, b), -1), -1)
    weighted = y
    if weight is not None:
        check(weight.dtype == torch.float32, f"{fn}: weight should be float32, got {weight.dtype}.")
        check(weight.numel() == rows, f"{fn}: weight should have one value per token ({rows}), got shape "
                                      f"{list(weight.shape)}.")
        weighted = y * weight.reshape(rows, 1)
    if group_index is None:
        return rows, y, weighted, torch.zeros(rows, dtype=torch.int64, device=x.device), 1
    group = _groups_of_rows(fn, group_index, rows, True, x.device, dtypes=(torch.int64,))
    return rows, y, weighted, group, group_index.shape[0]


def npu_swiglu_group_quant(x, weight=None, group_index=None, scale=None, dst_type=_D.float8_e5m2, quant_mode=0,
                           block_size=0, round_scale=False, clamp_limit=-1.0, dst_type_max=15.0, output_origin=False):
    fn = "npu_swiglu_group_quant"
    check(quant_mode in (0, 1, 2, 3), f"{fn}: quant_mode should be 0, 1, 2 or 3, got {quant_mode}.")
    check(quant_mode in (2, 3), f"{fn}: quant_mode {quant_mode} is not supported: torch_npu's npu_swiglu_group_quant "
                                "implements the HiFloat8 modes only (2: static, 3: dynamic).")
    rows, y_origin, weighted, group, groups = _swiglu_group_parts(fn, x, weight, group_index, clamp_limit)
    valid = group < groups
    safe = group.clamp(max=groups - 1)
    if quant_mode == 2:
        check(scale is not None, f"{fn}: scale is required with quant_mode=2 (static).")
        check(scale.dtype == torch.float32 and scale.dim() == 1 and scale.shape[0] >= groups,
              f"{fn}: scale should be a float32 1-D tensor with one value per group ({groups}), got "
              f"{scale.dtype} of shape {list(scale.shape)}.")
        q_in = weighted * scale[:groups][safe].unsqueeze(1)
        y_scale = torch.empty(0, dtype=torch.float32, device=x.device)
    else:
        check(dst_type_max > 0, f"{fn}: dst_type_max should be positive, got {dst_type_max}.")
        row_max = torch.where(valid, weighted.abs().amax(-1), 0.0)
        amax = torch.zeros(groups, dtype=torch.float32, device=x.device).scatter_reduce(0, safe, row_max, "amax")
        group_scale = (amax.clamp(min=1e-8) / dst_type_max).detach()  # the real op carries no gradient here
        q_in = weighted / group_scale[safe].unsqueeze(1)
        y_scale = group_scale.reshape(group_index.shape) if group_index is not None else group_scale
    q_in = torch.where(valid[:, None], q_in, 0.0)
    y = _hif8_encode(q_in).reshape(*x.shape[:-1], x.shape[-1] // 2)
    if output_origin:
        origin = torch.where(valid[:, None], y_origin, 0.0).to(x.dtype).reshape(y.shape)
    else:
        origin = torch.empty(0, dtype=x.dtype, device=x.device)
    return y, y_scale, origin


def npu_swiglu_group_quant_backward(grad_y, x, weight=None, y_origin=None, group_index=None, clamp_limit=0.0):
    fn = "npu_swiglu_group_quant_backward"
    check(clamp_limit <= 0 or math.isfinite(clamp_limit), f"{fn}: clamp_limit should be finite, got {clamp_limit}.")
    check(grad_y.dtype in _FLOATS, f"{fn}: grad_y should be float16, bfloat16 or float32, got {grad_y.dtype}.")
    limit = clamp_limit if clamp_limit > 0 else -1.0
    rows, y, _, group, groups = _swiglu_group_parts(fn, x, weight, group_index, limit)
    h = x.shape[-1] // 2
    check(grad_y.numel() == rows * h, f"{fn}: grad_y should have shape {list(x.shape[:-1]) + [h]}, got "
                                      f"{list(grad_y.shape)}.")
    valid = (group < groups).unsqueeze(1)
    g = grad_y.reshape(rows, h).float()
    g0 = g * weight.reshape(rows, 1) if weight is not None else g
    x0, x1 = x.reshape(rows, 2 * h).float().chunk(2, -1)
    xc = torch.cat((x0.clamp(max=limit), x1.clamp(min=-limit, max=limit)), -1) if limit > 0 else torch.cat((x0, x1), -1)
    grad = npu_swiglu_backward(g0, xc, -1)
    if limit > 0:  # no gradient where the forward clamp cut
        keep = torch.cat((x0 < limit, (x1 > -limit) & (x1 < limit)), -1)
        grad = torch.where(keep, grad, 0.0)
    grad_x = torch.where(valid, grad, 0.0).to(x.dtype).reshape(x.shape)
    if weight is None:
        return grad_x, torch.empty(0, dtype=torch.float32, device=x.device)
    origin = y if y_origin is None else y_origin.reshape(rows, h).float()
    grad_w = torch.where(valid.squeeze(1), (g * origin).sum(-1), 0.0)
    return grad_x, grad_w.to(weight.dtype).reshape(weight.shape)


# ------------------------------------------------------------------ GELU


def npu_gelu_mul(input, approximate="none"):
    """gelu(first half of the last dimension) * second half, in float32, returned in input's dtype."""
    fn = "npu_gelu_mul"
    check(input.dtype in _FLOATS, f"{fn}: input should be float16, bfloat16 or float32, got {input.dtype}.")
    check(input.dim() >= 1 and input.shape[-1] % 2 == 0,
          f"{fn}: the last dimension of input should be even, got shape {list(input.shape)}.")
    check(approximate in ("none", "tanh"), f"{fn}: approximate should be 'none' or 'tanh', got {approximate!r}.")
    x1, x2 = input.float().chunk(2, -1)
    return (npu_gelu(x1, approximate=approximate) * x2).to(input.dtype)


def npu_gelu_quant(self, input_scale=None, input_offset=None, approximate="none", quant_mode="dynamic", dst_type=None,
                   round_mode="rint"):
    fn = "npu_gelu_quant"
    check(quant_mode in ("dynamic", "static"), f"{fn}: quant_mode should be 'dynamic' or 'static', got "
                                               f"{quant_mode!r}.")
    check(approximate in ("none", "tanh"), f"{fn}: approximate should be 'none' or 'tanh', got {approximate!r}.")
    target = _target(fn, "dst_type", 1 if dst_type is None else dst_type, (_INT8, _HIF8, _E5M2, _E4M3))
    _check_round_mode(fn, target, round_mode)
    check(self.dtype in _FLOATS, f"{fn}: self should be float16, bfloat16 or float32, got {self.dtype}.")
    check(self.dim() >= (2 if quant_mode == "dynamic" else 1),
          f"{fn}: self should have {'2' if quant_mode == 'dynamic' else '1'} to 8 dimensions with quant_mode "
          f"'{quant_mode}', got {self.dim()}.")
    h = self.shape[-1]
    for name, t in (("input_scale", input_scale), ("input_offset", input_offset)):
        check(t is None or (t.dim() == 1 and t.shape[0] in (1, h) and t.dtype in _FLOATS),
              f"{fn}: {name} should be a 1-D float tensor of {h} (the last dimension of self) or 1 elements, got "
              f"{None if t is None else (t.dtype, list(t.shape))}.")
    if input_scale is not None and input_offset is not None:
        check(input_offset.shape == input_scale.shape and input_offset.dtype == input_scale.dtype,
              f"{fn}: input_offset should have input_scale's shape and dtype, got {list(input_offset.shape)} "
              f"{input_offset.dtype} and {list(input_scale.shape)} {input_scale.dtype}.")
    g = npu_gelu(self.float(), approximate=approximate)
    if quant_mode == "static":
        check(input_scale is not None, f"{fn}: input_scale is required with quant_mode 'static'.")
        v = g * input_scale.float()
        if input_offset is not None:
            v = v + input_offset.float()
        return _to_target(v, target, round_mode), None
    check(input_offset is None or input_scale is not None,
          f"{fn}: input_offset should be None without input_scale in quant_mode 'dynamic'.")
    if input_scale is not None:
        g = g * input_scale.float()
    scale = g.abs().amax(-1, keepdim=True) / target.qmax
    q = torch.where(scale > 0, g / torch.where(scale > 0, scale, 1.0), 0.0)
    return _to_target(q, target, round_mode), scale.squeeze(-1)


# ------------------------------------------------------------------ quantisers


def npu_group_quant(x, scale, group_index, offset=None, dst_dtype=None):
    """y = round(x * scale[group of row] + offset), groups of rows given by their cumulative ends."""
    fn = "npu_group_quant"
    check(dst_dtype in (None, torch.int8, torch.qint8, torch.quint4x2),
          f"{fn}: dst_dtype should be torch.int8 (torch.qint8) or torch.quint4x2, got {dst_dtype}.")
    target = _INT4 if dst_dtype == torch.quint4x2 else _INT8
    check(x.dtype in _FLOATS and x.dim() == 2, f"{fn}: x should be a 2-D float32, float16 or bfloat16 tensor, got "
                                               f"{x.dtype} of shape {list(x.shape)}.")
    check(scale.dtype in _FLOATS and scale.dim() == 2 and scale.shape[0] >= 1 and scale.shape[1] == x.shape[1],
          f"{fn}: scale should be a 2-D float tensor [groups, {x.shape[1]}], got {scale.dtype} of shape "
          f"{list(scale.shape)}.")
    check(group_index.dim() == 1 and group_index.shape[0] == scale.shape[0],
          f"{fn}: group_index should be 1-D with {scale.shape[0]} (scale.shape[0]) elements, got shape "
          f"{list(group_index.shape)}.")
    check(offset is None or (offset.numel() == 1 and offset.dtype == scale.dtype),
          f"{fn}: offset should hold one value of scale's dtype {scale.dtype}, got "
          f"{None if offset is None else (offset.dtype, list(offset.shape))}.")
    check(target is _INT8 or x.shape[1] % 8 == 0,
          f"{fn}: the last dimension of x should be a multiple of 8 for torch.quint4x2, got {x.shape[1]}.")
    group = _groups_of_rows(fn, group_index, x.shape[0], False, x.device)
    if _concrete(group_index):
        check(group_index[-1].item() == x.shape[0], f"{fn}: the last group_index value should equal x.shape[0] = "
                                                    f"{x.shape[0]}, got {group_index[-1].item()}.")
    v = x.float() * scale.float()[group.clamp(max=scale.shape[0] - 1)]
    if offset is not None:
        v = v + offset.float().reshape(())
    q = _to_target(v, target)
    return _pack_int4(q) if target is _INT4 else q


def npu_grouped_dynamic_block_quant(x, group_list, min_scale=0.0, round_mode="rint", dst_type=_D.float8_e5m2,
                                    row_block_size=1, col_block_size=128, group_list_type=0, dst_type_max=0.0):
    fn = "npu_grouped_dynamic_block_quant"
    check(x.dtype in _HALVES, f"{fn}: x should be float16 or bfloat16, got {x.dtype}.")
    check(x.dim() in (2, 3), f"{fn}: x should be 2-D or 3-D, got {x.dim()}-D.")
    check(group_list_type == 0, f"{fn}: group_list_type should be 0 (cumsum), got {group_list_type}.")
    check(group_list.dim() == 1 and group_list.shape[0] >= 1 and group_list.dtype == torch.int32,
          f"{fn}: group_list should be a non-empty 1-D int32 tensor, got {group_list.dtype} of shape "
          f"{list(group_list.shape)}.")
    check(row_block_size >= 1 and col_block_size >= 1,
          f"{fn}: row_block_size and col_block_size should be positive, got {row_block_size} and {col_block_size}.")
    check(min_scale >= 0, f"{fn}: min_scale should be >= 0, got {min_scale}.")
    target = _target(fn, "dst_type", dst_type, (_HIF8, _E5M2, _E4M3))
    _check_round_mode(fn, target, round_mode)
    qmax = target.qmax
    if target is _HIF8 and dst_type_max:
        check(0 < dst_type_max <= 32768, f"{fn}: dst_type_max should be in [0, 32768], got {dst_type_max}.")
        qmax = dst_type_max
    xb = x if x.dim() == 3 else x.unsqueeze(0)
    b, m, n = xb.shape
    rb, cb = row_block_size, col_block_size
    groups = group_list.shape[0]
    if _concrete(group_list):
        ends_list = group_list.tolist()
        check(all(v >= 0 for v in ends_list) and all(a <= c for a, c in zip(ends_list, ends_list[1:])) and
              ends_list[-1] == m, f"{fn}: group_list should be non-negative, non-decreasing and end at "
                                  f"x.shape[-2] = {m}, got {ends_list}.")
    device = x.device
    ends = group_list.to(torch.int64).to(device)
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    first = starts // rb + torch.arange(groups, device=device)  # each group's first scale row
    rows = torch.arange(m, device=device)
    group = torch.searchsorted(ends, rows, right=True).clamp(max=groups - 1)
    dest = first[group] + (rows - starts[group]) // rb  # scale row of every row
    srows = m // rb + groups
    nc = -(-n // cb)
    a = torch.nn.functional.pad(xb.float().abs(), (0, nc * cb - n)).reshape(b, m, nc, cb).amax(-1)  # (b, m, nc)
    # Blocks: each row's column-block maxima placed in its block's rows (row offset within the block) so that
    # a NaN anywhere in a block reaches its maximum.
    slot = (rows - starts[group]) % rb
    placed = torch.zeros(b, srows * rb, nc, dtype=torch.float32, device=device)
    placed = placed.index_copy(1, dest * rb + slot, a)
    amax = placed.reshape(b, srows, rb, nc).amax(2)  # (b, srows, nc)
    scale = amax / qmax
    if min_scale:
        scale = torch.where(torch.isfinite(amax), torch.minimum(scale, torch.tensor(1.0 / min_scale, device=device)),
                            scale)
    # Scale rows no group writes hold 1.0, as in the kernel's reference.
    srow = torch.arange(srows, device=device)
    owner = (torch.searchsorted(first, srow, right=True) - 1).clamp(min=0)
    written = (srow >= first[owner]) & (srow < first[owner] + (ends[owner] - starts[owner] + rb - 1) // rb)
    scale = torch.where(written[None, :, None], scale, 1.0)
    per = scale[:, dest].repeat_interleave(cb, -1)[..., :n]  # (b, m, n)
    v = torch.nan_to_num((xb.float() / per).clamp(-qmax, qmax), nan=0.0)
    y = _to_target(v, target, round_mode)
    if x.dim() == 2:
        return y.squeeze(0), scale.squeeze(0)
    return y, scale


def npu_quant_max(x, scale, round_mode="rint", dst_dtype=_D.float8_e5m2, group_list=None):
    """y = cast(x * scale) (per group of dim-0 rows with group_list) and amax = max |x| (per group)."""
    fn = "npu_quant_max"
    target = _target(fn, "dst_dtype", dst_dtype, (_HIF8, _E5M2, _E4M3))
    _check_round_mode(fn, target, round_mode)
    check(x.dtype in _FLOATS and x.dim() >= 1, f"{fn}: x should be a float32, float16 or bfloat16 tensor of 1 to 8 "
                                               f"dimensions, got {x.dtype} of shape {list(x.shape)}.")
    check(scale.dtype == torch.float32 and scale.dim() == 1, f"{fn}: scale should be a 1-D float32 tensor, got "
                                                             f"{scale.dtype} of shape {list(scale.shape)}.")
    xf = x.float()
    if group_list is None or group_list.shape[0] <= 1:
        check(scale.shape[0] == 1, f"{fn}: scale should have shape [1], got {list(scale.shape)}.")
        y = _to_target(xf * scale, target, round_mode)
        return y, x.abs().amax().reshape(1)
    check(group_list.dim() == 1 and group_list.dtype == torch.int64,
          f"{fn}: group_list should be a 1-D int64 tensor, got {group_list.dtype} of shape {list(group_list.shape)}.")
    groups = group_list.shape[0]
    check(x.dim() >= 2, f"{fn}: x should have at least 2 dimensions with group_list, got {x.dim()}.")
    check(scale.shape[0] == groups, f"{fn}: scale should have one value per group ({groups}), got shape "
                                    f"{list(scale.shape)}.")
    if _concrete(group_list):
        ends = group_list.tolist()
        check(all(a <= b for a, b in zip(ends, ends[1:])) and ends[-1] == x.shape[0],
              f"{fn}: group_list should be non-decreasing and end at x.shape[0] = {x.shape[0]}, got {ends}.")
    group = torch.searchsorted(group_list.to(x.device), torch.arange(x.shape[0], device=x.device),
                               right=True).clamp(max=groups - 1)
    per_row = scale.to(x.device)[group].reshape((-1,) + (1,) * (x.dim() - 1))
    y = _to_target(xf * per_row, target, round_mode)
    row_max = x.abs().reshape(x.shape[0], -1).amax(-1).float()
    amax = torch.zeros(groups, dtype=torch.float32, device=x.device).scatter_reduce(0, group, row_max, "amax")
    return y, amax.to(x.dtype)


def npu_kronecker_quant(x, kronecker_p1, kronecker_p2, clip_ratio=None, dst_dtype=None, dst_type_max=None):
    """FlatQuant: x'' = p1 @ (x @ p2) per token, then int4 per token (scale = clip * max|x''| / 7, eight values per
    int32) or MXFP4 over the flattened (N1 * N2) row."""
    fn = "npu_kronecker_quant"
    fp4 = dst_dtype is not None and dst_dtype == _D.float4_e2m1fn_x2
    check(dst_dtype is None or dst_dtype == 3 or fp4,
          f"{fn}: dst_dtype should be torch.int32 (int4 packed in int32) or torch_npu.float4_e2m1fn_x2, got "
          f"{_dtypes.NAMES.get(dst_dtype, dst_dtype)}.")
    clip = 1.0 if clip_ratio is None else float(clip_ratio)
    check(0 < clip <= 1, f"{fn}: clip_ratio should be in (0, 1], got {clip}.")
    dmax = 0.0 if dst_type_max is None else float(dst_type_max)
    check(x.dtype in _HALVES and x.dim() == 3, f"{fn}: x should be a 3-D (M, N1, N2) float16 or bfloat16 tensor, "
                                               f"got {x.dtype} of shape {list(x.shape)}.")
    _, n1, n2 = x.shape
    for name, p, k in (("kronecker_p1", kronecker_p1, n1), ("kronecker_p2", kronecker_p2, n2)):
        check(p.dtype == x.dtype and tuple(p.shape) == (k, k),
              f"{fn}: {name} should be a ({k}, {k}) tensor of x's dtype {x.dtype}, got {p.dtype} of shape "
              f"{list(p.shape)}.")
    # Two matmuls, each result in x's dtype as the kernel's Cube unit writes it.
    t = torch.matmul(x.float(), kronecker_p2.float()).to(x.dtype)
    t = torch.matmul(kronecker_p1.float(), t.float()).to(x.dtype)
    if fp4:
        check(n2 % 2 == 0, f"{fn}: the last dimension of x should be even for float4_e2m1, got {n2}.")
        check(dmax == 0 or 6 <= dmax <= 12, f"{fn}: dst_type_max should be 0 or within [6, 12], got {dmax}.")
        flat = t.reshape(x.shape[0], n1 * n2)
        return npu_dynamic_mx_quant(flat, axis=-1, round_mode="rint", dst_type=_D.float4_e2m1fn_x2, block_size=32,
                                    scale_alg=2 if dmax else 0, dst_type_max=dmax)
    check(n2 % 8 == 0, f"{fn}: the last dimension of x should be a multiple of 8 for int4 output, got {n2}.")
    tf = t.float()
    amax = tf.abs().amax((1, 2))
    scale = amax / (7.0 / clip)
    q = torch.where(scale[:, None, None] > 0, tf / torch.where(scale > 0, scale, 1.0)[:, None, None], 0.0)
    return _pack_int4(_to_target(q, _INT4)), scale


def npu_rotate_quant(x, rotation, alpha=None, dst_dtype=None, axis=-1, round_mode="rint", scale_alg=0,
                     dst_type_max=0.0, transpose_y=False):
    fn = "npu_rotate_quant"
    check(not transpose_y, f"{fn}: transpose_y only supports False.")
    axis = -1 if axis is None else axis
    round_mode = "rint" if round_mode is None else round_mode
    scale_alg = 0 if scale_alg is None else scale_alg
    dst_type_max = 0.0 if dst_type_max is None else dst_type_max
    check(x.dtype in _HALVES and x.dim() >= 1, f"{fn}: x should be float16 or bfloat16, got {x.dtype}.")
    check(rotation.dtype == x.dtype, f"{fn}: rotation should have x's dtype {x.dtype}, got {rotation.dtype}.")
    q_axis = _check_dim(fn, "axis", axis, x.dim())
    check(q_axis == x.dim() - 1, f"{fn}: axis should be the last dimension (-1 or {x.dim() - 1}), got {axis}.")
    target = _target(fn, "dst_dtype", _D.int8 if dst_dtype is None else dst_dtype,
                     (_INT8, _INT4, _E5M2, _E4M3, _FP4_E2M1))
    n = x.shape[-1]
    check(rotation.dim() in (2, 3) and rotation.shape[-1] == rotation.shape[-2] and rotation.shape[-1] > 0,
          f"{fn}: rotation should be [K, K] or [N / K, K, K], got shape {list(rotation.shape)}.")
    k = rotation.shape[-1]
    check(n % k == 0, f"{fn}: the last dimension of x ({n}) should be a multiple of K = {k}.")
    check(rotation.dim() == 2 or rotation.shape[0] == n // k,
          f"{fn}: a 3-D rotation should hold N / K = {n // k} blocks, got {rotation.shape[0]}.")
    blocks = x.float().reshape(*x.shape[:-1], n // k, k)
    y = torch.matmul(blocks.unsqueeze(-2), rotation.float()).squeeze(-2).reshape(x.shape).to(x.dtype)
    if alpha is not None:  # clamp to alpha * (max |y| of each 32 group) when alpha is in (0, 1)
        check(alpha.numel() >= 1, f"{fn}: alpha should hold one value, got shape {list(alpha.shape)}.")
        a = alpha.reshape(-1)[0].float().to(x.device)
        nb = -(-n // 32)
        g = torch.nn.functional.pad(y.float(), (0, nb * 32 - n)).reshape(*y.shape[:-1], nb, 32)
        limit = a * g.abs().amax(-1, keepdim=True)
        clamped = torch.maximum(torch.minimum(g, limit), -limit).reshape(*y.shape[:-1], nb * 32)[..., :n]
        y = torch.where((a > 0) & (a < 1), clamped, y.float()).to(x.dtype)
    if target in _MX:
        check(round_mode in ("rint", "round", "floor"), f"{fn}: round_mode should be 'rint', 'round' or 'floor', "
                                                        f"got {round_mode!r}.")
        check(scale_alg in (0, 1) if target.elem is None else scale_alg in (0, 2),
              f"{fn}: scale_alg {scale_alg} is not supported for {target.name} (float8: 0 or 1; FP4: 0 or 2).")
        check(scale_alg == 2 or dst_type_max == 0, f"{fn}: dst_type_max should be 0.0 unless scale_alg=2, got "
                                                   f"{dst_type_max}.")
        q, mx = npu_dynamic_mx_quant(y, axis=-1, round_mode=round_mode, dst_type=dst_dtype, block_size=32,
                                     scale_alg=scale_alg, dst_type_max=dst_type_max)
        return q, mx.view(torch.float8_e8m0fnu)
    check(x.dim() == 2, f"{fn}: x should be 2-D for int8 / int4 output (one scale per row), got {x.dim()}-D.")
    check(round_mode == "rint" and scale_alg == 0 and dst_type_max == 0,
          f"{fn}: round_mode 'rint', scale_alg 0 and dst_type_max 0.0 are the only values for {target.name}.")
    check(target is _INT8 or n % 8 == 0, f"{fn}: the last dimension of x should be a multiple of 8 for int4, got {n}.")
    yf = y.float()
    scale = yf.abs().amax(-1) / target.qmax
    q = _to_target(torch.where(scale[:, None] > 0, yf / torch.where(scale > 0, scale, 1.0)[:, None], 0.0), target)
    return (_pack_int4(q) if target is _INT4 else q), scale


def _fp_source(fn, x, src_type):
    """(element values float32, unpacked along the last dimension) of MX-quantised ``x``."""
    fp4 = {_D.float4_e2m1fn_x2: _E2M1, _D.float4_e1m2fn_x2: _E1M2}.get(src_type)
    if fp4 is not None:
        check(x.dtype == torch.uint8, f"{fn}: x should be uint8 (two FP4 values a byte) when src_type is "
                                      f"{_dtypes.NAMES[src_type]}, got {x.dtype}.")
        nib = torch.stack((x.to(torch.int64) & 0xF, x.to(torch.int64) >> 4), -1).flatten(-2)
        if fp4 is _E2M1:
            grid = torch.tensor((0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0), device=x.device)
        else:
            grid = torch.arange(8, dtype=torch.float32, device=x.device) / 4
        mag = grid[nib & 7]
        return torch.where(nib >= 8, -mag, mag)
    fp8 = {23: torch.float8_e5m2, _D.float8_e5m2: torch.float8_e5m2, 24: torch.float8_e4m3fn,
           _D.float8_e4m3fn: torch.float8_e4m3fn}.get(src_type)
    check(fp8 is not None, f"{fn}: src_type {_dtypes.NAMES.get(src_type, src_type)} is not supported; expected "
                           "float8_e5m2, float8_e4m3fn, float4_e2m1fn_x2 or float4_e1m2fn_x2.")
    check(x.dtype == fp8, f"{fn}: x should be {fp8} for src_type {_dtypes.NAMES.get(src_type, src_type)}, got "
                          f"{x.dtype}.")
    return x.float()


def npu_anti_mx_quant(x, mxscale, axis=-1, dst_type=15, src_type=_D.float8_e4m3fn):
    """x * 2^(mxscale - 127), the scale of each 32-block along ``axis`` read from the pair layout."""
    fn = "npu_anti_mx_quant"
    axis = -1 if axis is None else axis
    dst_type = 15 if dst_type is None else dst_type
    src_type = _D.float4_e2m1fn_x2 if src_type is None else src_type
    check(1 <= x.dim() <= 7, f"{fn}: x should have 1 to 7 dimensions, got {x.dim()}.")
    a = _check_dim(fn, "axis", axis, x.dim())
    out = {6: torch.float32, _D.float32: torch.float32, 5: torch.float16, _D.float16: torch.float16,
           15: torch.bfloat16, _D.bfloat16: torch.bfloat16}.get(dst_type)
    check(out is not None, f"{fn}: dst_type {_dtypes.NAMES.get(dst_type, dst_type)} is not supported; expected "
                           "float32, float16 or bfloat16.")
    v = _fp_source(fn, x, src_type)
    check(mxscale.dtype in (torch.uint8, torch.float8_e8m0fnu),
          f"{fn}: mxscale should be uint8 or float8_e8m0fnu (E8M0 bytes), got {mxscale.dtype}.")
    size = v.shape[a]
    blocks = -(-size // 32)
    pairs = -(-blocks // 2)
    expect = list(v.shape)
    expect[a] = pairs
    expect.append(2)
    check(list(mxscale.shape) == expect, f"{fn}: mxscale should have shape {expect} for x of {list(v.shape)} "
                                         f"elements along axis {axis}, got {list(mxscale.shape)}.")
    byte = mxscale.view(torch.uint8).to(torch.int32)
    byte = byte.movedim(-1, a + 1).flatten(a, a + 1)  # blocks along axis
    byte = byte.repeat_interleave(32, dim=a).narrow(a, 0, size)
    factor = torch.ldexp(torch.ones((), device=x.device), (byte - 127).float())
    factor = torch.where(byte == 255, float("nan"), factor)
    return (v * factor).to(out)


def _quantize_impl(fn, inputs, scales, zero_points, axis, dtype, result):
    code = {torch.qint8: (12, torch.int8), torch.quint8: (13, torch.uint8), torch.qint32: (3, torch.int32)}.get(dtype)
    check(code is not None, f"{fn}: dtype should be torch.qint8, torch.quint8 or torch.qint32, got {dtype}.")
    check(result.dtype == code[1], f"{fn}: result should be {code[1]} for {dtype}, got {result.dtype}.")
    check(tuple(result.shape) == tuple(inputs.shape),
          f"{fn}: result should have inputs' shape {list(inputs.shape)}, got {list(result.shape)}.")
    q = npu_quantize(inputs, scales, zero_points, code[0], axis=axis, div_mode=True)
    result.copy_(q)
    return result


def _quantize_per_tensor_impl_out(inputs, scales, zero_points, dtype, result):
    """result = round(inputs / scale + zero_point) saturated to dtype, one scale / zero point for all."""
    fn = "_quantize_per_tensor_impl"
    check(scales.numel() == 1 and zero_points.numel() == 1,
          f"{fn}: scales and zero_points should hold one value each, got shapes {list(scales.shape)} and "
          f"{list(zero_points.shape)}.")
    check(inputs.dim() >= 1, f"{fn}: inputs should have at least one dimension.")
    return _quantize_impl(fn, inputs, scales.reshape(1), zero_points.reshape(1), 0, dtype, result)


def _quantize_per_channel_impl_out(inputs, scales, zero_points, axis, dtype, result):
    """result = round(inputs / scales + zero_points) saturated to dtype, one scale / zero point per index of axis."""
    fn = "_quantize_per_channel_impl"
    check(inputs.dim() >= 1, f"{fn}: inputs should have at least one dimension.")
    a = _check_dim(fn, "axis", axis, inputs.dim())
    check(scales.dim() == 1 and zero_points.dim() == 1 and scales.shape[0] == zero_points.shape[0] ==
          inputs.shape[a], f"{fn}: scales and zero_points should be 1-D with {inputs.shape[a]} (inputs.shape[{axis}]) "
                           f"elements, got {list(scales.shape)} and {list(zero_points.shape)}.")
    return _quantize_impl(fn, inputs, scales, zero_points, a, dtype, result)


define("npu_swiglu_quant(Tensor x, *, Tensor? smooth_scales=None, Tensor? offsets=None, Tensor? group_index=None, "
       "bool activate_left=False, int quant_mode=0, int group_list_type=0, ScalarType? dst_type=None) "
       "-> (Tensor, Tensor)", npu_swiglu_quant)
define("npu_dequant_swiglu_quant(Tensor x, *, Tensor? weight_scale=None, Tensor? activation_scale=None, "
       "Tensor? bias=None, Tensor? quant_scale=None, Tensor? quant_offset=None, Tensor? group_index=None, "
       "bool activate_left=False, int quant_mode=0, int? dst_type=None, int? round_mode=None, "
       "int? activate_dim=None, int swiglu_mode=0, float clamp_limit=7.0, float glu_alpha=1.702, "
       "float glu_bias=1.0) -> (Tensor, Tensor)", npu_dequant_swiglu_quant)
define("npu_swiglu_mx_quant(Tensor x, *, Tensor? group_index=None, int activate_dim=-1, bool activate_left=False, "
       "int swiglu_mode=0, float clamp_limit=7.0, float glu_alpha=1.702, float glu_bias=1.0, int group_mode=0, "
       "int axis=-1, int dst_type=296, str round_mode=\"rint\", int scale_alg=0, float max_dtype_value=0) "
       "-> (Tensor, Tensor)", npu_swiglu_mx_quant)
define("npu_swiglu_mx_quant_with_dual_axis(Tensor x, *, Tensor? group_index=None, bool activate_left=True, "
       "str round_mode=\"rint\", int scale_alg=1, int dst_type=24, float dst_type_max=0) "
       "-> (Tensor, Tensor, Tensor, Tensor)", npu_swiglu_mx_quant_with_dual_axis)
define("_npu_swiglu_backward_mx_quant_with_dual_axis(Tensor x, Tensor y_grad, *, Tensor? group_index=None, "
       "bool activate_left=True, str round_mode=\"rint\", int scale_alg=1, int dst_type=24, float dst_type_max=0) "
       "-> (Tensor, Tensor, Tensor, Tensor)", _npu_swiglu_backward_mx_quant_with_dual_axis)
define("npu_swiglu_group_quant(Tensor x, *, Tensor? weight=None, Tensor? group_index=None, Tensor? scale=None, "
       "int dst_type=291, int quant_mode=0, int block_size=0, bool round_scale=False, float clamp_limit=-1.0, "
       "float dst_type_max=15.0, bool output_origin=False) -> (Tensor, Tensor, Tensor)", npu_swiglu_group_quant)
define("npu_swiglu_group_quant_backward(Tensor grad_y, Tensor x, *, Tensor? weight=None, Tensor? y_origin=None, "
       "Tensor? group_index=None, float clamp_limit=0.0) -> (Tensor, Tensor)", npu_swiglu_group_quant_backward)
define("npu_gelu_quant(Tensor self, *, Tensor? input_scale=None, Tensor? input_offset=None, "
       "str approximate='none', str quant_mode='dynamic', int? dst_type=None, str round_mode='rint') "
       "-> (Tensor, Tensor)", npu_gelu_quant)
define("npu_gelu_mul(Tensor input, *, str approximate='none') -> Tensor", npu_gelu_mul)
define("npu_group_quant(Tensor x, Tensor scale, Tensor group_index, *, Tensor? offset=None, "
       "ScalarType? dst_dtype=None) -> Tensor", npu_group_quant)
define("npu_kronecker_quant(Tensor x, Tensor kronecker_p1, Tensor kronecker_p2, float? clip_ratio=None, "
       "int? dst_dtype=None, float? dst_type_max=None) -> (Tensor out, Tensor quant_scale)", npu_kronecker_quant)
define("npu_anti_mx_quant(Tensor x, Tensor mxscale, *, int? axis=-1, int? dst_type=15, int? src_type=292) -> Tensor",
       npu_anti_mx_quant)
define("npu_quant_max(Tensor x, Tensor scale, *, str round_mode=\"rint\", int dst_dtype=291, "
       "Tensor? group_list=None) -> (Tensor, Tensor)", npu_quant_max)
define("npu_rotate_quant(Tensor x, Tensor rotation, *, Tensor? alpha=None, int? dst_dtype=None, int? axis=-1, "
       "str? round_mode=\"rint\", int? scale_alg=0, float? dst_type_max=0.0, bool? transpose_y=False) "
       "-> (Tensor, Tensor)", npu_rotate_quant)
define("npu_grouped_dynamic_block_quant(Tensor x, Tensor group_list, *, float min_scale=0.0, str round_mode=\"rint\", "
       "int dst_type=291, int row_block_size=1, int col_block_size=128, int group_list_type=0, "
       "float dst_type_max=0.0) -> (Tensor, Tensor)", npu_grouped_dynamic_block_quant)
define("_quantize_per_tensor_impl.out(Tensor inputs, Tensor scales, Tensor zero_points, ScalarType dtype, *, "
       "Tensor(a!) result) -> Tensor(a!)", _quantize_per_tensor_impl_out)
define("_quantize_per_channel_impl.out(Tensor inputs, Tensor scales, Tensor zero_points, int axis, ScalarType dtype, "
       "*, Tensor(a!) result) -> Tensor(a!)", _quantize_per_channel_impl_out)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
