"""HANS: lossless compression of float tensors (MindSpeed's activation and optimizer-state compression).

Operators (op-plugin's schemas, ``op_plugin_functions.yaml``; both exist only
as ``.out`` overloads, aclnnHansEncode / aclnnHansDecode):

- ``npu_hans_encode.out(input, statistic=False, reshuff=False, *, pdf,
  mantissa, fixed, var)``: splits each element of a float16 / bfloat16 /
  float32 tensor into its "exponent byte" and the rest (the mantissa bytes),
  entropy-codes the exponent bytes against a PDF (the int32 count of each of
  the 256 byte values; ``statistic=True`` counts them in ``input`` and
  overwrites ``pdf``, False codes with the ``pdf`` given), and writes the code
  into ``fixed`` (a caller-sized part) and, when it does not fit there, on
  into ``var``. Returns (pdf, mantissa, fixed, var), the tensors passed.
- ``npu_hans_decode.out(mantissa, fixed, var, pdf, reshuff=False, *, out)``:
  the inverse; ``out`` gets the original tensor back bit for bit (NaN
  payloads, -0.0, denormals and infinities included).

torch_npu's Python bindings take the out tensors as ``out=``:
``torch_npu.npu_hans_encode(x, statistic, reshuff, out=(pdf, mantissa, fixed,
var))`` and ``torch_npu.npu_hans_decode(mantissa, fixed, var, pdf, reshuff,
out=y)``, as MindSpeed calls them; ``npu_hans_encode`` / ``npu_hans_decode``
below are those bindings over ``torch.ops.npu``.

The argument checks are the documented constraints: input (out) float16,
bfloat16 or float32 with a multiple of 64 elements, at least 32768; pdf
int32 with 256 elements ([1, 256] as documented, or [256] as MindSpeed
allocates it); mantissa, fixed and var of input's dtype and contiguous;
mantissa exactly numel * (element_size - 1) bytes; fixed at least 512 bytes
(the metadata). Capacity: vNPU's code needs at most numel bytes after the 512
bytes of metadata, so fixed + var must hold numel + 512 bytes (fixed alone
with reshuff=True); Ascend's documented bound (numel + numel / 64 + 8448 per
vector core) is larger, so every allocation valid there is valid here.

Emulation choices (vNPU's bitstream is not Ascend's: only round trips within
vNPU are supported, and encoded buffers cannot be exchanged with hardware):

- The exponent byte of an element is the 8 bits after the sign (the exponent
  of float32 and bfloat16; for float16 its 5 exponent bits and the top 3
  mantissa bits); the mantissa part is the sign and the bits below, packed
  little-endian into element_size - 1 bytes per element, element after
  element, in ``mantissa``'s bytes.
- The exponent code: the 256 byte values are ranked by their pdf count
  (ties: smaller value first); with k bits per element (k = 1..7, chosen to
  minimise the code size the pdf predicts), the 2^k - 1 most frequent values
  get the codes 0 .. 2^k - 2 and every other value the escape code 2^k - 1,
  its byte stored after the packed codes. When the pdf predicts no gain, or
  when the data (statistic=False) makes the code longer than the raw bytes,
  the exponent bytes are stored as they are. The k-bit codes (8 per k bytes)
  and the escaped bytes are both decodable in parallel.
- ``fixed``'s first 512 bytes hold the metadata (magic, dtype, element
  count, k, reshuff, escape count, a CRC of the pdf); the code follows, then
  continues at the start of ``var``. ``reshuff=True`` keeps the whole code in
  ``fixed`` (var is neither read nor written) and must be passed to the
  decoder too; a mismatch, a different pdf or a different dtype or size at
  decode raises RuntimeError.
- The code size depends on the data, so both operators read the pdf and the
  escape count back to the host (a stream synchronisation); they cannot be
  traced by FakeTensor / torch.compile.
"""

import struct
import zlib

import torch

from torch_npu.op_plugin._library import check, define

