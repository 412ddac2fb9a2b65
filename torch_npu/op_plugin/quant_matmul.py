"""Quantised matmul and grouped-matmul variants of torch.ops.npu (op-plugin's schemas):

- npu_add_quant_matmul / npu_add_quant_matmul_ (QuantBatchMatmulInplaceAdd) and
  npu_add_quant_gmm / npu_add_quant_gmm_ (QuantGroupedMatmulInplaceAdd): MXFP8 weight-gradient
  accumulation, ``self += dequant(x1) @ dequant(x2)`` in float32, grouped along K for the gmm;
  npu_add_quant_matmul also HiFloat8 T-T: ``self += (x1 @ x2) * (x1_scale * x2_scale)`` with
  float32 scalar scales of shape (1,) (aclnnQuantBatchMatmulInplaceAdd's formula).
- npu_quant_matmul_dequant, npu_quant_grouped_matmul_dequant: float16 x quantised to int8 on the
  fly (dynamic per token, or static with x_scale), int8 matmul with a transposed weight,
  dequantised back to float16.
- npu_transpose_quant_batchmatmul: the quantised twin of infer_ops.npu_transpose_batchmatmul
  (K-C float32 scales, MX E8M0 scales, or HiFloat8 T-C: x1_scale (1,) or None, x2_scale (N,)),
  (M, B, K) @ (B, K, N) -> (M, B, N) float16 / bfloat16 / HiFloat8 codes.
- npu_matmul_compress_dequant: argument checks only; the compressed weight cannot be decoded (below).
- npu_grouped_matmul_swiglu_quant (A8W8 / A8W4) and npu_grouped_matmul_swiglu_quant_v2 (A8W8,
  A8W4, A4W4, float8 / HiFloat8 per-token, MXFP8 / MXFP4): grouped matmul, dequant, SwiGLU, quant
  (HiFloat8 per token: scale = max|S| / 32768, HiFloat8's largest finite value as max(type)).
- npu_grouped_matmul_add / npu_grouped_matmul_add_: ``self[g] += x[k_g]^T @ weight[k_g]``.
- npu_quant_matmul_gelu, npu_quant_matmul_reduce_sum, npu_dual_level_quant_matmul,
  npu_dequant_bias, npu_weight_quant_preprocess, npu_batch_gather_matmul(_) (AddLora),
  npu_fused_matmul, npu_quant_conv2d (int8, float8_e4m3fn or HiFloat8 input / weight; HiFloat8
  output too, with round_mode 'round' or 'rint').

Emulation choices (see docs/fused_ops.md):

- Integer and float8 / float4 products are summed in float64 (exact for int8 / int4 and for
  float8 x E8M0 blocks at any size an emulator holds), then rounded to float32 where the kernel
  dequantises; quantisation rounds half to even (torch.round) and saturates.
- Weights in FRACTAL_NZ are the same logical tensor here (vNPU keeps every tensor ND), so the
  ops that require NZ weights (swiglu_quant A8W8, reduce_sum, dual_level) accept ND tensors too.
- int64 / uint64 scales (npu_trans_quant_param, the A8W4 / A4W4 ``uint64`` scales) carry the
  float32 bits in their low 32 bits. E8M0 scales are uint8 / int8 bytes (with the matching
  ``*_scale_dtype=torch_npu.float8_e8m0fnu``) or torch.float8_e8m0fnu tensors: 2^(byte - 127).
  FP4 (float4_e2m1fn_x2) is two E2M1 codes per byte, element 2i in the low nibble. Int4 is
  eight signed nibbles per int32, lowest first (quant.py / tensor_ops.py).
- group_list is read on the host when concrete (as npu_grouped_matmul does); under
  FakeTensor / torch.compile each group is computed with a row mask instead, so the ops trace.
  Rows (or K slices) past the last group are zero in the outputs (the kernels leave them
  unwritten) and leave ``self`` untouched in the accumulating ops.
- The ``_`` variants update their first argument in place and return it; the functional
  variants never write to it (real op-plugin's npu_grouped_matmul_add and
  npu_batch_gather_matmul do).
- HiFloat8 data are uint8 / int8 bytes with the matching ``*_dtype=torch_npu.hifloat8`` argument,
  decoded with torch_npu._hifloat8.decode; HiFloat8 outputs (``dtype`` / ``quant_dtype`` /
  ``output_dtype`` = torch_npu.hifloat8) are the float32 result encoded with _hifloat8.encode
  (nearest, ties away from zero, saturating at +-32768), returned as uint8 as op-plugin's meta
  registrations give. The HiFloat8 modes follow the formula of the float8 ones of the same op.
- Not supported on vNPU (RuntimeError "... is not supported on vNPU: <reason>"): hifloat8 in
  npu_add_quant_gmm (its float32-scale quantisation is not documented: no scale shapes or formula)
  and in npu_grouped_matmul_swiglu_quant_v2's MX mode (documented for per-token only),
  npu_matmul_compress_dequant's weights (msModelSlim compresses them
  with CANN's closed CompressFcOp into the Atlas 300I's hardware-unzip format; no public
  document describes the stream, so no input can be decoded), float4_e1m2 inputs.

None of these operators has a backward in op-plugin; the float compositions
(npu_fused_matmul, npu_batch_gather_matmul) still differentiate through ATen.
"""

import torch
import torch.nn.functional as F

from torch_npu import _dtypes, _hifloat8
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.mx_quant import _E2M1, _E2M1_GRID, _E4M3, _E5M2, _along, _concrete, _finish_y, _scaler
from torch_npu.op_plugin.quant import _saturate_int8, _scale_value
from torch_npu.op_plugin.tensor_ops import _unpack_int4

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_HALVES = (torch.float16, torch.bfloat16)
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_D = _dtypes.DType

# dtype arguments arrive as torch ScalarType numbers (a torch.dtype passed to an ``int``
# argument) or as torch_npu's constants (ACL number + 256): torch_npu/_dtypes.py reads both.
_TORCH = _dtypes.TORCH_DTYPES
_FP8_ELEM = {"float8_e4m3fn": _E4M3, "float8_e5m2": _E5M2}


_dtype_name = _dtypes.name_of


def _unsupported(fn, what, why):
    raise RuntimeError(f"{fn}: {what} is not supported on vNPU: {why}.")


def _is_hif8(code):
    return _dtype_name(code) == "hifloat8"


def _no_hifloat8(fn, why, *names_and_codes):
    for name, code in names_and_codes:
        if _is_hif8(code):
            _unsupported(fn, f"{name}=torch_npu.hifloat8", why)


def _hif8_values(fn, name, t):
    """float32 values of HiFloat8 bytes (uint8 / int8 with ``{name}_dtype=torch_npu.hifloat8``)."""
    check(t.dtype in (torch.uint8, torch.int8), f"{fn}: {name} with {name}_dtype=torch_npu.hifloat8 should be "
          f"uint8 / int8 bytes (HiFloat8 codes), got {t.dtype}.")
    return _hifloat8.decode(t)


def _e8m0(fn, name, t, declared):
    """float32 value 2^(byte - 127) of E8M0 scale bytes (255 is NaN)."""
    if t.dtype == torch.float8_e8m0fnu:
        return t.float()
    check(t.dtype in (torch.uint8, torch.int8) and _dtype_name(declared) == "float8_e8m0fnu",
          f"{fn}: {name} should hold E8M0 scales: a torch.float8_e8m0fnu tensor, or uint8 / int8 bytes with "
          f"{name}_dtype=torch_npu.float8_e8m0fnu; got {t.dtype} with {name}_dtype={_dtype_name(declared)}.")
    return t.view(torch.uint8).view(torch.float8_e8m0fnu).float()


def _fp4_values(packed):
    """uint8 / int8 (..., n) holding two E2M1 codes each (low nibble first) -> float32 (..., 2 n)."""
    b = packed.view(torch.uint8).to(torch.int32)
    codes = torch.stack((b & 0xF, b >> 4), dim=-1).flatten(-2)
    grid = torch.tensor(_E2M1_GRID, dtype=torch.float32, device=packed.device)
    mag = grid[codes & 7]
    return torch.where((codes & 8) != 0, -mag, mag)


def _low_precision_values(fn, name, t, declared):
    """float32 values of a float8 tensor, or of FP4 bytes (declared float4_e2m1fn_x2)."""
    kind = _dtype_name(declared)
    if kind == "hifloat8":
        return _hif8_values(fn, name, t)
    if kind == "float4_e2m1fn_x2":
        check(t.dtype in (torch.uint8, torch.int8), f"{fn}: {name} with {name}_dtype=torch_npu.float4_e2m1fn_x2 "
              f"should be uint8 / int8 bytes, got {t.dtype}.")
        return _fp4_values(t)
    if kind == "float4_e1m2fn_x2":
        _unsupported(fn, f"{name}_dtype=torch_npu.float4_e1m2fn_x2", "the operator documents float4_e2m1 only")
    check(kind is None or kind in _FP8_ELEM, f"{fn}: {name}_dtype {kind} is not supported; expected None, "
          "torch.float8_e4m3fn, torch.float8_e5m2 or torch_npu.float4_e2m1fn_x2.")
    check(t.dtype in _FP8, f"{fn}: {name} should be torch.float8_e4m3fn or torch.float8_e5m2, got {t.dtype}.")
    check(kind is None or _TORCH[kind] == t.dtype,
          f"{fn}: {name}_dtype {kind} does not match {name}'s dtype {t.dtype}.")
    return t.float()


def _expand_blocks(scale, k, axis):
    """Per-32-block scales (pairs flattened) along ``axis`` -> one per element, k of them."""
    return scale.repeat_interleave(32, dim=axis).narrow(axis, 0, k)


def _mm64(a, b):
    return torch.matmul(a.double(), b.double())


# ------------------------------------------------------------------ group_list


def _group_ends(fn, group_list, group_list_type, groups, device):
    check(group_list.dim() == 1 and group_list.dtype in (torch.int64, torch.int32),
          f"{fn}: group_list should be a 1-D int64 tensor, got {group_list.dtype} of shape {list(group_list.shape)}.")
    check(group_list.shape[0] == groups, f"{fn}: group_list should have {groups} entries (one per group), got "
          f"{group_list.shape[0]}.")
    check(group_list_type in (0, 1), f"{fn}: group_list_type should be 0 (cumsum) or 1 (count), got "
          f"{group_list_type}.")
    ends = group_list.to(device=device, dtype=torch.int64)
    return ends.cumsum(0) if group_list_type == 1 else ends


def _group_spans(fn, group_list, group_list_type, ends, total, axis_name):
    """[(start, end)] per group, read on the host and checked; None while tracing."""
    if not (_concrete(group_list) and group_list.device.type != "meta"):
        return None
    values = [int(v) for v in group_list.tolist()]
    bounds = [int(v) for v in ends.tolist()]
    ok = all(v >= 0 for v in values) and all(a <= b for a, b in zip([0] + bounds, bounds)) and \
        (not bounds or bounds[-1] <= total)
    check(ok, f"{fn}: group_list {values} (group_list_type {group_list_type}) should be "
          f"{'non-negative counts' if group_list_type == 1 else 'a non-decreasing cumsum'} that fit in the "
          f"{total} {axis_name} (at most {total} in all).")
    return list(zip([0] + bounds[:-1], bounds))


