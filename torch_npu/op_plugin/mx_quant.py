"""MX (microscaling) quantisers: npu_dynamic_mx_quant, npu_dynamic_mx_quant_with_dual_axis,
npu_grouped_dynamic_mx_quant, npu_dynamic_block_mx_quant and npu_dynamic_dual_level_mx_quant
(op-plugin's DynamicMxQuant family, run by CANN's quant/*mx_quant kernels), the MXFP8 / MXFP4
quantisers of MindSpeed's training and vllm-ascend's inference.

Each splits the input into blocks (32 elements along an axis by default, or 32 x 32 tiles),
gives every block one power-of-two scale stored as an E8M0 byte (value 2^(byte - 127);
255 is NaN) and stores ``x / scale`` in the element type ``dst_type``:

    torch.float8_e4m3fn / torch_npu.float8_e4m3fn   (emax 8,  max 448)
    torch.float8_e5m2   / torch_npu.float8_e5m2     (emax 15, max 57344)
    torch_npu.float4_e2m1fn_x2                       (emax 2,  max 6)
    torch_npu.float4_e1m2fn_x2                       (emax 0,  max 1.75)

FP8 results are float8 tensors; FP4 results are uint8 tensors holding two elements per
byte along the last dimension (element 2i in the low nibble, 2i + 1 in the high one), so
that dimension halves. Scales come back as uint8 bytes, as from the real op (view them as
torch.float8_e8m0fnu to read the values).

The scale of a block with largest magnitude ``amax`` (``scale_alg``):

- 0 (OCP MX): byte = 127 + floor(log2(amax)) - emax, at least 0. A block whose byte
  is 0 (an all-zero block, or amax below 2^(emax - 126)) quantises to (signed) zeros,
  as the kernel multiplies by a zero reciprocal there.
- 1 (cuBLAS style, FP8 only): S = max(amax, max_low_bound) * (1 / dst max), in float32;
  the byte is S's biased exponent, plus one when S has a non-zero mantissa (a
  subnormal S: a mantissa above one half), i.e. the smallest power of two >= S.
  An all-zero block has byte 0.
- 2 ("dynamic dtype range", FP4 only): with dst_type_max 0 / 6 / 7 (float4_e2m1) or
  1.875 (float4_e1m2, grouped op) the OCP exponent, raised by one when amax's
  bfloat16 mantissa exceeds dst_max's (amax of a float16 input rounded to bfloat16
  first, of a float32 one truncated); with any other dst_type_max the cuBLAS rule
  with that maximum (no subnormal case).

A block holding an inf or NaN gets byte 255 and its elements quantise to +0 (the NPU
casts NaN to +0). Elements are ``x * 2^(127 - byte)`` rounded to the element type
with ``round_mode`` ("rint": to nearest, ties to even; "round": ties away from zero;
"floor": toward -inf; FP8 allows only "rint"), saturating at its largest finite value;
a negative value that rounds to zero keeps its sign.

Scale layout: per axis the block count is padded to even (pad byte 0) and each pair of
consecutive blocks becomes a trailing dimension of 2: scales along axis ``a`` of an
input of shape S have shape S with S[a] -> ceil(ceil(S[a] / block) / 2), plus a last
dimension of 2 (for a non-last axis, the two blocks are interleaved that way).

- npu_dynamic_mx_quant: blocks of ``block_size`` (a multiple of 32 up to 1024) along
  ``axis``; float16, bfloat16 or float32 (block_size 32) input.
- npu_dynamic_mx_quant_with_dual_axis: that, with 32-blocks, along -1 (y1, mxscale1)
  and along -2 (y2, mxscale2).
- npu_dynamic_block_mx_quant: one scale per 32 x 32 tile of the last two dimensions,
  given twice: scale1 per row (tile column pairs, as along -1) and scale2 per column
  (tile row pairs, as along -2).
- npu_grouped_dynamic_mx_quant: x of shape (m, n) split along rows by ``group_index``
  (the groups' cumulative end rows, the last equal to m); 32-row blocks restart at each
  group, and group g's scale pairs start at pair row ``start_g // 64 + g`` of an
  (m // 64 + groups, n, 2) tensor. Pair rows no group writes hold byte 127 (1.0), as in
  the kernel's reference.
- npu_dynamic_dual_level_mx_quant: float4_e2m1 along the last dimension in two levels:
  a float32 scale per 512 elements, amax / 6 (inf / NaN ignored; 0 when subnormal),
  divides the input (rounded back to its dtype; zeros stay), then the OCP MX step with
  32-blocks. smooth_scale is not supported (nor is it by the real op's documentation).

Nothing reads tensor values back to the host except the argument check of
group_index's values on concrete tensors, so the ops trace under FakeTensor /
torch.compile.
"""