__all__ = ["npu_hans_encode", "npu_hans_decode"]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_INTS = {2: torch.int16, 4: torch.int32}
_DTYPE_CODES = {torch.float16: 1, torch.bfloat16: 2, torch.float32: 3}
_META_BYTES = 512            # fixed's first bytes: the metadata
_MAGIC = b"vNPUHANS"
_VERSION = 1
# magic, version, dtype code, k (8: raw bytes), reshuff, numel, escapes, pdf crc32
_HEADER = struct.Struct("<8sBBBBQQI")
_RAW = 8
_MIN_NUMEL = 32768
_NUMEL_MULTIPLE = 64


def _byte_view(t):
    """The bytes of a contiguous tensor, flat (a view)."""
    return t.reshape(-1).view(torch.uint8)


def _bits(x):
    """The element bit patterns of float tensor ``x`` as int64, flat, in logical order."""
    width = x.element_size() * 8
    return x.detach().view(_INTS[x.element_size()]).reshape(-1).to(torch.int64) & ((1 << width) - 1)


def _table(counts):
    """The byte values ordered by pdf count (descending, ties by value)."""
    return sorted(range(256), key=lambda s: (-counts[s], s))


def _choose_k(counts):
    """Bits per element for the exponent code (1..7), or _RAW when coding would not beat raw bytes."""
    total = sum(counts)
    if total <= 0:
        return _RAW
    ranked = sorted(counts, reverse=True)
    best, best_bits = _RAW, 8 * total
    for k in range(1, 8):
        escaped = total - sum(ranked[:(1 << k) - 1])
        bits = k * total + 8 * escaped
        if bits < best_bits:
            best, best_bits = k, bits
    return best


def _pdf_crc(counts):
    return zlib.crc32(struct.pack("<256i", *counts))


def _check_buffer(fn, name, t, dtype):
    check(isinstance(t, torch.Tensor), f"{fn}: {name} should be a tensor.")
    check(t.dtype == dtype, f"{fn}: {name} should have the data's dtype {dtype}, got {t.dtype}.")
    check(t.is_contiguous(), f"{fn}: {name} should be contiguous.")


def _check_pdf(fn, pdf):
    check(pdf.dtype == torch.int32, f"{fn}: pdf should be int32, got {pdf.dtype}.")
    check(pdf.numel() == 256 and pdf.dim() <= 2,
          f"{fn}: pdf should have shape [1, 256] (or [256]), got {list(pdf.shape)}.")


def _check_data(fn, name, x):
    check(x.dtype in _FLOATS, f"{fn}: {name} should be float16, bfloat16 or float32, got {x.dtype}.")
    n = x.numel()
    check(n % _NUMEL_MULTIPLE == 0 and n >= _MIN_NUMEL,
          f"{fn}: {name} should have a multiple of {_NUMEL_MULTIPLE} elements, at least {_MIN_NUMEL}, got {n}.")


def _check_sizes(fn, n, elem, mantissa, fixed, var, reshuff):
    need = n * (elem - 1)
    got = mantissa.numel() * mantissa.element_size()
    check(got == need, f"{fn}: mantissa should hold numel * (element_size - 1) = {need} bytes, got {got}.")
    fixed_bytes = fixed.numel() * fixed.element_size()
    check(fixed_bytes >= _META_BYTES, f"{fn}: fixed should hold at least {_META_BYTES} bytes (the compression "
          f"metadata), got {fixed_bytes}.")
    if reshuff:
        check(fixed_bytes - _META_BYTES >= n, f"{fn}: with reshuff=True fixed should hold the whole code: "
              f"{n + _META_BYTES} bytes (numel + {_META_BYTES}), got {fixed_bytes}.")
    else:
        total = fixed_bytes + var.numel() * var.element_size()
        check(total - _META_BYTES >= n, f"{fn}: fixed and var together should hold {n + _META_BYTES} bytes "
              f"(numel + {_META_BYTES}), got {total}.")