def _group_of(ends, total):
    """Group index of each of ``total`` rows (len(ends) for rows past the last group)."""
    return torch.searchsorted(ends, torch.arange(total, device=ends.device), right=True)


def _rows_by_group(spans, gid, groups, total, compute):
    """Row-wise outputs of grouped rows: ``compute(g, rows)`` returns a tuple of tensors for
    the rows ``rows`` (a slice) of group g. Rows past the last group are zero."""
    if spans is not None:
        parts = [compute(g, slice(s, e)) for g, (s, e) in enumerate(spans) if e > s]
        if not parts:
            probe = compute(0, slice(0, 0))
            return tuple(t.new_zeros((total,) + tuple(t.shape[1:])) for t in probe)
        outs = []
        for i in range(len(parts[0])):
            body = torch.cat([p[i] for p in parts])
            pad = total - body.shape[0]
            if pad:
                body = torch.cat([body, body.new_zeros((pad,) + tuple(body.shape[1:]))])
            outs.append(body)
        return tuple(outs)
    outs = None
    for g in range(groups):
        ys = compute(g, slice(None))
        mask = gid == g
        if outs is None:
            outs = [torch.zeros_like(y) for y in ys]
        outs = [torch.where(mask.view((-1,) + (1,) * (y.dim() - 1)), y, o) for y, o in zip(ys, outs)]
    return tuple(outs)


def _k_grouped_products(a, b, spans, gid, groups):
    """(groups, M, N) float64: a[:, k_g] @ b[k_g, :] for the K slices of each group."""
    if spans is not None:
        return torch.stack([_mm64(a[:, s:e], b[s:e]) for s, e in spans])
    return torch.stack([_mm64(a * (gid == g).to(a.dtype), b) for g in range(groups)])


# ------------------------------------------------------------------ npu_add_quant_matmul / _gmm


_GMM_HIF8 = ("the grouped operator's hifloat8 (float32-scale) quantisation is not documented (aclnn documents "
             "hifloat8 T-T for QuantBatchMatmulInplaceAdd only), so its scale shapes and formula are unknown")


def _check_fp8_mx_inputs(fn, x1, x2, x1_scale, x2_scale, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype):
    _no_hifloat8(fn, _GMM_HIF8, ("x1_dtype", x1_dtype), ("x2_dtype", x2_dtype))
    check(x1_scale is not None, f"{fn}: x1_scale is required (the MX scales of x1).")
    if x1_scale.dtype not in (torch.uint8, torch.int8, torch.float8_e8m0fnu) or \
            x2_scale.dtype not in (torch.uint8, torch.int8, torch.float8_e8m0fnu):
        _unsupported(fn, "T-C quantisation (float32 scales)", _GMM_HIF8)
    a = _low_precision_values(fn, "x1", x1, x1_dtype)
    b = _low_precision_values(fn, "x2", x2, x2_dtype)
    check(x1.dim() == 2 and x2.dim() == 2, f"{fn}: x1 (M, K) and x2 (K, N) should be 2-D, got shapes "
          f"{list(x1.shape)} and {list(x2.shape)}.")
    check(a.shape[1] == b.shape[0], f"{fn}: the K of x1 {list(x1.shape)} (M, K) and x2 {list(x2.shape)} (K, N) "
          "should be equal.")
    s1 = _e8m0(fn, "x1_scale", x1_scale, x1_scale_dtype)
    s2 = _e8m0(fn, "x2_scale", x2_scale, x2_scale_dtype)
    return a, b, s1, s2


def _check_mx_group_sizes(fn, group_sizes):
    if group_sizes is None:
        return
    gs = [int(v) for v in group_sizes]
    check(len(gs) == 3 and gs[0] in (0, 1) and gs[1] in (0, 1) and gs[2] in (0, 32),
          f"{fn}: group_sizes should be [group_m, group_n, group_k] with MX values [1, 1, 32] (0 to infer), got {gs}.")


def _add_quant_matmul_tt(fn, y, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype, x2_dtype, x1_scale_dtype,
                         x2_scale_dtype):
    """HiFloat8 T-T: ``self + (sum_k x1[m, k] * x2[k, n]) * (x1_scale * x2_scale)`` (scalar float32 scales)."""
    check(_is_hif8(x1_dtype) and _is_hif8(x2_dtype), f"{fn}: T-T quantisation needs x1_dtype and x2_dtype both "
          f"torch_npu.hifloat8, got {_dtype_name(x1_dtype)} and {_dtype_name(x2_dtype)}.")
    check(x1_scale_dtype is None and x2_scale_dtype is None, f"{fn}: x1_scale_dtype / x2_scale_dtype are for E8M0 "
          "(MX) scales; hifloat8 T-T takes float32 scales with None.")
    check(group_sizes is None or [int(v) for v in group_sizes] == [0, 0, 0],
          f"{fn}: group_sizes should be None or [0, 0, 0] for hifloat8 T-T quantisation, got {group_sizes}.")
    for name, t in (("x1_scale", x1_scale), ("x2_scale", x2_scale)):
        check(t is not None and t.dtype == torch.float32 and list(t.shape) == [1],
              f"{fn}: {name} should be a float32 tensor of shape [1] for hifloat8 T-T quantisation, got "
              f"{None if t is None else (t.dtype, list(t.shape))}.")
    a = _hif8_values(fn, "x1", x1)
    b = _hif8_values(fn, "x2", x2)
    check(a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], f"{fn}: x1 (M, K) and x2 (K, N) should be "
          f"2-D with the same K, got shapes {list(x1.shape)} and {list(x2.shape)}.")
    check(list(y.shape) == [a.shape[0], b.shape[1]], f"{fn}: self should have shape [{a.shape[0]}, {b.shape[1]}] "
          f"(M, N), got {list(y.shape)}.")
    return y + (_mm64(a, b).float() * (x1_scale * x2_scale))