import collections

import torch

from torch_npu import _dtypes
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define

_Elem = collections.namedtuple("_Elem", "name dtype emax max")
_E4M3 = _Elem("float8_e4m3fn", torch.float8_e4m3fn, 8, 448.0)
_E5M2 = _Elem("float8_e5m2", torch.float8_e5m2, 15, 57344.0)
_E2M1 = _Elem("float4_e2m1fn_x2", None, 2, 6.0)
_E1M2 = _Elem("float4_e1m2fn_x2", None, 0, 1.75)

# dst_type numbers: torch's ScalarType numbers and torch_npu's constants.
_DST = {
    23: _E5M2, _dtypes.DType.float8_e5m2: _E5M2,
    24: _E4M3, _dtypes.DType.float8_e4m3fn: _E4M3,
    _dtypes.DType.float4_e2m1fn_x2: _E2M1,
    _dtypes.DType.float4_e1m2fn_x2: _E1M2,
}
_DST_NAMES = ("torch.float8_e5m2, torch.float8_e4m3fn (or torch_npu's float8 constants), "
              "torch_npu.float4_e2m1fn_x2 or torch_npu.float4_e1m2fn_x2")
_ROUND_MODES = ("rint", "round", "floor")
_HALVES = (torch.float16, torch.bfloat16)
_E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


# ------------------------------------------------------------------ argument checks


def _dst(fn, dst_type):
    check(dst_type in _DST, f"{fn}: dst_type {_dtypes.NAMES.get(dst_type, dst_type)} is not supported; expected "
                            f"{_DST_NAMES}.")
    return _DST[dst_type]


def _is_fp8(elem):
    return elem.dtype is not None


def _check_round_mode(fn, round_mode, elem):
    check(round_mode in _ROUND_MODES, f"{fn}: round_mode should be 'rint', 'round' or 'floor', got {round_mode!r}.")
    check(not _is_fp8(elem) or round_mode == "rint",
          f"{fn}: round_mode should be 'rint' for dst_type {elem.name}, got {round_mode!r}.")


def _check_scale_alg(fn, scale_alg, elem, allowed=(0, 1, 2)):
    scale_alg = 0 if scale_alg is None else scale_alg
    check(scale_alg in allowed, f"{fn}: scale_alg should be one of {list(allowed)}, got {scale_alg}.")
    check(scale_alg != 1 or _is_fp8(elem), f"{fn}: scale_alg=1 is only for float8 dst_type, got {elem.name}.")
    check(scale_alg != 2 or not _is_fp8(elem), f"{fn}: scale_alg=2 is only for float4 dst_type, got {elem.name}.")
    return scale_alg


def _check_dtype(fn, name, t, dtypes):
    check(t.dtype in dtypes, f"{fn}: {name} should be {' or '.join(str(d) for d in dtypes)}, got {t.dtype}.")


def _check_even_last(fn, name, t, elem):
    check(_is_fp8(elem) or (t.dim() >= 1 and t.shape[-1] % 2 == 0),
          f"{fn}: the last dimension of {name} should be even for dst_type {elem.name} (two elements a byte), "
          f"got shape {list(t.shape)}.")


def _e2m1_dst_type_max(fn, dst_type_max):
    check(dst_type_max == 0 or 6 <= dst_type_max <= 12,
          f"{fn}: dst_type_max should be 0 or within [6, 12], got {dst_type_max}.")