def _npu_hans_encode(input, statistic=False, reshuff=False, *, pdf, mantissa, fixed, var):
    fn = "npu_hans_encode"
    _check_data(fn, "input", input)
    _check_pdf(fn, pdf)
    for name, t in (("mantissa", mantissa), ("fixed", fixed), ("var", var)):
        _check_buffer(fn, name, t, input.dtype)
    n, elem = input.numel(), input.element_size()
    _check_sizes(fn, n, elem, mantissa, fixed, var, reshuff)
    width = 8 * elem
    dev = input.device
    with torch.no_grad():
        u = _bits(input)
        exp = (u >> (width - 9)) & 0xFF
        rest = ((u >> (width - 1)) << (width - 9)) | (u & ((1 << (width - 9)) - 1))
        shifts = torch.arange(0, 8 * (elem - 1), 8, device=dev)
        _byte_view(mantissa).copy_(((rest.unsqueeze(1) >> shifts) & 0xFF).reshape(-1).to(torch.uint8))

        if statistic:
            pdf.copy_(torch.bincount(exp, minlength=256).to(torch.int32).view(pdf.shape))
        counts = [int(c) for c in pdf.reshape(-1).tolist()]
        k = _choose_k(counts)
        escapes = 0
        if k != _RAW:
            esc = (1 << k) - 1
            code_of = [esc] * 256
            for rank, sym in enumerate(_table(counts)[:esc]):
                code_of[sym] = rank
            codes = torch.tensor(code_of, dtype=torch.int64, device=dev)[exp]
            escaped = exp[codes == esc].to(torch.uint8)
            escapes = escaped.numel()
            if n * k // 8 + escapes > n:  # the pdf does not fit these data: raw bytes are shorter
                k = _RAW
            else:
                groups = (codes.view(-1, 8) << torch.arange(0, 8 * k, k, device=dev)).sum(1)
                packed = (groups.unsqueeze(1) >> torch.arange(0, 8 * k, 8, device=dev)) & 0xFF
                body = torch.cat([packed.reshape(-1).to(torch.uint8), escaped])
        if k == _RAW:
            escapes = 0
            body = exp.to(torch.uint8)

        header = _HEADER.pack(_MAGIC, _VERSION, _DTYPE_CODES[input.dtype], k, int(bool(reshuff)), n, escapes,
                              _pdf_crc(counts))
        meta = torch.zeros(_META_BYTES, dtype=torch.uint8)
        meta[:len(header)] = torch.frombuffer(bytearray(header), dtype=torch.uint8)
        fixed_u8 = _byte_view(fixed)
        fixed_u8[:_META_BYTES].copy_(meta.to(dev))
        in_fixed = min(body.numel(), fixed_u8.numel() - _META_BYTES)
        fixed_u8[_META_BYTES:_META_BYTES + in_fixed].copy_(body[:in_fixed])
        if in_fixed < body.numel():
            _byte_view(var)[:body.numel() - in_fixed].copy_(body[in_fixed:])
    return pdf, mantissa, fixed, var