def _add_quant_matmul(fn, y, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype, x2_dtype, x1_scale_dtype,
                      x2_scale_dtype):
    check(y.dtype == torch.float32 and y.dim() == 2, f"{fn}: self should be a 2-D float32 tensor (M, N), got "
          f"{y.dtype} of shape {list(y.shape)}.")
    if _is_hif8(x1_dtype) or _is_hif8(x2_dtype) or x2_scale.dtype == torch.float32:
        return _add_quant_matmul_tt(fn, y, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype, x2_dtype,
                                    x1_scale_dtype, x2_scale_dtype)
    a, b, s1, s2 = _check_fp8_mx_inputs(fn, x1, x2, x1_scale, x2_scale, x1_dtype, x2_dtype, x1_scale_dtype,
                                        x2_scale_dtype)
    _check_mx_group_sizes(fn, group_sizes)
    m, k = a.shape
    n = b.shape[1]
    pairs = -(-k // 64)
    check(list(y.shape) == [m, n], f"{fn}: self should have shape [{m}, {n}] (M, N), got {list(y.shape)}.")
    check(list(s1.shape) == [m, pairs, 2], f"{fn}: x1_scale should have shape [{m}, {pairs}, 2] (M, ceil(K / 64), "
          f"2), got {list(x1_scale.shape)}.")
    check(list(s2.shape) == [pairs, n, 2], f"{fn}: x2_scale should have shape [{pairs}, {n}, 2] (ceil(K / 64), N, "
          f"2), got {list(x2_scale.shape)}.")
    a = a * _expand_blocks(s1.flatten(1), k, 1)
    b = b * _expand_blocks(s2.transpose(0, 1).flatten(1), k, 1).t()
    return y + _mm64(a, b).float()


def npu_add_quant_matmul(self, x1, x2, x2_scale, x1_scale=None, group_sizes=None, x1_dtype=None, x2_dtype=None,
                         x1_scale_dtype=None, x2_scale_dtype=None):
    return _add_quant_matmul("npu_add_quant_matmul", self, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype,
                             x2_dtype, x1_scale_dtype, x2_scale_dtype)


def npu_add_quant_matmul_(self, x1, x2, x2_scale, x1_scale=None, group_sizes=None, x1_dtype=None, x2_dtype=None,
                          x1_scale_dtype=None, x2_scale_dtype=None):
    out = _add_quant_matmul("npu_add_quant_matmul_", self, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype,
                            x2_dtype, x1_scale_dtype, x2_scale_dtype)
    return self.copy_(out)


def _add_quant_gmm(fn, y, x1, x2, x2_scale, group_list, x1_scale, group_list_type, group_sizes, x1_dtype, x2_dtype,
                   x1_scale_dtype, x2_scale_dtype):
    group_list_type = 0 if group_list_type is None else group_list_type
    check(group_sizes is None, f"{fn}: group_sizes is not supported currently; pass None.")
    check(y.dtype == torch.float32 and y.dim() == 3, f"{fn}: self should be a 3-D float32 tensor (g, M, N), got "
          f"{y.dtype} of shape {list(y.shape)}.")
    a, b, s1, s2 = _check_fp8_mx_inputs(fn, x1, x2, x1_scale, x2_scale, x1_dtype, x2_dtype, x1_scale_dtype,
                                        x2_scale_dtype)
    m, k = a.shape
    n = b.shape[1]
    groups = y.shape[0]
    check(list(y.shape) == [groups, m, n], f"{fn}: self should have shape [g, {m}, {n}] (g, M, N), got "
          f"{list(y.shape)}.")
    ends = _group_ends(fn, group_list, group_list_type, groups, a.device)
    pairs = k // 64 + groups
    check(list(s1.shape) == [m, pairs, 2], f"{fn}: x1_scale should have shape [{m}, {pairs}, 2] (M, K // 64 + g, 2: "
          f"npu_grouped_dynamic_mx_quant's scales of x1's transpose, transposed), got {list(x1_scale.shape)}.")
    check(list(s2.shape) == [pairs, n, 2], f"{fn}: x2_scale should have shape [{pairs}, {n}, 2] (K // 64 + g, N, 2), "
          f"got {list(x2_scale.shape)}.")
    spans = _group_spans(fn, group_list, group_list_type, ends, k, "rows of K")
    # Group g's scale pairs start at pair row start_g // 64 + g (npu_grouped_dynamic_mx_quant's layout).
    gid = _group_of(ends, k)
    g = gid.clamp(max=groups - 1)
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    local = torch.arange(k, device=ends.device) - starts[g]
    pair = (starts[g] // 64 + g + local // 64).clamp(0, pairs - 1)
    half = (local // 32) % 2
    a = a * s1[:, pair, half]
    b = b * s2[pair, :, half]
    delta = _k_grouped_products(a, b, spans, gid, groups).float()
    return y + delta


def npu_add_quant_gmm(self, x1, x2, x2_scale, group_list, x1_scale=None, group_list_type=0, group_sizes=None,
                      x1_dtype=None, x2_dtype=None, x1_scale_dtype=None, x2_scale_dtype=None):
    return _add_quant_gmm("npu_add_quant_gmm", self, x1, x2, x2_scale, group_list, x1_scale, group_list_type,
                          group_sizes, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype)


def npu_add_quant_gmm_(self, x1, x2, x2_scale, group_list, x1_scale=None, group_list_type=0, group_sizes=None,
                       x1_dtype=None, x2_dtype=None, x1_scale_dtype=None, x2_scale_dtype=None):
    out = _add_quant_gmm("npu_add_quant_gmm_", self, x1, x2, x2_scale, group_list, x1_scale, group_list_type,
                         group_sizes, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype)
    return self.copy_(out)


# ------------------------------------------------------------------ npu_quant_(grouped_)matmul_dequant


def _quantize_x(fn, x, x_scale, x_offset, smooth_scale, quant_mode, bias, weight_scale):
    """(int8-valued float64 x, float32 per-row x scale or None) for the dequant matmuls."""
    quant_mode = "pertoken" if quant_mode is None else quant_mode
    check(quant_mode in ("pertoken", "pertensor"), f"{fn}: quant_mode should be 'pertoken' or 'pertensor', got "
          f"'{quant_mode}'.")
    check(x.dim() == 2 and x.dtype == torch.float16, f"{fn}: x should be a 2-D float16 tensor (m, k), got "
          f"{x.dtype} of shape {list(x.shape)}.")
    check(bias is None, f"{fn}: bias is not supported (the operator takes only None).")
    check(x_offset is None, f"{fn}: x_offset is not supported (the operator takes only None).")
    m, k = x.shape
    xf = x.float()
    if smooth_scale is not None:
        check(smooth_scale.dtype == torch.float16 and list(smooth_scale.shape) == [k],
              f"{fn}: smooth_scale should be a float16 tensor of shape [{k}], got {smooth_scale.dtype} of shape "
              f"{list(smooth_scale.shape)}.")
        xf = xf * smooth_scale.float()
    int64_scale = weight_scale.dtype == torch.int64
    if x_scale is None:
        check(quant_mode == "pertoken", f"{fn}: dynamic quantisation (x_scale None) supports only quant_mode "
              f"'pertoken', got '{quant_mode}'.")
        check(not int64_scale, f"{fn}: an int64 weight_scale needs a static pertensor x_scale.")
        scale = xf.abs().amax(dim=1) / 127.0
    else:
        size = 1 if quant_mode == "pertensor" else m
        check(x_scale.dim() == 1 and x_scale.shape[0] == size and x_scale.dtype in (torch.float32, torch.float16),
              f"{fn}: x_scale should be a float32 (or float16) tensor of shape [{size}] for quant_mode "
              f"'{quant_mode}', got {x_scale.dtype} of shape {list(x_scale.shape)}.")
        fp16 = x_scale.dtype == torch.float16
        check(fp16 == int64_scale and (not fp16 or quant_mode == "pertensor"),
              f"{fn}: a float16 x_scale goes with an int64 weight_scale and quant_mode 'pertensor' (and only then), "
              f"got x_scale {x_scale.dtype}, weight_scale {weight_scale.dtype}, quant_mode '{quant_mode}'.")
        scale = x_scale.float().expand(m)
    q = torch.where(scale.unsqueeze(1) > 0, torch.round(xf / scale.unsqueeze(1)), torch.zeros_like(xf))
    return q.clamp(-128, 127).double(), (None if int64_scale else scale)


def _dequant(acc, weight_scale, x_scale):
    """float32 (acc * weight_scale [* x_scale per row])."""
    y = acc.float() * _scale_value(weight_scale)
    return y if x_scale is None else y * x_scale.unsqueeze(1)


def npu_quant_matmul_dequant(x, quantized_weight, weight_scale, bias=None, x_scale=None, x_offset=None,
                             smooth_scale=None, quant_mode="pertoken"):
    fn = "npu_quant_matmul_dequant"
    w = quantized_weight
    check(w.dim() == 2 and w.dtype == torch.int8, f"{fn}: quantized_weight should be a 2-D int8 tensor (n, k), got "
          f"{w.dtype} of shape {list(w.shape)}.")
    check(weight_scale.dim() == 1 and weight_scale.dtype in (torch.float32, torch.int64),
          f"{fn}: weight_scale should be a 1-D float32 (or int64) tensor, got {weight_scale.dtype} of shape "
          f"{list(weight_scale.shape)}.")
    check(x.dim() == 2 and x.shape[1] == w.shape[1], f"{fn}: x {list(x.shape)} (m, k) and quantized_weight "
          f"{list(w.shape)} (n, k) should have the same k.")
    check(weight_scale.shape[0] == w.shape[0], f"{fn}: weight_scale should have n = {w.shape[0]} entries, got "
          f"{weight_scale.shape[0]}.")
    q, xs = _quantize_x(fn, x, x_scale, x_offset, smooth_scale, quant_mode, bias, weight_scale)
    return _dequant(q @ w.double().t(), weight_scale, xs).to(x.dtype)


def npu_quant_grouped_matmul_dequant(x, quantized_weight, weight_scale, group_list, bias=None, x_scale=None,
                                     x_offset=None, smooth_scale=None, quant_mode="pertoken"):
    fn = "npu_quant_grouped_matmul_dequant"
    w = quantized_weight
    check(w.dim() == 3 and w.dtype == torch.int8, f"{fn}: quantized_weight should be a 3-D int8 tensor (g, n, k), "
          f"got {w.dtype} of shape {list(w.shape)}.")
    groups, n, k = w.shape
    check(weight_scale.dtype in (torch.float32, torch.int64) and list(weight_scale.shape) == [groups, n],
          f"{fn}: weight_scale should be a float32 (or int64) tensor of shape [{groups}, {n}], got "
          f"{weight_scale.dtype} of shape {list(weight_scale.shape)}.")
    check(x.dim() == 2 and x.shape[1] == k, f"{fn}: x {list(x.shape)} (m, k) and quantized_weight "
          f"{list(w.shape)} (g, n, k) should have the same k.")
    q, xs = _quantize_x(fn, x, x_scale, x_offset, smooth_scale, quant_mode, bias, weight_scale)
    m = x.shape[0]
    ends = _group_ends(fn, group_list, 0, groups, x.device)
    spans = _group_spans(fn, group_list, 0, ends, m, "rows of x")
    gid = _group_of(ends, m)

    def compute(g, rows):
        y = _dequant(q[rows] @ w[g].double().t(), weight_scale[g], None if xs is None else xs[rows])
        return (y,)

    return _rows_by_group(spans, gid, groups, m, compute)[0].to(x.dtype)


# ------------------------------------------------------------------ npu_transpose_quant_batchmatmul


def _out_float_dtype(fn, name, code, allowed=(torch.float16, torch.bfloat16)):
    kind = _dtype_name(code)
    dtype = _TORCH.get(kind)
    check(dtype in allowed, f"{fn}: {name} should be one of {[str(d) for d in allowed]}, got {kind}.")
    return dtype


def npu_transpose_quant_batchmatmul(x1, x2, dtype, bias=None, x1_scale=None, x2_scale=None, group_sizes=None,
                                    perm_x1=None, perm_x2=None, perm_y=None, batch_split_factor=1, x1_dtype=None,
                                    x2_dtype=None):
    fn = "npu_transpose_quant_batchmatmul"
    hif8_out = _is_hif8(dtype)
    out_dtype = None if hif8_out else _out_float_dtype(fn, "dtype", dtype)
    perm_x1 = [1, 0, 2] if perm_x1 is None else [int(p) for p in perm_x1]
    perm_x2 = [0, 1, 2] if perm_x2 is None else [int(p) for p in perm_x2]
    perm_y = [1, 0, 2] if perm_y is None else [int(p) for p in perm_y]
    factor = 1 if batch_split_factor is None else int(batch_split_factor)
    check(perm_x1 == [1, 0, 2], f"{fn}: perm_x1 should be [1, 0, 2], got {perm_x1}.")
    check(perm_x2 in ([0, 1, 2], [0, 2, 1]), f"{fn}: perm_x2 should be [0, 1, 2] or [0, 2, 1], got {perm_x2}.")
    check(perm_y == [1, 0, 2], f"{fn}: perm_y should be [1, 0, 2], got {perm_y}.")
    check(factor == 1, f"{fn}: batch_split_factor should be 1, got {factor}.")
    check(bias is None, f"{fn}: bias is not supported; pass None.")
    check((x1_scale is not None or _is_hif8(x1_dtype)) and x2_scale is not None,
          f"{fn}: x1_scale and x2_scale are required (x1_scale may be None only for hifloat8 T-C quantisation).")
    a = _low_precision_values(fn, "x1", x1, x1_dtype)
    b = _low_precision_values(fn, "x2", x2, x2_dtype)
    check(a.dim() == 3 and b.dim() == 3, f"{fn}: x1 (m, b, k) and x2 should be 3-D, got shapes {list(x1.shape)} "
          f"and {list(x2.shape)}.")
    a = a.permute(perm_x1)  # (B, M, K)
    b = b.permute(perm_x2)  # (B, K, N)
    batch, m, k = a.shape
    n = b.shape[2]
    check(b.shape[0] == batch and b.shape[1] == k, f"{fn}: x2 {list(x2.shape)} (perm_x2 {perm_x2}) should be "
          f"(b, k, n) with b = {batch} and k = {k} as in x1 {list(x1.shape)}.")
    if _is_hif8(x1_dtype) or _is_hif8(x2_dtype):  # T-C: per-tensor x1 scale (optional), per-channel x2 scale
        check(_is_hif8(x1_dtype) and _is_hif8(x2_dtype), f"{fn}: T-C quantisation takes x1_dtype and x2_dtype both "
              f"torch_npu.hifloat8, got {_dtype_name(x1_dtype)} and {_dtype_name(x2_dtype)}.")
        check(x1_scale is None or (x1_scale.dtype == torch.float32 and list(x1_scale.shape) == [1]),
              f"{fn}: T-C quantisation takes x1_scale None or float32 of shape [1], got "
              f"{None if x1_scale is None else (x1_scale.dtype, list(x1_scale.shape))}.")
        check(x2_scale.dtype in (torch.float32, torch.int64) and list(x2_scale.shape) == [n],
              f"{fn}: T-C quantisation takes x2_scale float32 (or int64) of shape [{n}], got "
              f"{x2_scale.dtype} {list(x2_scale.shape)}.")
        check(group_sizes is None or all(int(v) == 0 for v in group_sizes),
              f"{fn}: group_sizes should be None or [0, 0, 0] for T-C quantisation, got {group_sizes}.")
        y = _mm64(a, b).float() * _scale_value(x2_scale)
        if x1_scale is not None:
            y = y * x1_scale
    elif x1_scale.dim() == 1:  # K-C: per-row x1 scale, per-channel x2 scale
        check(x1_scale.dtype == torch.float32 and x2_scale.dtype in (torch.float32, torch.int64) and
              list(x1_scale.shape) == [m] and list(x2_scale.shape) == [n],
              f"{fn}: K-C quantisation takes float32 x1_scale of shape [{m}] and x2_scale of shape [{n}], got "
              f"{x1_scale.dtype} {list(x1_scale.shape)} and {x2_scale.dtype} {list(x2_scale.shape)}.")
        check(group_sizes is None or all(int(v) == 0 for v in group_sizes),
              f"{fn}: group_sizes should be None or [0, 0, 0] for K-C quantisation, got {group_sizes}.")
        y = _mm64(a, b).float() * _scale_value(x2_scale) * x1_scale.view(1, m, 1)
    else:  # MX: E8M0 scales per 32 elements of k
        _check_mx_group_sizes(fn, group_sizes)
        pairs = -(-k // 64)
        s1 = _e8m0(fn, "x1_scale", x1_scale, None if x1_scale.dtype == torch.float8_e8m0fnu else _D.float8_e8m0fnu)
        s2 = _e8m0(fn, "x2_scale", x2_scale, None if x2_scale.dtype == torch.float8_e8m0fnu else _D.float8_e8m0fnu)
        check(list(s1.shape) == [m, batch, pairs, 2], f"{fn}: x1_scale should have shape [{m}, {batch}, {pairs}, 2] "
              f"(m, b, ceil(k / 64), 2), got {list(x1_scale.shape)}.")
        want2 = [batch, pairs, n, 2] if perm_x2 == [0, 1, 2] else [batch, n, pairs, 2]
        check(list(s2.shape) == want2, f"{fn}: x2_scale should have shape {want2} for perm_x2 {perm_x2}, got "
              f"{list(x2_scale.shape)}.")
        s1 = _expand_blocks(s1.flatten(2), k, 2).transpose(0, 1)  # (B, M, K)
        if perm_x2 == [0, 1, 2]:
            s2 = _expand_blocks(s2.transpose(1, 2).flatten(2), k, 2).transpose(1, 2)  # (B, K, N)
        else:
            s2 = _expand_blocks(s2.flatten(2), k, 2).transpose(1, 2)
        y = _mm64(a * s1, b * s2).float()
    y = y.transpose(0, 1).contiguous()  # (M, B, N)
    return _hifloat8.encode(y) if hif8_out else y.to(out_dtype)


# ------------------------------------------------------------------ npu_matmul_compress_dequant


def npu_matmul_compress_dequant(x1, x2, compress_index, bias, scale, offsetW=None, offsetX=None):
    fn = "npu_matmul_compress_dequant"
    check(offsetW is None, f"{fn}: offsetW currently only supports None.")
    check(offsetX in (None, 0), f"{fn}: offsetX currently only supports 0, got {offsetX}.")
    check(x1.dim() == 2 and x1.dtype == torch.int8, f"{fn}: x1 should be a 2-D int8 tensor (m, k), got {x1.dtype} "
          f"of shape {list(x1.shape)}.")
    check(x2.dim() == 1 and x2.dtype == torch.int8, f"{fn}: x2 should be the 1-D int8 compressed weight, got "
          f"{x2.dtype} of shape {list(x2.shape)}.")
    check(compress_index.dim() == 1 and compress_index.dtype == torch.int8,
          f"{fn}: compress_index should be a 1-D int8 tensor, got {compress_index.dtype} of shape "
          f"{list(compress_index.shape)}.")
    check(bias.dim() == 2 and bias.dtype == torch.int32, f"{fn}: bias should be a 2-D int32 tensor (1, n), got "
          f"{bias.dtype} of shape {list(bias.shape)}.")
    check(scale.dim() == 2 and scale.dtype in (torch.uint64, torch.int64),
          f"{fn}: scale should be a 2-D uint64 tensor (1, n) or (1, 1), got {scale.dtype} of shape "
          f"{list(scale.shape)}.")
    _unsupported(fn, "the compressed weight x2", "msModelSlim compresses it with CANN's closed CompressFcOp into "
                 "the Atlas inference cards' hardware-unzip stream (8 x 8 fractal tiles indexed by compress_index), "
                 "whose format no public document describes, so vNPU cannot decompress any x2")


# ------------------------------------------------------------------ grouped matmul + SwiGLU + quant


def _swiglu(c):
    act, gate = c.chunk(2, dim=-1)
    return act * torch.sigmoid(act) * gate


def _quant_rows(s, qmax):
    """Per-row symmetric quantisation: (s / scale, scale = max|s| / qmax), zero rows stay 0."""
    scale = s.abs().amax(dim=-1) / qmax
    q = torch.where(scale.unsqueeze(-1) > 0, s / scale.unsqueeze(-1), torch.zeros_like(s))
    return q, scale


def _int_weight(fn, w):
    """float64 values of an int8 (E, K, N) weight or an int32 one packing int4 along N."""
    if w.dtype == torch.int32:
        return _unpack_int4(w).double()
    check(w.dtype == torch.int8, f"{fn}: weight should be int8, or int32 packing eight int4 along n, got {w.dtype}.")
    return w.double()


def _weight_scale_fp32(fn, ws, expect, name="weight_scale"):
    check(list(ws.shape) == list(expect), f"{fn}: {name} should have shape {list(expect)}, got {list(ws.shape)}.")
    check(ws.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.uint64),
          f"{fn}: {name} should be float32 / float16 / bfloat16 (or int64 / uint64 holding float32 bits), got "
          f"{ws.dtype}.")
    if ws.dtype == torch.uint64:
        ws = ws.view(torch.int64)
    return _scale_value(ws)


def _a8w4_products(fn, xq, w, ws, assist, dequant_mode):
    """The MSD A8W4 product of one group's rows: ((x - 8) @ (W * scale) + assist), float32."""
    k, n = w.shape
    if dequant_mode == 1:
        check(ws.dim() == 2 and ws.shape[1] == n and ws.shape[0] >= 1 and k % ws.shape[0] == 0,
              f"{fn}: a per-group weight_scale should be (E, K_group_num, {n}) with K_group_num dividing k = {k}, "
              f"got {list(ws.shape)} per expert.")
        wsk = ws.repeat_interleave(k // ws.shape[0], dim=0)
    else:
        wsk = ws.reshape(1, n)
    return (_mm64(xq - 8.0, w * wsk.double()) + assist.double()).float()


def _gmm_swiglu_quant(fn, x, weight, weight_scale, x_scale, group_list, group_list_type, *, assist=None,
                      smooth_scale=None, dequant_mode=0, out_kind="int8", x_dtype=None, weight_dtype=None,
                      x_scale_dtype=None, weight_scale_dtype=None):
    """(Q, Q_scale) of the grouped matmul + dequant + SwiGLU + quant family."""
    check(x.dim() == 2, f"{fn}: x should be 2-D (m, k), got shape {list(x.shape)}.")
    check(weight.dim() == 3, f"{fn}: weight should be 3-D (E, k, n) (ND; vNPU keeps NZ weights ND), got shape "
          f"{list(weight.shape)}.")
    groups = weight.shape[0]
    m = x.shape[0]
    mx = dequant_mode == 2
    if mx:
        a = _low_precision_values(fn, "x", x, x_dtype)
        k = a.shape[1]
        wv = _low_precision_values(fn, "weight", weight, weight_dtype)
        pairs = -(-k // 64)
        ws = _e8m0(fn, "weight_scale", weight_scale, weight_scale_dtype)
        if wv.shape[1] == k:  # (E, k, n)
            n = wv.shape[2]
            check(list(ws.shape) == [groups, pairs, n, 2], f"{fn}: weight_scale should have shape "
                  f"[{groups}, {pairs}, {n}, 2] (E, ceil(k / 64), n, 2), got {list(weight_scale.shape)}.")
            wsk = _expand_blocks(ws.transpose(2, 3).flatten(1, 2), k, 1)  # (E, k, n)
        else:  # transposed (E, n, k)
            check(wv.shape[2] == k, f"{fn}: weight {list(weight.shape)} should be (E, k, n) or (E, n, k) with "
                  f"k = {k} (x's k).")
            wv = wv.transpose(1, 2)
            n = wv.shape[2]
            check(list(ws.shape) == [groups, n, pairs, 2], f"{fn}: weight_scale of a transposed weight should have "
                  f"shape [{groups}, {n}, {pairs}, 2], got {list(weight_scale.shape)}.")
            wsk = _expand_blocks(ws.flatten(2), k, 2).transpose(1, 2)
        xs = _e8m0(fn, "x_scale", x_scale, x_scale_dtype)
        check(list(xs.shape) == [m, pairs, 2], f"{fn}: x_scale should have shape [{m}, {pairs}, 2] (m, ceil(k / 64), "
              f"2), got {list(x_scale.shape)}.")
        a = a * _expand_blocks(xs.flatten(1), k, 1)
        wv = wv * wsk
    else:
        if _is_hif8(x_dtype):  # hifloat8 per token: decoded bytes
            a = _hif8_values(fn, "x", x).double()
            check(_is_hif8(weight_dtype), f"{fn}: a hifloat8 x needs weight_dtype=torch_npu.hifloat8, got "
                  f"{_dtype_name(weight_dtype)}.")
            wv = _hif8_values(fn, "weight", weight).double()
        elif x.dtype in _FP8:
            a = x.double()
            wv = weight.double()
            check(weight.dtype in _FP8, f"{fn}: a float8 x needs a float8 weight, got {weight.dtype}.")
        elif x.dtype == torch.int32:  # A4W4
            a = _unpack_int4(x).double()
            check(weight.dtype == torch.int32, f"{fn}: an int4 (int32-packed) x needs an int4 (int32-packed) "
                  f"weight, got {weight.dtype}.")
            wv = _int_weight(fn, weight)
        else:
            check(x.dtype == torch.int8, f"{fn}: x should be int8, int32 (packed int4) or float8, got {x.dtype}.")
            a = x.double()
            wv = _int_weight(fn, weight)
        k = a.shape[1]
        if wv.shape[1] != k and wv.shape[2] == k and weight.dtype != torch.int32:  # transposed (E, n, k)
            wv = wv.transpose(1, 2)
        check(wv.shape[1] == k, f"{fn}: weight {list(weight.shape)} should be (E, k, n) (or (E, n, k)) with k = {k} "
              "(x's k).")
        n = wv.shape[2]
        check(x_scale.dtype == torch.float32 and list(x_scale.shape) == [m], f"{fn}: x_scale should be a float32 "
              f"tensor of shape [{m}] (one per token), got {x_scale.dtype} of shape {list(x_scale.shape)}.")
    check(n % 2 == 0, f"{fn}: n = {n} should be even (SwiGLU halves it).")
    ends = _group_ends(fn, group_list, group_list_type, groups, x.device)
    spans = _group_spans(fn, group_list, group_list_type, ends, m, "rows of x")
    gid = _group_of(ends, m)
    a8w4 = assist is not None
    if not mx:
        if a8w4:
            check(weight_scale.dtype in (torch.int64, torch.uint64), f"{fn}: A8W4 weight_scale should be uint64 "
                  f"(int64) holding float32 bits, got {weight_scale.dtype}.")
            wscale = _scale_value(weight_scale.view(torch.int64) if weight_scale.dtype == torch.uint64
                                  else weight_scale)
            check(wscale.dim() in (2, 3) and wscale.shape[0] == groups and wscale.shape[-1] == n and
                  (wscale.dim() == 3) == (dequant_mode == 1),
                  f"{fn}: A8W4 weight_scale should be (E, n) for dequant_mode 0 or (E, K_group_num, n) for "
                  f"dequant_mode 1, got {list(weight_scale.shape)} with dequant_mode {dequant_mode}.")
            check(assist.dtype == torch.float32 and list(assist.shape) == [groups, n], f"{fn}: the A8W4 assist "
                  f"matrix should be float32 of shape [{groups}, {n}], got {assist.dtype} {list(assist.shape)}.")
        else:
            wscale = _weight_scale_fp32(fn, weight_scale, (groups, n))
    if smooth_scale is not None:
        check(smooth_scale.dtype == torch.float32 and list(smooth_scale.shape) in ([groups, n // 2], [groups]),
              f"{fn}: smooth_scale should be float32 of shape [{groups}, {n // 2}] or [{groups}], got "
              f"{smooth_scale.dtype} of shape {list(smooth_scale.shape)}.")

    if mx:
        qmax = None  # MX output: E8M0 scales per 32 elements
    elif out_kind == "int8":
        qmax = 127.0
    elif out_kind == "hifloat8":
        qmax = _hifloat8.MAX  # max(type): HiFloat8's largest finite value
    else:
        qmax = _FP8_ELEM[out_kind].max

    def compute(g, rows):
        if mx:
            c = _mm64(a[rows], wv[g]).float()
        elif a8w4:
            c = _a8w4_products(fn, a[rows], wv[g], wscale[g], assist[g], dequant_mode) * x_scale[rows].unsqueeze(1)
        else:
            c = _mm64(a[rows], wv[g]).float() * x_scale[rows].unsqueeze(1) * wscale[g]
        s = _swiglu(c)
        if smooth_scale is not None:
            s = s * (smooth_scale[g] if smooth_scale.dim() == 2 else smooth_scale[g].reshape(1))
        if qmax is None:  # MX: 32-blocks along n / 2 with E8M0 scales (OCP rule)
            elem = _FP8_ELEM.get(out_kind, _E2M1)
            q, scale = _along(s, -1, 32, elem, _scaler(torch.float32, elem, 0), "rint")
            return (q.float() if q.is_floating_point() else q), scale
        q, scale = _quant_rows(s, qmax)
        return q, scale

    q, scale = _rows_by_group(spans, gid, groups, m, compute)
    if qmax is None:
        elem = _FP8_ELEM.get(out_kind, _E2M1)
        return _finish_y(q.to(elem.dtype) if q.is_floating_point() else q, elem), scale
    if out_kind == "int8":
        return _saturate_int8(q), scale
    if out_kind == "hifloat8":
        return _hifloat8.encode(q), scale
    return q.clamp(-qmax, qmax).to(_TORCH[out_kind]), scale


def npu_grouped_matmul_swiglu_quant(x, weight, group_list, weight_scale, x_scale, bias=None, offset=None):
    fn = "npu_grouped_matmul_swiglu_quant"
    check(offset is None, f"{fn}: offset is reserved and not supported; pass None.")
    check(x.dtype == torch.int8, f"{fn}: x should be int8, got {x.dtype}.")
    if weight.dtype == torch.int32:  # A8W4 (MSD): bias is the assist matrix
        check(bias is not None, f"{fn}: A8W4 (int32-packed int4 weight) needs bias, the float32 assist matrix "
              "8 * weight_scale * sum_k(weight).")
        mode = 1 if weight_scale.dim() == 3 else 0
        q, scale = _gmm_swiglu_quant(fn, x, weight, weight_scale, x_scale, group_list, 0, assist=bias,
                                     dequant_mode=mode)
    else:
        check(bias is None, f"{fn}: bias is only for A8W4 (int32-packed int4 weights); pass None for A8W8.")
        q, scale = _gmm_swiglu_quant(fn, x, weight, weight_scale, x_scale, group_list, 0)
    return q, scale, torch.zeros((), dtype=torch.float32, device=x.device)


def npu_grouped_matmul_swiglu_quant_v2(x, weight, weight_scale, x_scale, group_list, smooth_scale=None,
                                       weight_assist_matrix=None, bias=None, dequant_mode=0, dequant_dtype=0,
                                       quant_mode=0, quant_dtype=1, group_list_type=0, tuning_config=None,
                                       x_dtype=None, weight_dtype=None, weight_scale_dtype=None, x_scale_dtype=None):
    fn = "npu_grouped_matmul_swiglu_quant_v2"
    dequant_mode = 0 if dequant_mode is None else dequant_mode
    quant_mode = 0 if quant_mode is None else quant_mode
    group_list_type = 0 if group_list_type is None else group_list_type
    check(len(weight) == 1, f"{fn}: the size of weight should be 1, got {len(weight)}.")
    check(len(weight_scale) == 1, f"{fn}: the size of weight_scale should be 1, got {len(weight_scale)}.")
    check(bias is None, f"{fn}: bias is not supported currently; pass None.")
    check(dequant_mode in (0, 1, 2), f"{fn}: dequant_mode should be 0 (per-channel), 1 (per-group) or 2 (MX), got "
          f"{dequant_mode}.")
    check(quant_mode in (0, 2), f"{fn}: quant_mode should be 0 (per-token) or 2 (MX), got {quant_mode}.")
    check((dequant_mode == 2) == (quant_mode == 2), f"{fn}: MX quantisation needs dequant_mode=2 and quant_mode=2 "
          f"together, got dequant_mode={dequant_mode}, quant_mode={quant_mode}.")
    deq = _dtype_name(0 if dequant_dtype is None else dequant_dtype)
    check(deq in ("uint8", "int8", "float32", "float16", "bfloat16"), f"{fn}: dequant_dtype should be 0 (float32), "
          f"torch.float32, torch.float16 or torch.bfloat16, got {deq}.")
    hif8 = _is_hif8(x_dtype) or _is_hif8(weight_dtype)
    if dequant_mode == 2:
        _no_hifloat8(fn, "the operator documents hifloat8 for per-token quantisation only, not MX",
                     ("quant_dtype", quant_dtype), ("x_dtype", x_dtype), ("weight_dtype", weight_dtype))
    out_kind = _dtype_name(1 if quant_dtype is None else quant_dtype)
    if out_kind == "uint8":  # the A2 / A3 documentation's "0 (int8)"
        out_kind = "int8"
    w, ws = weight[0], weight_scale[0]
    assist = None
    if weight_assist_matrix is not None:
        check(len(weight_assist_matrix) == 1, f"{fn}: the size of weight_assist_matrix should be 1, got "
              f"{len(weight_assist_matrix)}.")
        assist = weight_assist_matrix[0]
    if dequant_mode == 2:
        fp4_in = _dtype_name(x_dtype) == "float4_e2m1fn_x2"
        allowed = ("float8_e4m3fn", "float8_e5m2") + (("float4_e2m1fn_x2",) if fp4_in else ())
        check(out_kind in allowed, f"{fn}: MX quant_dtype should be one of {list(allowed)}, got {out_kind}.")
        check(smooth_scale is None and assist is None, f"{fn}: smooth_scale and weight_assist_matrix are not "
              "supported in MX mode.")
        return _gmm_swiglu_quant(fn, x, w, ws, x_scale, group_list, group_list_type, dequant_mode=2,
                                 out_kind=out_kind, x_dtype=x_dtype, weight_dtype=weight_dtype,
                                 x_scale_dtype=x_scale_dtype, weight_scale_dtype=weight_scale_dtype)
    if hif8:
        check(_is_hif8(x_dtype) and _is_hif8(weight_dtype) and out_kind == "hifloat8",
              f"{fn}: hifloat8 per-token quantisation takes x_dtype, weight_dtype and quant_dtype all "
              f"torch_npu.hifloat8, got {_dtype_name(x_dtype)}, {_dtype_name(weight_dtype)} and {out_kind}.")
        check(weight_scale_dtype is None and x_scale_dtype is None, f"{fn}: weight_scale_dtype / x_scale_dtype "
              "are only for MX mode (dequant_mode=2).")
        check(weight_scale[0].dtype in (torch.float32, torch.bfloat16), f"{fn}: hifloat8 per-token weight_scale "
              f"should be float32 or bfloat16, got {weight_scale[0].dtype}.")
        check(smooth_scale is None and weight_assist_matrix is None and dequant_mode == 0,
              f"{fn}: hifloat8 per-token quantisation takes no smooth_scale / weight_assist_matrix and "
              "dequant_mode 0.")
        return _gmm_swiglu_quant(fn, x, w, ws, x_scale, group_list, group_list_type, out_kind=out_kind,
                                 x_dtype=x_dtype, weight_dtype=weight_dtype)
    check(x_dtype is None and weight_dtype is None and weight_scale_dtype is None and x_scale_dtype is None,
          f"{fn}: x_dtype / weight_dtype / weight_scale_dtype / x_scale_dtype are only for MX mode (dequant_mode=2) "
          "or hifloat8 per-token quantisation.")
    if x.dtype in _FP8:
        check(out_kind in _FP8_ELEM, f"{fn}: float8 x quantises to quant_dtype torch.float8_e4m3fn or "
              f"torch.float8_e5m2, got {out_kind}.")
    else:
        check(out_kind == "int8", f"{fn}: int8 / int4 x quantises to quant_dtype torch.int8, got {out_kind}.")
    if x.dtype == torch.int8 and w.dtype == torch.int32:  # A8W4
        check(assist is not None, f"{fn}: A8W4 needs weight_assist_matrix.")
        check(smooth_scale is None, f"{fn}: smooth_scale is only for A4W4.")
    else:
        check(assist is None, f"{fn}: weight_assist_matrix is only for A8W4 (int8 x, int32-packed int4 weight).")
        check(dequant_mode == 0, f"{fn}: dequant_mode {dequant_mode} is only for A8W4; A8W8 / A4W4 / float8 take 0.")
        check(smooth_scale is None or x.dtype == torch.int32, f"{fn}: smooth_scale is only for A4W4.")
    return _gmm_swiglu_quant(fn, x, w, ws, x_scale, group_list, group_list_type, assist=assist,
                             smooth_scale=smooth_scale, dequant_mode=dequant_mode, out_kind=out_kind)


# ------------------------------------------------------------------ npu_grouped_matmul_add


def _grouped_matmul_add_delta(fn, y, x, weight, group_list, transpose_x, transpose_weight, group_type,
                              group_list_type):
    group_list_type = 0 if group_list_type is None else group_list_type
    check(group_type == 2, f"{fn}: group_type only supports 2 (grouping along k), got {group_type}.")
    check(transpose_x, f"{fn}: transpose_x only supports True (x is (k, m)).")
    check(not transpose_weight, f"{fn}: transpose_weight only supports False (weight is (k, n)).")
    check(x.dim() == 2 and weight.dim() == 2, f"{fn}: x (k, m) and weight (k, n) should be 2-D, got shapes "
          f"{list(x.shape)} and {list(weight.shape)}.")
    check(x.dtype in _HALVES and weight.dtype == x.dtype, f"{fn}: x and weight should both be float16 or both "
          f"bfloat16, got {x.dtype} and {weight.dtype}.")
    check(x.shape[0] == weight.shape[0], f"{fn}: x {list(x.shape)} and weight {list(weight.shape)} should have the "
          "same k (first dimension).")
    k, m = x.shape
    n = weight.shape[1]
    check(y.dtype == torch.float32, f"{fn}: self should be float32, got {y.dtype}.")
    groups = group_list.shape[0] if group_list.dim() == 1 else -1
    check(groups >= 1 and ((y.dim() == 3 and list(y.shape) == [groups, m, n]) or
                           (y.dim() == 2 and list(y.shape) == [groups * m, n])),
          f"{fn}: self should have shape [{groups}, {m}, {n}] (g, m, n) or [{groups * m}, {n}], got "
          f"{list(y.shape)}.")
    ends = _group_ends(fn, group_list, group_list_type, groups, x.device)
    spans = _group_spans(fn, group_list, group_list_type, ends, k, "rows of x")
    gid = _group_of(ends, k)
    # float32 products of float16 / bfloat16 are exact; summed in float64, rounded once.
    delta = _k_grouped_products(x.float().t(), weight.float(), spans, gid, groups).float()
    return delta.reshape(y.shape)


def npu_grouped_matmul_add(self, x, weight, group_list, transpose_x=True, transpose_weight=False, group_type=2,
                           group_list_type=0):
    delta = _grouped_matmul_add_delta("npu_grouped_matmul_add", self, x, weight, group_list, transpose_x,
                                      transpose_weight, group_type, group_list_type)
    return self + delta


def npu_grouped_matmul_add_(self, x, weight, group_list, transpose_x=True, transpose_weight=False, group_type=2,
                            group_list_type=0):
    delta = _grouped_matmul_add_delta("npu_grouped_matmul_add_", self, x, weight, group_list, transpose_x,
                                      transpose_weight, group_type, group_list_type)
    return self.add_(delta)


# ------------------------------------------------------------------ npu_quant_matmul_gelu / _reduce_sum


def _broadcast_batch(fn, s1, s2):
    try:
        return list(torch.broadcast_shapes(tuple(s1), tuple(s2)))
    except RuntimeError:
        check(False, f"{fn}: the batch shapes {list(s1)} of x1 and {list(s2)} of x2 cannot be broadcast.")


def npu_quant_matmul_gelu(x1, x2, x1_scale, x2_scale, bias=None, approximate="gelu_erf"):
    fn = "npu_quant_matmul_gelu"
    approximate = "gelu_erf" if approximate is None else approximate
    check(approximate in ("gelu_tanh", "gelu_erf"), f"{fn}: approximate must be 'gelu_tanh' or 'gelu_erf', got "
          f"'{approximate}'.")
    check((x1.dtype, x2.dtype) in ((torch.int8, torch.int8), (torch.int32, torch.int32)),
          f"{fn}: only A8W8 (int8) or A4W4 (int32 packing eight int4) quantisation is supported, got x1 {x1.dtype} "
          f"and x2 {x2.dtype}.")
    check(2 <= x1.dim() <= 6 and 2 <= x2.dim() <= 6, f"{fn}: x1 and x2 should have 2 to 6 dimensions, got "
          f"{x1.dim()} and {x2.dim()}.")
    a4w4 = x1.dtype == torch.int32
    if a4w4:
        a = _unpack_int4(x1)
        k = a.shape[-1]
        if x2.shape[-2] == k:  # (k, n / 8): packed along n
            b = _unpack_int4(x2)
        else:  # (k / 8, n): a (n, k / 8) tensor packed along k, seen transposed
            check(x2.shape[-2] * 8 == k, f"{fn}: x2 {list(x2.shape)} should be (k, n / 8) or (k / 8, n) with "
                  f"k = {k} (x1's k).")
            b = _unpack_int4(x2.transpose(-2, -1)).transpose(-2, -1)
    else:
        a, b = x1, x2
    m, k = a.shape[-2:]
    check(b.shape[-2] == k, f"{fn}: the k of x1 {list(x1.shape)} and x2 {list(x2.shape)} should be equal.")
    n = b.shape[-1]
    batch = _broadcast_batch(fn, a.shape[:-2], b.shape[:-2])
    check(x1_scale.dtype == torch.float32 and list(x1_scale.shape) == [m], f"{fn}: x1_scale should be float32 of "
          f"shape [{m}] (per token), got {x1_scale.dtype} of shape {list(x1_scale.shape)}.")
    check(x2_scale.dtype in (torch.float32, torch.bfloat16) and x2_scale.dim() == 1 and x2_scale.shape[0] in (1, n),
          f"{fn}: x2_scale should be float32 or bfloat16 of shape [{n}] or [1], got {x2_scale.dtype} of shape "
          f"{list(x2_scale.shape)}.")
    out_dtype = torch.bfloat16 if x2_scale.dtype == torch.bfloat16 else torch.float16
    acc = _mm64(a, b)
    if bias is not None:
        allowed = (torch.int32,) if a4w4 else (torch.int32, torch.float32, torch.bfloat16, torch.float16)
        check(bias.dtype in allowed, f"{fn}: bias should be one of {[str(d) for d in allowed]}, got {bias.dtype}.")
        shapes = [[n]] + ([] if a4w4 or len(batch) != 1 else [[batch[0], 1, n]])
        check(list(bias.shape) in shapes, f"{fn}: bias should have shape {' or '.join(map(str, shapes))}, got "
              f"{list(bias.shape)}.")
        if bias.dtype == torch.bfloat16:
            out_dtype = torch.bfloat16
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + bias.double()
    y = acc.float() * x2_scale.float() * x1_scale.unsqueeze(-1)
    if bias is not None and bias.dtype != torch.int32:
        y = y + bias.float()
    y = F.gelu(y, approximate="tanh" if approximate == "gelu_tanh" else "none")
    return y.to(out_dtype)


def npu_quant_matmul_reduce_sum(x1, x2, x1_scale=None, x2_scale=None):
    fn = "npu_quant_matmul_reduce_sum"
    check(x1.dim() == 3 and x2.dim() == 3, f"{fn}: x1 (b, m, k) and x2 (b, k, n) should be 3-D, got shapes "
          f"{list(x1.shape)} and {list(x2.shape)}.")
    check(x1.dtype == torch.int8 and x2.dtype == torch.int8, f"{fn}: x1 and x2 should be int8, got {x1.dtype} and "
          f"{x2.dtype}.")
    b, m, k = x1.shape
    n = x2.shape[2]
    check(x2.shape[0] == b and x2.shape[1] == k, f"{fn}: x2 {list(x2.shape)} should be (b, k, n) with b = {b} and "
          f"k = {k}.")
    check(x1_scale is not None and x1_scale.dtype == torch.float32 and list(x1_scale.shape) == [b, m],
          f"{fn}: x1_scale should be a float32 tensor of shape [{b}, {m}], got "
          f"{None if x1_scale is None else (x1_scale.dtype, list(x1_scale.shape))}.")
    check(x2_scale is not None and x2_scale.dtype == torch.bfloat16 and list(x2_scale.shape) == [n],
          f"{fn}: x2_scale should be a bfloat16 tensor of shape [{n}], got "
          f"{None if x2_scale is None else (x2_scale.dtype, list(x2_scale.shape))}.")
    y = _mm64(x1, x2).float() * x1_scale.unsqueeze(-1) * x2_scale.float()
    return y.sum(0).to(torch.bfloat16)


# ------------------------------------------------------------------ npu_dual_level_quant_matmul


def npu_dual_level_quant_matmul(x1, x2, x1_level0_scale, x2_level0_scale, x1_level1_scale, x2_level1_scale,
                                bias=None, output_dtype=15):
    fn = "npu_dual_level_quant_matmul"
    out_dtype = _out_float_dtype(fn, "output_dtype", output_dtype)
    check(x1.dim() == 2 and x2.dim() == 2, f"{fn}: x1 (m, k / 2) and x2 (n, k / 2) should be 2-D, got shapes "
          f"{list(x1.shape)} and {list(x2.shape)}.")
    for name, t in (("x1", x1), ("x2", x2)):
        check(t.dtype in (torch.uint8, torch.int8), f"{fn}: {name} should hold packed float4_e2m1 (uint8 / int8), "
              f"got {t.dtype}.")
    check(x1.shape[1] == x2.shape[1], f"{fn}: the k of x1 ({2 * x1.shape[1]}) and x2 ({2 * x2.shape[1]}) should be "
          "equal.")
    m, n, k = x1.shape[0], x2.shape[0], 2 * x1.shape[1]
    g0, pairs = -(-k // 512), -(-k // 64)
    check(x1_level0_scale.dtype == torch.float32 and list(x1_level0_scale.shape) == [m, g0],
          f"{fn}: x1_level0_scale should be float32 of shape [{m}, {g0}] (m, ceil(k / 512)), got "
          f"{x1_level0_scale.dtype} of shape {list(x1_level0_scale.shape)}.")
    check(x2_level0_scale.dtype == torch.float32 and list(x2_level0_scale.shape) == [g0, n],
          f"{fn}: x2_level0_scale should be float32 of shape [{g0}, {n}] (ceil(k / 512), n), got "
          f"{x2_level0_scale.dtype} of shape {list(x2_level0_scale.shape)}.")
    s1 = _e8m0(fn, "x1_level1_scale", x1_level1_scale, _D.float8_e8m0fnu)
    s2 = _e8m0(fn, "x2_level1_scale", x2_level1_scale, _D.float8_e8m0fnu)
    check(list(s1.shape) == [m, pairs, 2], f"{fn}: x1_level1_scale should have shape [{m}, {pairs}, 2], got "
          f"{list(x1_level1_scale.shape)}.")
    check(list(s2.shape) == [n, pairs, 2], f"{fn}: x2_level1_scale should have shape [{n}, {pairs}, 2], got "
          f"{list(x2_level1_scale.shape)}.")
    if bias is not None:
        check(bias.dtype == torch.float32 and list(bias.shape) == [n], f"{fn}: bias should be float32 of shape "
              f"[{n}], got {bias.dtype} of shape {list(bias.shape)}.")
    a = _fp4_values(x1) * _expand_blocks(s1.flatten(1), k, 1)
    b = _fp4_values(x2) * _expand_blocks(s2.flatten(1), k, 1)
    y = torch.zeros(m, n, dtype=torch.float32, device=x1.device)
    for g in range(g0):
        part = _mm64(a[:, g * 512:(g + 1) * 512], b[:, g * 512:(g + 1) * 512].t()).float()
        y = y + part * x1_level0_scale[:, g:g + 1] * x2_level0_scale[g:g + 1, :]
    if bias is not None:
        y = y + bias
    return y.to(out_dtype)


# ------------------------------------------------------------------ npu_dequant_bias


def npu_dequant_bias(x, weight_scale, activation_scale, bias, output_dtype=None):
    fn = "npu_dequant_bias"
    out_dtype = torch.float16 if output_dtype is None else output_dtype
    check(out_dtype in _HALVES, f"{fn}: output_dtype should be torch.float16 or torch.bfloat16, got {out_dtype}.")
    check(x.dim() == 2 and x.dtype == torch.int32, f"{fn}: x should be a 2-D int32 tensor (M, N), got {x.dtype} of "
          f"shape {list(x.shape)}.")
    m, n = x.shape
    check(weight_scale.dtype in (torch.float32, torch.bfloat16) and list(weight_scale.shape) == [n],
          f"{fn}: weight_scale should be float32 or bfloat16 of shape [{n}], got {weight_scale.dtype} of shape "
          f"{list(weight_scale.shape)}.")
    want = torch.float16 if weight_scale.dtype == torch.float32 else torch.bfloat16
    check(out_dtype == want, f"{fn}: output_dtype should be {want} for a {weight_scale.dtype} weight_scale, got "
          f"{out_dtype}.")
    if activation_scale is not None:
        check(activation_scale.dtype == torch.float32 and list(activation_scale.shape) == [m],
              f"{fn}: activation_scale should be float32 of shape [{m}], got {activation_scale.dtype} of shape "
              f"{list(activation_scale.shape)}.")
    acc = x
    if bias is not None:
        check(bias.dtype in (torch.int32, torch.float32, torch.bfloat16, torch.float16) and list(bias.shape) == [n],
              f"{fn}: bias should be int32, float32, bfloat16 or float16 of shape [{n}], got {bias.dtype} of shape "
              f"{list(bias.shape)}.")
        if bias.dtype == torch.int32:
            acc = acc + bias  # int32, before the scales
    y = acc.float() * weight_scale.float()
    if activation_scale is not None:
        y = y * activation_scale.unsqueeze(1)
    if bias is not None and bias.dtype != torch.int32:
        y = y + bias.float()
    return y.to(out_dtype)


# ------------------------------------------------------------------ npu_weight_quant_preprocess


def _is_transposed(t, first):
    return t.stride(first + 1) == t.stride(first) * t.size(first)


def _same_layout_copy(t):
    return torch.empty_like(t).copy_(t)


def npu_weight_quant_preprocess(weight, weight_scale, x_dtype, weight_dtype, weight_scale_dtype, weight_offset=None,
                                bias=None, x_scale_dtype=None, k_group_size=0):
    fn = "npu_weight_quant_preprocess"
    flow = (_dtype_name(x_dtype), _dtype_name(weight_dtype), _dtype_name(x_scale_dtype),
            _dtype_name(weight_scale_dtype))
    check(flow == ("float8_e4m3fn", "float4_e2m1fn_x2", "float8_e8m0fnu", "float8_e8m0fnu"),
          f"{fn}: unsupported data flow combination (x_dtype, weight_dtype, x_scale_dtype, weight_scale_dtype) = "
          f"{flow}; the operator supports the MX A8W4 flow (float8_e4m3fn, float4_e2m1fn_x2, float8_e8m0fnu, "
          "float8_e8m0fnu).")
    check(weight.dim() in (2, 3), f"{fn}: weight should be 2-D (k, n) or 3-D (g, k, n), got shape "
          f"{list(weight.shape)}.")
    gmm = weight.dim() == 3
    check(weight_scale.dim() == weight.dim() + 1, f"{fn}: weight_scale should be {weight.dim() + 1}-D, got "
          f"{weight_scale.dim()}-D.")
    check(weight.dtype in (torch.uint8, torch.int8), f"{fn}: weight should hold packed float4 (uint8 / int8), got "
          f"{weight.dtype}.")
    first = 1 if gmm else 0
    check(_is_transposed(weight, first), f"{fn}: weight should be transposed (a (.., n, k) tensor seen as (.., k, n)), "
          "please check input.")
    check(_is_transposed(weight_scale, first), f"{fn}: weight_scale should be transposed, please check input.")
    check(k_group_size in (None, 0, 32), f"{fn}: k_group_size should be 32 (the MX block; 0 for the default), got "
          f"{k_group_size}.")
    # vNPU keeps tensors ND: the FRACTAL_NZ_C0_16 repacking changes no logical value.
    return (_same_layout_copy(weight), _same_layout_copy(weight_scale),
            weight.new_empty(0) if weight_offset is None else _same_layout_copy(weight_offset),
            weight.new_empty(0) if bias is None else _same_layout_copy(bias))


# ------------------------------------------------------------------ npu_batch_gather_matmul (AddLora)


def _add_lora_delta(fn, y, x, weight_b, indices, weight_a, layer_idx, scale, y_offset, y_slice_size):
    check(y.dim() == 2 and x.dim() == 2, f"{fn}: Input y and x should be 2D tensor, got shapes {list(y.shape)} and "
          f"{list(x.shape)}.")
    check(weight_b.dim() == 4, f"{fn}: Input weight_b should be 4D tensor (W, L, H2, R), got shape "
          f"{list(weight_b.shape)}.")
    check(indices.dim() == 1 and indices.shape[0] == y.shape[0], f"{fn}: Input indices tensor should be the same "
          f"size as the y shape 0 ({y.shape[0]}), got shape {list(indices.shape)}.")
    check(indices.dtype in (torch.int32, torch.int64), f"{fn}: indices should be int32, got {indices.dtype}.")
    check(y.dtype == torch.float16 and x.dtype == torch.float16 and weight_b.dtype == torch.float16 and
          (weight_a is None or weight_a.dtype == torch.float16),
          f"{fn}: y, x, weight_b and weight_a should be float16, got {y.dtype}, {x.dtype}, {weight_b.dtype} and "
          f"{None if weight_a is None else weight_a.dtype}.")
    check(x.shape[0] == y.shape[0], f"{fn}: x and y should have the same batch size, got {x.shape[0]} and "
          f"{y.shape[0]}.")
    loras, layers, h2, rank = weight_b.shape
    size = y.shape[1] if y_slice_size == -1 else y_slice_size
    check(0 <= layer_idx < layers, f"{fn}: layer_idx should be in [0, {layers}), got {layer_idx}.")
    check(y_offset >= 0 and size > 0 and y_offset + size <= y.shape[1], f"{fn}: y_offset {y_offset} + y_slice_size "
          f"{size} should lie within y's {y.shape[1]} columns.")
    check(h2 == size, f"{fn}: weight_b's H2 ({h2}) should equal y_slice_size ({size}).")
    if weight_a is not None:
        check(weight_a.dim() == 4 and list(weight_a.shape) == [loras, layers, rank, x.shape[1]],
              f"{fn}: weight_a should have shape [{loras}, {layers}, {rank}, {x.shape[1]}] (W, L, R, H1), got "
              f"{list(weight_a.shape)}.")
    else:
        check(x.shape[1] == rank, f"{fn}: without weight_a, x's width ({x.shape[1]}) should be the rank R ({rank}).")
    valid = (indices >= 0) & (indices < loras)  # an index out of range (e.g. -1) selects no LoRA: zero update
    idx = torch.where(valid, indices, torch.zeros_like(indices)).long()
    z = x
    if weight_a is not None:
        wa = weight_a[:, layer_idx].index_select(0, idx)  # (B, R, H1)
        z = torch.bmm(wa.float(), x.float().unsqueeze(-1)).squeeze(-1).to(torch.float16)
    wb = weight_b[:, layer_idx].index_select(0, idx)  # (B, H2, R)
    z2 = torch.bmm(wb.float(), z.float().unsqueeze(-1)).squeeze(-1).to(torch.float16)
    z2 = z2 * scale
    return torch.where(valid.unsqueeze(1), z2, torch.zeros_like(z2)), y_offset, size


def npu_batch_gather_matmul(self, x, weight_b, indices, weight_a=None, layer_idx=0, scale=1e-3, y_offset=0,
                            y_slice_size=-1):
    delta, off, size = _add_lora_delta("npu_batch_gather_matmul", self, x, weight_b, indices, weight_a, layer_idx,
                                       scale, y_offset, y_slice_size)
    return torch.cat([self[:, :off], self[:, off:off + size] + delta, self[:, off + size:]], dim=1)


def npu_batch_gather_matmul_(self, x, weight_b, indices, weight_a=None, layer_idx=0, scale=1e-3, y_offset=0,
                             y_slice_size=-1):
    delta, off, size = _add_lora_delta("npu_batch_gather_matmul_", self, x, weight_b, indices, weight_a, layer_idx,
                                       scale, y_offset, y_slice_size)
    self.narrow(1, off, size).add_(delta)
    return self


# ------------------------------------------------------------------ npu_fused_matmul

_FUSED_TYPES = ("", "16cast32", "add", "mul", "gelu_erf", "gelu_tanh", "relu")


def npu_fused_matmul(x1, x2, bias=None, x3=None, fused_op_type=""):
    fn = "npu_fused_matmul"
    op = fused_op_type
    check(op in _FUSED_TYPES, f"{fn}: fused_op_type should be one of {list(_FUSED_TYPES)}, got '{op}'.")
    check(x1.dtype in _FLOATS and x2.dtype == x1.dtype, f"{fn}: x1 and x2 should have the same dtype, float16, "
          f"bfloat16 or float32, got {x1.dtype} and {x2.dtype}.")
    dims = (2, 6) if op in ("", "relu") else (2, 3) if op in ("add", "mul") else (2, 2)
    for name, t in (("x1", x1), ("x2", x2)):
        check(dims[0] <= t.dim() <= dims[1], f"{fn}: {name} should have {dims[0]} to {dims[1]} dimensions for "
              f"fused_op_type '{op}', got {t.dim()}.")
    check(x1.shape[-1] == x2.shape[-2], f"{fn}: the k of x1 ({x1.shape[-1]}) and x2 ({x2.shape[-2]}) should be equal.")
    batch = _broadcast_batch(fn, x1.shape[:-2], x2.shape[:-2])
    out_shape = batch + [x1.shape[-2], x2.shape[-1]]
    if op == "16cast32":
        check(x1.dtype in _HALVES, f"{fn}: fused_op_type '16cast32' takes float16 or bfloat16 inputs, got {x1.dtype}.")
    if op in ("gelu_erf", "gelu_tanh"):
        check(bias is None, f"{fn}: there is no bias for {op}; pass None.")
        check(x3 is None, f"{fn}: there is no x3 for {op}; pass None.")
    if bias is not None:
        check(bias.dtype in _FLOATS and 1 <= bias.dim() <= 2 and bias.shape[-1] == out_shape[-1],
              f"{fn}: bias should be a 1-D or 2-D float tensor whose last dimension is n = {out_shape[-1]}, got "
              f"{bias.dtype} of shape {list(bias.shape)}.")
    if op in ("add", "mul"):
        check(x3 is not None, f"{fn}: there must be x3 for {op}.")
        check(x3.dtype == x1.dtype, f"{fn}: x3 should have x1's dtype {x1.dtype}, got {x3.dtype}.")
        ok = x3.dim() in (2, 3) and list(x3.shape[-2:]) == out_shape[-2:] and \
            (x3.dim() == 2 or (len(out_shape) == 3 and x3.shape[0] in (1, out_shape[0])))
        check(ok, f"{fn}: x3 should be 2-D or 3-D with its last two dimensions {out_shape[-2:]} (and a batch of 1 or "
              f"{out_shape[0] if len(out_shape) == 3 else 'y'}), got {list(x3.shape)}.")
    y = torch.matmul(x1.float(), x2.float())
    if bias is not None:
        y = y + bias.float()
    if op == "add":
        y = y + x3.float()
    elif op == "mul":
        y = y * x3.float()
    elif op == "gelu_erf":
        y = F.gelu(y)
    elif op == "gelu_tanh":
        y = F.gelu(y, approximate="tanh")
    elif op == "relu":
        y = F.relu(y)
    return y if op == "16cast32" else y.to(x1.dtype)


# ------------------------------------------------------------------ npu_quant_conv2d


def npu_quant_conv2d(input, weight, scale, strides=(1, 1), pads=(0, 0), dilations=(1, 1), groups=1, offset_x=0,
                     round_mode="rint", output_dtype=None, bias=None, offset=None, input_dtype=None,
                     weight_dtype=None):
    fn = "npu_quant_conv2d"
    check((input_dtype is None) == (weight_dtype is None), f"{fn}: input_dtype and weight_dtype are only supported "
          "both None or both not None.")
    hif8_in = input_dtype is not None
    check(not hif8_in or (_is_hif8(input_dtype) and _is_hif8(weight_dtype)), f"{fn}: input_dtype / weight_dtype "
          f"only support torch_npu.hifloat8, got {_dtype_name(input_dtype)} and {_dtype_name(weight_dtype)}.")
    check(offset is None, f"{fn}: offset must be None.")
    check(output_dtype is not None, f"{fn}: output_dtype can not be None.")
    hif8_out = _is_hif8(output_dtype)
    check(round_mode == "rint" or (hif8_out and round_mode == "round"), f"{fn}: round_mode should be 'rint' "
          f"('round' is for hifloat8 output only), got '{round_mode}'.")
    check(input.dim() == 4 and weight.dim() == 4, f"{fn}: input and weight should be 4-D (NCHW), got {input.dim()} "
          f"and {weight.dim()} dimensions.")
    strides, pads, dilations = [int(v) for v in strides], [int(v) for v in pads], [int(v) for v in dilations]
    check(len(strides) == 2 and len(pads) == 2 and len(dilations) == 2, f"{fn}: strides, pads and dilations should "
          f"have 2 elements, got {strides}, {pads} and {dilations}.")
    check(min(strides) > 0 and min(dilations) > 0 and min(pads) >= 0, f"{fn}: strides and dilations should be "
          f"positive and pads non-negative, got {strides}, {dilations} and {pads}.")
    check(groups >= 1, f"{fn}: groups should be at least 1, got {groups}.")
    check(-128 <= offset_x <= 127, f"{fn}: offset_x should be in [-128, 127], got {offset_x}.")
    cout = weight.shape[0]
    check(input.shape[1] == weight.shape[1] * groups and cout % groups == 0,
          f"{fn}: input's channels ({input.shape[1]}) should equal weight's ({weight.shape[1]}) times groups "
          f"({groups}), and cout ({cout}) should be a multiple of groups.")
    check(scale.dim() == 1 and scale.shape[0] == cout and scale.dtype in (torch.int64, torch.uint64, torch.float32),
          f"{fn}: scale should be an int64 (npu_trans_quant_param) or float32 tensor of shape [{cout}], got "
          f"{scale.dtype} of shape {list(scale.shape)}.")
    kind = _dtype_name(output_dtype)
    if hif8_in:
        check(input.dtype in (torch.uint8, torch.int8) and weight.dtype in (torch.uint8, torch.int8),
              f"{fn}: input and weight should be uint8 / int8 bytes (HiFloat8 codes) with input_dtype / weight_dtype "
              f"torch_npu.hifloat8, got {input.dtype} and {weight.dtype}.")
        check(kind in ("float16", "bfloat16", "float32", "hifloat8"), f"{fn}: output_dtype should be torch.float16, "
              f"torch.bfloat16, torch.float32 or torch_npu.hifloat8, got {kind}.")
        bias_dtype = torch.float32
    elif input.dtype == torch.int8:
        check(not hif8_out, f"{fn}: output_dtype torch_npu.hifloat8 needs hifloat8 input and weight.")
        check(weight.dtype == torch.int8, f"{fn}: weight should be int8 like input, got {weight.dtype}.")
        check(kind == "float16", f"{fn}: output_dtype should be torch.float16 when input is int8, got {kind}.")
        bias_dtype = torch.int32
    else:
        check(input.dtype == torch.float8_e4m3fn and weight.dtype == torch.float8_e4m3fn,
              f"{fn}: input and weight should both be int8 or both float8_e4m3fn, got {input.dtype} and "
              f"{weight.dtype}.")
        check(kind in ("float16", "bfloat16", "float32"), f"{fn}: output_dtype should be torch.float16, "
              f"torch.bfloat16 or torch.float32 when input is float8_e4m3fn, got {kind}.")
        bias_dtype = torch.float32
    if bias is not None:
        check(bias.dtype == bias_dtype and list(bias.shape) == [cout], f"{fn}: bias should be {bias_dtype} of shape "
              f"[{cout}], got {bias.dtype} of shape {list(bias.shape)}.")
    ph, pw = pads
    xv, wv = (_hifloat8.decode(input).double(), _hifloat8.decode(weight).double()) if hif8_in else \
        (input.double(), weight.double())
    xf = F.pad(xv, (pw, pw, ph, ph), value=float(offset_x))  # pads hold offset_x
    acc = F.conv2d(xf, wv, None, strides, 0, dilations, groups)
    check(acc.shape[-1] > 0 and acc.shape[-2] > 0, f"{fn}: ho, wo should be positive, got {list(acc.shape[-2:])}.")
    sv = scale if scale.dtype == torch.float32 else _scale_value(scale.view(torch.int64))
    y = acc.float() * sv.view(1, -1, 1, 1)
    if bias is not None:
        y = y + bias.float().view(1, -1, 1, 1)
    return _hifloat8.encode(y) if hif8_out else y.to(_TORCH[kind])


# ------------------------------------------------------------------ schemas

_ADD_QMM = ("Tensor x1, Tensor x2, Tensor x2_scale, *, Tensor? x1_scale=None, int[]? group_sizes=None, "
            "int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None")
_ADD_QGMM = ("Tensor x1, Tensor x2, Tensor x2_scale, Tensor group_list, *, Tensor? x1_scale=None, "
             "int? group_list_type=0, int[]? group_sizes=None, int? x1_dtype=None, int? x2_dtype=None, "
             "int? x1_scale_dtype=None, int? x2_scale_dtype=None")
_GMM_ADD = ("Tensor x, Tensor weight, Tensor group_list, *, bool transpose_x=True, bool transpose_weight=False, "
            "int group_type=2, int? group_list_type=0")
_LORA = ("Tensor x, Tensor weight_b, Tensor indices, Tensor? weight_a=None, int layer_idx=0, float scale=1e-3, "
         "int y_offset=0, int y_slice_size=-1")
_QMM_DEQ = ("Tensor? bias=None, Tensor? x_scale=None, Tensor? x_offset=None, Tensor? smooth_scale=None, "
            "str? quant_mode='pertoken'")

define(f"npu_add_quant_gmm_(Tensor(a!) self, {_ADD_QGMM}) -> Tensor(a!)", npu_add_quant_gmm_)
define(f"npu_add_quant_gmm(Tensor self, {_ADD_QGMM}) -> Tensor", npu_add_quant_gmm)
define(f"npu_add_quant_matmul_(Tensor(a!) self, {_ADD_QMM}) -> Tensor(a!)", npu_add_quant_matmul_)
define(f"npu_add_quant_matmul(Tensor self, {_ADD_QMM}) -> Tensor", npu_add_quant_matmul)
define(f"npu_quant_grouped_matmul_dequant(Tensor x, Tensor quantized_weight, Tensor weight_scale, Tensor group_list, "
       f"*, {_QMM_DEQ}) -> Tensor", npu_quant_grouped_matmul_dequant)
define("npu_transpose_quant_batchmatmul(Tensor x1, Tensor x2, int dtype, *, Tensor? bias=None, Tensor? x1_scale=None, "
       "Tensor? x2_scale=None, int[]? group_sizes=None, int[]? perm_x1=None, int[]? perm_x2=None, "
       "int[]? perm_y=None, int? batch_split_factor=1, int? x1_dtype=None, int? x2_dtype=None) -> Tensor",
       npu_transpose_quant_batchmatmul)
define("npu_matmul_compress_dequant(Tensor x1, Tensor x2, Tensor compress_index, Tensor bias, Tensor scale, *, "
       "Tensor? offsetW=None, int? offsetX=None) -> Tensor", npu_matmul_compress_dequant)
define("npu_grouped_matmul_swiglu_quant(Tensor x, Tensor weight, Tensor group_list, Tensor weight_scale, "
       "Tensor x_scale, *, Tensor? bias=None, Tensor? offset=None) -> (Tensor, Tensor, Tensor)",
       npu_grouped_matmul_swiglu_quant)
define("npu_grouped_matmul_swiglu_quant_v2(Tensor x, Tensor[] weight, Tensor[] weight_scale, Tensor x_scale, "
       "Tensor group_list, *, Tensor? smooth_scale=None, Tensor[]? weight_assist_matrix=None, Tensor? bias=None, "
       "int? dequant_mode=0, int? dequant_dtype=0, int? quant_mode=0, int? quant_dtype=1, int? group_list_type=0, "
       "int[]? tuning_config=None, int? x_dtype=None, int? weight_dtype=None, int? weight_scale_dtype=None, "
       "int? x_scale_dtype=None) -> (Tensor, Tensor)", npu_grouped_matmul_swiglu_quant_v2)
define(f"npu_grouped_matmul_add(Tensor self, {_GMM_ADD}) -> Tensor", npu_grouped_matmul_add)
define(f"npu_grouped_matmul_add_(Tensor(a!) self, {_GMM_ADD}) -> Tensor(a!)", npu_grouped_matmul_add_)
define(f"npu_quant_matmul_dequant(Tensor x, Tensor quantized_weight, Tensor weight_scale, *, {_QMM_DEQ}) -> Tensor",
       npu_quant_matmul_dequant)
define("npu_quant_matmul_gelu(Tensor x1, Tensor x2, Tensor x1_scale, Tensor x2_scale, *, Tensor? bias=None, "
       "str? approximate='gelu_erf') -> Tensor", npu_quant_matmul_gelu)
define("npu_quant_matmul_reduce_sum(Tensor x1, Tensor x2, *, Tensor? x1_scale=None, Tensor? x2_scale=None) -> Tensor",
       npu_quant_matmul_reduce_sum)
define("npu_dual_level_quant_matmul(Tensor x1, Tensor x2, Tensor x1_level0_scale, Tensor x2_level0_scale, "
       "Tensor x1_level1_scale, Tensor x2_level1_scale, *, Tensor? bias=None, int output_dtype=15) -> Tensor",
       npu_dual_level_quant_matmul)
define("npu_dequant_bias(Tensor x, Tensor weight_scale, Tensor? activation_scale, Tensor? bias, *, "
       "ScalarType? output_dtype=None) -> Tensor", npu_dequant_bias)
define("npu_weight_quant_preprocess(Tensor weight, Tensor weight_scale, int x_dtype, int weight_dtype, "
       "int weight_scale_dtype, Tensor? weight_offset=None, Tensor? bias=None, int? x_scale_dtype=None, "
       "int? k_group_size=0) -> (Tensor, Tensor, Tensor, Tensor)", npu_weight_quant_preprocess)
define(f"npu_batch_gather_matmul(Tensor self, {_LORA}) -> Tensor", npu_batch_gather_matmul)
define(f"npu_batch_gather_matmul_(Tensor(a!) self, {_LORA}) -> Tensor(a!)", npu_batch_gather_matmul_)
define("npu_fused_matmul(Tensor x1, Tensor x2, *, Tensor? bias=None, Tensor? x3=None, str fused_op_type='') -> Tensor",
       npu_fused_matmul)
define("npu_quant_conv2d(Tensor input, Tensor weight, Tensor scale, int[2] strides=1, int[2] pads=0, "
       "int[2] dilations=1, int groups=1, int offset_x=0, str round_mode='rint', int? output_dtype=None, "
       "Tensor? bias=None, Tensor? offset=None, int? input_dtype=None, int? weight_dtype=None) -> Tensor",
       npu_quant_conv2d)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