# ------------------------------------------------------------------ scales


def _bits(t):
    """float32 -> its int32 bit pattern."""
    return t.contiguous().view(torch.int32)


def _from_bits(b):
    return b.to(torch.int32).contiguous().view(torch.float32)


def _recip_of(byte):
    """2^(127 - byte) in float32 for bytes 0..254 (254 gives the subnormal 2^-127)."""
    normal = (254 - byte.clamp(max=253)) << 23
    return _from_bits(torch.where(byte >= 254, torch.full_like(normal, 0x00400000), normal))


def _finish_scale(byte, recip, bad):
    """Bytes 255 and a NaN reciprocal where ``bad`` (an inf / NaN block)."""
    byte = torch.where(bad, torch.full_like(byte, 255), byte)
    recip = torch.where(bad, torch.full_like(recip, float("nan")), recip)
    return byte, recip


def _ocp(amax, elem):
    e = (_bits(amax) >> 23) & 0xFF
    byte = (e - elem.emax).clamp(min=0)
    recip = torch.where(byte == 0, torch.zeros_like(amax), _recip_of(byte))
    return _finish_scale(byte, recip, e == 255)


def _cublas(amax, inv_max, max_low_bound, subnormal):
    a = amax
    if max_low_bound:
        a = torch.maximum(a, torch.tensor(max_low_bound, dtype=torch.float32, device=a.device))
    s = a * torch.tensor(inv_max, dtype=torch.float32, device=a.device)  # float32 product, as the kernel
    bits = _bits(s)
    e = (bits >> 23) & 0xFF
    m = bits & 0x7FFFFF
    up = (e > 0) & (e < 254) & (m > 0)
    if subnormal:
        up = up | ((e == 0) & (m > 0x400000))
    byte = (e + up.to(e.dtype)).clamp(max=254)
    zero = amax == 0
    byte = torch.where(zero, torch.zeros_like(byte), byte)
    recip = torch.where(zero, torch.zeros_like(amax), _recip_of(byte))
    return _finish_scale(byte, recip, ~(amax < float("inf")))


def _range(amax, src_dtype, elem, add):
    if src_dtype == torch.float32:
        h = (_bits(amax) >> 16) & 0x7FFF  # truncated to bfloat16
    else:
        h = amax.to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0x7FFF  # float16: rounded to nearest even
    e = (h >> 7) & 0xFF
    e_up = ((h + add) >> 7) & 0xFF
    byte = e_up - elem.emax
    small = (e < elem.emax) | (e == 0)
    byte = torch.where(small, torch.zeros_like(byte), byte)
    recip = torch.where(byte == 0, torch.zeros_like(amax), _recip_of(byte))
    return _finish_scale(byte, recip, e == 255)


def _scaler(src_dtype, elem, scale_alg, dst_type_max=0.0, max_low_bound=0.0):
    """amax (float32, per block) -> (byte int32, reciprocal scale float32)."""
    if scale_alg == 0:
        return lambda amax: _ocp(amax, elem)
    if scale_alg == 1:
        inv = 1.0 / (dst_type_max or elem.max)
        return lambda amax: _cublas(amax, inv, max_low_bound, subnormal=True)
    add = None
    if elem is _E2M1 and dst_type_max in (0.0, 6.0):
        add = 0x3F
    elif elem is _E2M1 and dst_type_max == 7.0:
        add = 0x1F
    elif elem is _E1M2 and dst_type_max == 1.875:
        add = 0x0F
    if add is not None:
        return lambda amax: _range(amax, src_dtype, elem, add)
    inv = 1.0 / (dst_type_max or elem.max)
    return lambda amax: _cublas(amax, inv, 0.0, subnormal=False)


# ------------------------------------------------------------------ elements


