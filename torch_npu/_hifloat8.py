"""HiFloat8: Ascend's tapered 8-bit floating-point format, and vNPU's codec for it.

torch has no HiFloat8 dtype; torch_npu names it ``torch_npu.hifloat8`` (an
integer dtype constant, see _dtypes.py) and keeps the bytes in ``torch.uint8``
tensors. This module converts between those bytes and ordinary float tensors:

- ``encode(x)``: a floating-point tensor -> uint8 HiFloat8 codes, the nearest
  HiFloat8 value with ties away from zero (the only rounding Ascend's kernels
  allow for HiFloat8). Finite values beyond the largest finite value (32768)
  saturate to +-32768 by default (``saturate=False``: they round to +-inf the
  way the ``en_dtypes`` reference does, from 40960 = midway between 32768 and
  the 49152 that the inf code would have, upwards). +-inf -> 0x6F / 0xEF,
  NaN -> 0x80, zero and -0.0 and everything that rounds to zero -> 0x00 (the
  format has a single zero).
- ``decode(codes)``: uint8 codes -> float32, exact for all 256 codes.

Both are vectorised ATen compositions (a 256-entry table, ``searchsorted``), so
they run on cpu and npu tensors alike and queue on the npu stream like any
other operator.

The format (one byte): a sign bit, then a "dot" prefix that says how many
exponent bits follow: ``11`` -> 4, ``10`` -> 3, ``01`` -> 2, ``001`` -> 1,
``0001`` -> 0, ``0000`` -> denormal. The exponent field is sign-magnitude with
an implicit leading one in the magnitude (D bits encode +-[2^(D-1), 2^D - 1]),
and the remaining 1 (D=4), 2 (D=3) or 3 bits are the mantissa of a normal
1.m x 2^e. With the ``0000`` prefix the low three bits m (1..7) give the
denormals 2^(m - 23), 2^-22 .. 2^-16. Specials: 0x00 is zero, 0x80 is NaN,
0x6F / 0xEF (the largest exponent with mantissa 1) are +-inf. Finite
magnitudes therefore span 2^-22 .. 2^15 = 32768, with 3 mantissa bits around
1.0 and fewer towards the ends.
"""

import functools

import torch

__all__ = ["encode", "decode", "values", "MAX", "MIN_DENORMAL", "NAN_CODE", "POS_INF_CODE", "NEG_INF_CODE"]

MAX = 32768.0              # largest finite value (code 0x6E)
MIN_DENORMAL = 2.0 ** -22  # smallest positive value (code 0x01)
NAN_CODE = 0x80
POS_INF_CODE = 0x6F
NEG_INF_CODE = 0xEF
# Finite magnitudes from here up round past 32768 (towards the 49152 the inf
# code would stand for): the overflow threshold when not saturating.
_OVERFLOW = 40960.0


def _magnitude(code):
    """The value of a non-negative code 0x01..0x7F (0x6F included: its bits give 49152, which means inf)."""
    if code & 0x60 == 0x60:
        exp_bits, man_bits = 4, 1
    elif code & 0x60 == 0x40:
        exp_bits, man_bits = 3, 2
    elif code & 0x60 == 0x20:
        exp_bits, man_bits = 2, 3
    elif code & 0x10:
        exp_bits, man_bits = 1, 3
    elif code & 0x08:
        exp_bits, man_bits = 0, 3
    else:  # prefix 0000: denormal
        return 2.0 ** ((code & 7) - 23)
    mantissa = code & ((1 << man_bits) - 1)
    exponent = 0
    if exp_bits:
        field = (code >> man_bits) & ((1 << exp_bits) - 1)
        size = (1 << (exp_bits - 1)) | (field & ((1 << (exp_bits - 1)) - 1))
        exponent = -size if field >> (exp_bits - 1) else size
    return (1.0 + mantissa / (1 << man_bits)) * 2.0 ** exponent


@functools.lru_cache(maxsize=None)
def values():
    """The 256 code values as Python floats, indexed by code (0x80 NaN, 0x6F/0xEF +-inf)."""
    table = [0.0] * 256
    for code in range(1, 0x80):
        table[code] = _magnitude(code)
        table[code | 0x80] = -table[code]
    table[POS_INF_CODE], table[NEG_INF_CODE] = float("inf"), float("-inf")
    table[NAN_CODE] = float("nan")
    return tuple(table)


@functools.lru_cache(maxsize=None)
def _grid():
    """(magnitudes, codes): the non-negative finite values ascending, 0 first, and their codes."""
    table = values()
    pairs = sorted((table[c], c) for c in range(0x80) if c != POS_INF_CODE)
    return tuple(v for v, _ in pairs), tuple(c for _, c in pairs)


def decode(codes, dtype=torch.float32):
    """uint8 (or int8) HiFloat8 codes -> their values, float32 unless ``dtype`` says otherwise."""
    if not isinstance(codes, torch.Tensor):
        raise TypeError(f"hifloat8 decode: expected a tensor of codes, got {type(codes).__name__}")
    if codes.dtype not in (torch.uint8, torch.int8):
        raise RuntimeError(f"hifloat8 decode: codes should be torch.uint8 (HiFloat8 bytes), got {codes.dtype}")
    table = torch.tensor(values(), dtype=torch.float32, device=codes.device)
    out = table[codes.to(torch.int64) & 0xFF]
    return out if dtype in (None, torch.float32) else out.to(dtype)


def encode(x, saturate=True):
    """Floating-point tensor -> HiFloat8 codes (torch.uint8, same shape and device).

    Round to nearest, ties away from zero; finite values saturate at +-32768
    unless ``saturate=False`` (then they overflow to +-inf as en_dtypes does)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"hifloat8 encode: expected a tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise RuntimeError(f"hifloat8 encode: expected a floating-point tensor, got {x.dtype}")
    grid_values, grid_codes = _grid()
    # Every grid value and every midpoint between neighbours has at most 5
    # significant bits, so float32 compares exactly. float64 input is rounded
    # to float32 first, as torch_npu's casts (which take float32 at most) and
    # en_dtypes do.
    v = x.to(torch.float32)
    grid = torch.tensor(grid_values, dtype=torch.float32, device=x.device)
    code_of = torch.tensor(grid_codes, dtype=torch.int64, device=x.device)
    last = len(grid_values) - 1
    a = torch.nan_to_num(v.abs(), nan=0.0, posinf=0.0).clamp(max=grid_values[-1])
    lo = (torch.searchsorted(grid, a.contiguous(), right=True) - 1).clamp(0, last)
    hi = (lo + 1).clamp(max=last)
    up = (a >= (grid[lo] + grid[hi]) / 2) & (lo < last)  # the midpoint itself goes up: ties away from zero
    code = code_of[lo + up.to(torch.int64)]
    finite = torch.isfinite(v)
    if not saturate:
        code = torch.where(finite & (v.abs() >= _OVERFLOW), POS_INF_CODE, code)
    code = torch.where(torch.isinf(v), POS_INF_CODE, code)
    code = code | torch.where(torch.signbit(v) & (code != 0), 0x80, 0)
    code = torch.where(torch.isnan(v), NAN_CODE, code)
    return code.to(torch.uint8)