def _npu_hans_decode(mantissa, fixed, var, pdf, reshuff=False, *, out):
    fn = "npu_hans_decode"
    _check_data(fn, "out", out)
    _check_pdf(fn, pdf)
    for name, t in (("mantissa", mantissa), ("fixed", fixed), ("var", var)):
        _check_buffer(fn, name, t, out.dtype)
    n, elem = out.numel(), out.element_size()
    _check_sizes(fn, n, elem, mantissa, fixed, var, reshuff)
    width = 8 * elem
    dev = out.device
    with torch.no_grad():
        fixed_u8 = _byte_view(fixed)
        header = bytes(fixed_u8[:_HEADER.size].tolist())
        magic, version, dtype_code, k, was_reshuff, count, escapes, crc = _HEADER.unpack(header)
        check(magic == _MAGIC and version == _VERSION,
              f"{fn}: fixed holds no vNPU HANS code (encode with torch_npu.npu_hans_encode on vNPU first; "
              f"Ascend's bitstream is not supported on vNPU).")
        check(dtype_code == _DTYPE_CODES[out.dtype] and count == n,
              f"{fn}: the code is of {count} elements of another dtype or size than out ({n} x {out.dtype}).")
        check(bool(was_reshuff) == bool(reshuff),
              f"{fn}: reshuff={bool(reshuff)}, but the data were encoded with reshuff={bool(was_reshuff)}.")
        counts = [int(c) for c in pdf.reshape(-1).tolist()]
        check(_pdf_crc(counts) == crc, f"{fn}: pdf is not the one the data were encoded with.")
        size = n if k == _RAW else n * k // 8 + escapes
        in_fixed = min(size, fixed_u8.numel() - _META_BYTES)
        body = fixed_u8[_META_BYTES:_META_BYTES + in_fixed]
        if in_fixed < size:
            body = torch.cat([body, _byte_view(var)[:size - in_fixed]])

        if k == _RAW:
            exp = body.to(torch.int64)
        else:
            esc = (1 << k) - 1
            groups = (body[:n * k // 8].to(torch.int64).view(-1, k)
                      << torch.arange(0, 8 * k, 8, device=dev)).sum(1)
            codes = ((groups.unsqueeze(1) >> torch.arange(0, 8 * k, k, device=dev)) & esc).reshape(-1)
            symbols = torch.tensor(_table(counts)[:esc] + [0], dtype=torch.int64, device=dev)
            exp = symbols[codes]
            is_escape = codes == esc
            check(int(is_escape.sum()) == escapes, f"{fn}: the code in fixed / var is corrupt.")
            exp = exp.masked_scatter(is_escape, body[n * k // 8:].to(torch.int64))

        shifts = torch.arange(0, 8 * (elem - 1), 8, device=dev)
        rest = (_byte_view(mantissa).to(torch.int64).view(n, elem - 1) << shifts).sum(1)
        sign = (rest >> (width - 9)) & 1
        u = (sign << (width - 1)) | (exp << (width - 9)) | (rest & ((1 << (width - 9)) - 1))
        u = torch.where(u >= (1 << (width - 1)), u - (1 << width), u)  # two's complement in the signed view
        out.view(_INTS[elem]).copy_(u.to(_INTS[elem]).view(out.shape))
    return out


define("npu_hans_encode.out(Tensor input, bool statistic=False, bool reshuff=False, *, Tensor(a!) pdf, "
       "Tensor(b!) mantissa, Tensor(c!) fixed, Tensor(d!) var) -> (Tensor(a!), Tensor(b!), Tensor(c!), Tensor(d!))",
       _npu_hans_encode, export=False)
define("npu_hans_decode.out(Tensor mantissa, Tensor fixed, Tensor var, Tensor pdf, bool reshuff=False, *, "
       "Tensor(a!) out) -> Tensor(a!)", _npu_hans_decode, export=False)


def npu_hans_encode(input, statistic=False, reshuff=False, *, out):
    """torch_npu.npu_hans_encode(input, statistic, reshuff, out=(pdf, mantissa, fixed, var)) -> (pdf, mantissa,
    fixed, var): the out tensors, written (see the module docstring)."""
    if not (isinstance(out, (tuple, list)) and len(out) == 4):
        raise TypeError("npu_hans_encode: out should be a tuple (pdf, mantissa, fixed, var) of four tensors.")
    pdf, mantissa, fixed, var = out
    return torch.ops.npu.npu_hans_encode.out(input, statistic, reshuff, pdf=pdf, mantissa=mantissa, fixed=fixed,
                                             var=var)


def npu_hans_decode(mantissa, fixed, var, pdf, reshuff=False, *, out):
    """torch_npu.npu_hans_decode(mantissa, fixed, var, pdf, reshuff, out=out) -> out, the decoded tensor."""
    if isinstance(out, (tuple, list)) and len(out) == 1:
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise TypeError("npu_hans_decode: out should be the tensor to decode into.")
    return torch.ops.npu.npu_hans_decode.out(mantissa, fixed, var, pdf, reshuff, out=out)