def _quantise(xf, recip, elem, round_mode):
    """float32 ``xf * recip`` in the element type: a float8 tensor, or int32 FP4 codes."""
    v = xf * recip
    v = torch.where(torch.isnan(v), torch.zeros_like(v), v)  # NaN -> +0
    if _is_fp8(elem):
        return v.clamp(-elem.max, elem.max).to(elem.dtype)
    a = v.abs()
    if elem is _E2M1:
        # Step between neighbours: 2^(exponent - 1), 0.5 below 1.
        e = ((_bits(a) >> 23) & 0xFF) - 127
        q = _from_bits((e.clamp(min=0) + 126) << 23)
    else:
        q = torch.full_like(a, 0.25)
    t = a / q
    negative = torch.signbit(v)
    if round_mode == "rint":
        r = torch.round(t)
    elif round_mode == "round":
        r = torch.floor(t + 0.5)
    else:
        r = torch.where(negative, torch.ceil(t), torch.floor(t))
    mag = (r * q).clamp(max=elem.max)
    if elem is _E2M1:
        code = torch.bucketize(mag, torch.tensor(_E2M1_GRID, dtype=mag.dtype, device=mag.device))
    else:
        code = (mag * 4).to(torch.int64)
    return (code | (negative.to(torch.int64) << 3)).to(torch.int32)


def _pack(codes):
    """FP4 codes (..., n) -> uint8 (..., n / 2), element 2i in the low nibble."""
    pairs = codes.reshape(*codes.shape[:-1], codes.shape[-1] // 2, 2)
    return (pairs[..., 0] | (pairs[..., 1] << 4)).to(torch.uint8)


def _finish_y(q, elem):
    return q if _is_fp8(elem) else _pack(q)


def _pad_to(t, dim, size, value=0):
    """``t`` padded at the end of ``dim`` to ``size``."""
    extra = size - t.shape[dim]
    if extra == 0:
        return t
    pad = [0, 0] * (t.dim() - dim % t.dim() - 1) + [0, extra]
    return torch.nn.functional.pad(t, pad, value=value)


def _pair_layout(byte, axis):
    """Bytes with blocks along ``axis`` -> padded to even, pairs as a trailing dimension of 2."""
    nb = byte.shape[axis]
    byte = _pad_to(byte, axis, nb + nb % 2)
    axis %= byte.dim()
    return byte.unflatten(axis, (byte.shape[axis] // 2, 2)).movedim(axis + 1, -1).to(torch.uint8).contiguous()


def _along(x, axis, block, elem, scaler, round_mode):
    """Quantises ``x`` in blocks along ``axis``: (unpacked y in x's layout, scale bytes in pair layout)."""
    xm = x.movedim(axis, -1)
    n = xm.shape[-1]
    nb = -(-n // block)
    xf = _pad_to(xm.float(), -1, nb * block).unflatten(-1, (nb, block))
    byte, recip = scaler(xf.abs().amax(-1))
    q = _quantise(xf, recip.unsqueeze(-1), elem, round_mode).flatten(-2)[..., :n].movedim(-1, axis)
    return q, _pair_layout(byte.movedim(-1, axis), axis)


# ------------------------------------------------------------------ operators


def npu_dynamic_mx_quant(input, *, axis=-1, round_mode="rint", dst_type=_dtypes.DType.float4_e2m1fn_x2,
                         block_size=32, scale_alg=0, dst_type_max=0.0, max_low_bound=0.0):
    fn = "npu_dynamic_mx_quant"
    _check_dtype(fn, "input", input, _HALVES + (torch.float32,))
    check(1 <= input.dim() <= 7, f"{fn}: input should have 1 to 7 dimensions, got {input.dim()}.")
    check(-input.dim() <= axis < input.dim(),
          f"{fn}: axis {axis} is out of range for input of rank {input.dim()} (expected [{-input.dim()}, "
          f"{input.dim() - 1}]).")
    check(0 < block_size <= 1024 and block_size % 32 == 0,
          f"{fn}: block_size should be a positive multiple of 32 no greater than 1024, got {block_size}.")
    elem = _dst(fn, dst_type)
    _check_round_mode(fn, round_mode, elem)
    scale_alg = _check_scale_alg(fn, scale_alg, elem)
    check(scale_alg != 2 or elem is _E2M1, f"{fn}: scale_alg=2 is only for torch_npu.float4_e2m1fn_x2, got "
                                           f"{elem.name}.")
    check(scale_alg != 2 or block_size == 32, f"{fn}: block_size should be 32 with scale_alg=2, got {block_size}.")
    check(input.dtype != torch.float32 or block_size == 32,
          f"{fn}: block_size should be 32 for float32 input, got {block_size}.")
    check(dst_type_max == 0 or elem is _E2M1,
          f"{fn}: dst_type_max is only for torch_npu.float4_e2m1fn_x2, got {dst_type_max} with {elem.name}.")
    _e2m1_dst_type_max(fn, dst_type_max)
    check(dst_type_max == 0 or block_size == 32,
          f"{fn}: block_size should be 32 when dst_type_max is set, got {block_size}.")
    check(max_low_bound >= 0, f"{fn}: max_low_bound should be non-negative, got {max_low_bound}.")
    check(max_low_bound == 0 or scale_alg == 1,
          f"{fn}: max_low_bound should be 0.0 unless scale_alg=1, got {max_low_bound} with scale_alg={scale_alg}.")
    _check_even_last(fn, "input", input, elem)
    scaler = _scaler(input.dtype, elem, scale_alg, dst_type_max if scale_alg == 2 else 0.0, max_low_bound)
    q, scale = _along(input, axis, block_size, elem, scaler, round_mode)
    return _finish_y(q, elem), scale


def npu_dynamic_mx_quant_with_dual_axis(input, *, round_mode="rint", dst_type=_dtypes.DType.float4_e2m1fn_x2,
                                        scale_alg=0, dst_type_max=0.0):
    fn = "npu_dynamic_mx_quant_with_dual_axis"
    _check_dtype(fn, "input", input, _HALVES)
    check(2 <= input.dim() <= 7, f"{fn}: input should have 2 to 7 dimensions, got {input.dim()}.")
    elem = _dst(fn, dst_type)
    _check_round_mode(fn, round_mode, elem)
    scale_alg = _check_scale_alg(fn, scale_alg, elem)
    check(scale_alg != 2 or elem is _E2M1, f"{fn}: scale_alg=2 is only for torch_npu.float4_e2m1fn_x2, got "
                                           f"{elem.name}.")
    dst_type_max = dst_type_max or 0.0
    check(dst_type_max == 0 or (elem is _E2M1 and scale_alg == 2),
          f"{fn}: dst_type_max is only for torch_npu.float4_e2m1fn_x2 with scale_alg=2, got {dst_type_max}.")
    _e2m1_dst_type_max(fn, dst_type_max)
    _check_even_last(fn, "input", input, elem)
    scaler = _scaler(input.dtype, elem, scale_alg, dst_type_max)
    q1, scale1 = _along(input, -1, 32, elem, scaler, round_mode)
    q2, scale2 = _along(input, -2, 32, elem, scaler, round_mode)
    return _finish_y(q1, elem), scale1, _finish_y(q2, elem), scale2


def npu_dynamic_block_mx_quant(input, *, round_mode="rint", dst_type=_dtypes.DType.float4_e2m1fn_x2, scale_alg=0,
                               dst_type_max=0.0):
    fn = "npu_dynamic_block_mx_quant"
    _check_dtype(fn, "input", input, _HALVES)
    check(input.dim() in (2, 3), f"{fn}: input should be 2-D or 3-D, got {input.dim()}-D.")
    elem = _dst(fn, dst_type)
    _check_round_mode(fn, round_mode, elem)
    scale_alg = _check_scale_alg(fn, scale_alg, elem, allowed=(0, 2))
    check(scale_alg != 2 or elem is _E2M1, f"{fn}: scale_alg=2 is only for torch_npu.float4_e2m1fn_x2, got "
                                           f"{elem.name}.")
    check(dst_type_max == 0 or (elem is _E2M1 and scale_alg == 2),
          f"{fn}: dst_type_max should be 0.0 unless scale_alg=2 with torch_npu.float4_e2m1fn_x2, got "
          f"{dst_type_max}.")
    check(dst_type_max in (0.0, 6.0, 7.0), f"{fn}: dst_type_max should be 0.0, 6.0 or 7.0, got {dst_type_max}.")
    _check_even_last(fn, "input", input, elem)
    rows, cols = input.shape[-2:]
    nr, nc = -(-rows // 32), -(-cols // 32)
    xf = _pad_to(_pad_to(input.float(), -1, nc * 32), -2, nr * 32).unflatten(-1, (nc, 32)).unflatten(-3, (nr, 32))
    byte, recip = _scaler(input.dtype, elem, scale_alg, dst_type_max)(xf.abs().amax((-3, -1)))  # (..., nr, nc)
    q = _quantise(xf, recip.unsqueeze(-1).unsqueeze(-3), elem, round_mode)
    q = q.flatten(-2).flatten(-3, -2)[..., :rows, :cols]
    scale1 = _pair_layout(byte.repeat_interleave(32, dim=-2)[..., :rows, :], -1)
    scale2 = _pair_layout(byte.repeat_interleave(32, dim=-1)[..., :cols], -2)
    return _finish_y(q, elem), scale1, scale2


def _concrete(t):
    """Whether ``t``'s values can be read without tracing (not fake, not compiling)."""
    from torch._subclasses.fake_tensor import is_fake
    return not (torch.compiler.is_compiling() or is_fake(t))


def npu_grouped_dynamic_mx_quant(x, group_index, *, round_mode="rint", dst_type=23, blocksize=32, scale_alg=0,
                                 dst_type_max=0.0):
    fn = "npu_grouped_dynamic_mx_quant"
    _check_dtype(fn, "x", x, _HALVES)
    check(x.dim() == 2, f"{fn}: x should be 2-D, got {x.dim()}-D.")
    check(group_index.dim() == 1 and group_index.shape[0] >= 1,
          f"{fn}: group_index should be a non-empty 1-D tensor, got shape {list(group_index.shape)}.")
    check(group_index.dtype == torch.int32, f"{fn}: group_index should be int32, got {group_index.dtype}.")
    check(blocksize == 32, f"{fn}: blocksize should be 32, got {blocksize}.")
    elem = _dst(fn, dst_type)
    _check_round_mode(fn, round_mode, elem)
    scale_alg = _check_scale_alg(fn, scale_alg, elem)
    dst_type_max = dst_type_max or 0.0
    if elem is _E1M2:
        check(dst_type_max == 0 or 1.75 <= dst_type_max <= 3.5,
              f"{fn}: dst_type_max should be 0 or within [1.75, 3.5] for {elem.name}, got {dst_type_max}.")
    elif elem is _E2M1:
        _e2m1_dst_type_max(fn, dst_type_max)
    else:
        check(dst_type_max == 0, f"{fn}: dst_type_max is only for float4 dst_type, got {dst_type_max} with "
                                 f"{elem.name}.")
    _check_even_last(fn, "x", x, elem)
    m, n = x.shape
    groups = group_index.shape[0]
    if _concrete(group_index):
        ends = group_index.tolist()
        check(all(a <= b for a, b in zip([0] + ends, ends)) and ends[-1] == m,
              f"{fn}: group_index should be non-decreasing, non-negative and end at x.shape[0] = {m}, got {ends}.")
    pairs = m // 64 + groups
    device = x.device
    ends = group_index.to(torch.int64)
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    first_pair = starts // 64 + torch.arange(groups, device=device)  # each group's first pair row
    rows = torch.arange(m, device=device)
    group = torch.searchsorted(ends, rows, right=True)
    member = group < groups
    group = group.clamp(max=groups - 1)
    # Rows laid out group by group, each group from its first pair row (64 rows a pair);
    # rows in no group (bad group_index) go to one spare pair after the last.
    dest = torch.where(member, first_pair[group] * 64 + rows - starts[group], pairs * 64 + rows % 64)
    xf = torch.where(member[:, None], x.float(), 0.0)
    padded = torch.zeros((pairs + 1) * 64, n, dtype=torch.float32, device=device).index_copy(0, dest, xf)
    blocks = padded.unflatten(0, (2 * (pairs + 1), 32))
    byte, recip = _scaler(x.dtype, elem, scale_alg, dst_type_max)(blocks.abs().amax(1))  # (2 * (pairs + 1), n)
    q = _quantise(blocks, recip.unsqueeze(1), elem, round_mode).flatten(0, 1)
    q = q.index_select(0, dest)
    # Pair rows some group writes: [first_pair[g], first_pair[g] + ceil(len_g / 64)).
    pair = torch.arange(pairs, device=device)
    owner = (torch.searchsorted(first_pair, pair, right=True) - 1).clamp(min=0)
    lengths = ends - starts
    written = (pair >= first_pair[owner]) & (pair < first_pair[owner] + (lengths[owner] + 63) // 64)
    byte = byte[:2 * pairs].unflatten(0, (pairs, 2))
    byte = torch.where(written[:, None, None], byte, torch.full_like(byte, 127))
    scale = byte.transpose(1, 2).to(torch.uint8).contiguous()  # (pairs, n, 2)
    return _finish_y(q, elem), scale


def npu_dynamic_dual_level_mx_quant(input, *, smooth_scale=None, round_mode="rint"):
    fn = "npu_dynamic_dual_level_mx_quant"
    _check_dtype(fn, "input", input, _HALVES)
    check(1 <= input.dim() <= 7, f"{fn}: input should have 1 to 7 dimensions, got {input.dim()}.")
    check(smooth_scale is None, f"{fn}: smooth_scale is not supported on vNPU: the operator documents it as not "
                                f"supported yet; pass None.")
    _check_round_mode(fn, round_mode, _E2M1)
    _check_even_last(fn, "input", input, _E2M1)
    n = input.shape[-1]
    nb0 = -(-n // 512)
    xf = _pad_to(input.float(), -1, nb0 * 512).unflatten(-1, (nb0, 512))
    a = xf.abs()
    amax = torch.where(a < float("inf"), a, torch.zeros_like(a)).amax(-1)  # inf / NaN left out
    level0 = amax * torch.tensor(1.0 / 6.0, dtype=torch.float32, device=input.device)
    level0 = torch.where(level0 < 2.0 ** -126, torch.zeros_like(level0), level0)
    temp = torch.where(xf == 0, xf, xf / level0.unsqueeze(-1)).flatten(-2)[..., :n].to(input.dtype)
    q, level1 = _along(temp, -1, 32, _E2M1, _scaler(input.dtype, _E2M1, 0), round_mode)
    return _pack(q), level0, level1


define("npu_dynamic_mx_quant(Tensor input, *, int axis=-1, str round_mode=\"rint\", int dst_type=296, "
       "int block_size=32, int? scale_alg=0, float dst_type_max=0.0, float max_low_bound=0.0) -> (Tensor, Tensor)",
       npu_dynamic_mx_quant)
define("npu_dynamic_mx_quant_with_dual_axis(Tensor input, *, str round_mode=\"rint\", int dst_type=296, "
       "int scale_alg=0, float? dst_type_max=0.0) -> (Tensor, Tensor, Tensor, Tensor)",
       npu_dynamic_mx_quant_with_dual_axis)
define("npu_grouped_dynamic_mx_quant(Tensor x, Tensor group_index, *, str round_mode=\"rint\", int dst_type=23, "
       "int blocksize=32, int? scale_alg=0, float? dst_type_max=0.0) -> (Tensor, Tensor)",
       npu_grouped_dynamic_mx_quant)
define("npu_dynamic_block_mx_quant(Tensor input, *, str round_mode=\"rint\", int dst_type=296, int scale_alg=0, "
       "float dst_type_max=0.0) -> (Tensor, Tensor, Tensor)", npu_dynamic_block_mx_quant)
define("npu_dynamic_dual_level_mx_quant(Tensor input, *, Tensor? smooth_scale=None, str round_mode=\"rint\") "
       "-> (Tensor, Tensor, Tensor)", npu_dynamic_dual_level_mx_quant)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
