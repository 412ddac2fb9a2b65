"""HiFloat8: the codec (torch_npu/_hifloat8.py) and torch_npu.HiFloat8Tensor (torch_npu/utils/hif8_tensor.py).

The known code <-> value pairs below were read from the ``en_dtypes`` wheel
(0.0.4, ``en_dtypes.hifloat8``), the reference implementation of Ascend's
HiFloat8 in numpy; the brute-force references are written from the format's
definition, independently of the codec.
"""

import copy
import inspect
import io
import math
import pickle

import pytest
import torch

import torch_npu
from torch_npu import _hifloat8
from torch_npu.utils.hif8_tensor import HiFloat8Tensor, _HiFloat8Tensor

NAN = float("nan")
INF = float("inf")

# (code, value) from en_dtypes: np.array([code], np.uint8).view(hifloat8).astype(np.float32)
KNOWN_CODES = [
    (0x00, 0.0), (0x01, 2.384185791015625e-07), (0x02, 4.76837158203125e-07), (0x07, 1.52587890625e-05),
    (0x08, 1.0), (0x09, 1.125), (0x0F, 1.875), (0x10, 2.0), (0x17, 3.75), (0x18, 0.5), (0x1F, 0.9375),
    (0x20, 4.0), (0x27, 7.5), (0x2F, 15.0), (0x30, 0.25), (0x38, 0.125), (0x3F, 0.234375), (0x40, 16.0),
    (0x47, 56.0), (0x4F, 224.0), (0x50, 0.0625), (0x54, 0.03125), (0x5F, 0.013671875), (0x60, 256.0),
    (0x61, 384.0), (0x6D, 24576.0), (0x6E, 32768.0), (0x6F, INF), (0x70, 0.00390625), (0x77, 0.000732421875),
    (0x7C, 6.103515625e-05), (0x7E, 3.0517578125e-05), (0x7F, 4.57763671875e-05), (0x80, NAN),
    (0x81, -2.384185791015625e-07), (0x88, -1.0), (0x95, -3.25), (0xAF, -15.0), (0xC4, -32.0),
    (0xEE, -32768.0), (0xEF, -INF), (0xFE, -3.0517578125e-05), (0xFF, -4.57763671875e-05),
]

# (float32 value, code) from en_dtypes: np.array([value], np.float32).astype(hifloat8); ties go away from zero.
KNOWN_ENCODINGS = [
    (1.0625, 0x09), (0.96875, 0x08), (1.0499999523162842, 0x08), (1.1875, 0x0A), (240.0, 0x60), (232.0, 0x4F),
    (-232.0, 0xCF), (15.5, 0x40), (14.5, 0x2F), (1.1920928955078125e-07, 0x01), (5.960464477539063e-08, 0x00),
    (1.7881393432617188e-07, 0x01), (2.288818359375e-05, 0x7E), (3.814697265625e-05, 0x7F),
    (2.9999999242136255e-05, 0x7E), (0.30000001192092896, 0x32), (-0.30000001192092896, 0xB2),
    (0.10000000149011612, 0x52), (1000.0, 0x64), (-1000.0, 0xE4), (20000.0, 0x6C), (28672.0, 0x6E),
    (40959.0, 0x6E), (9.99999993922529e-09, 0x00), (-9.99999993922529e-09, 0x00), (5.5, 0x23), (5.75, 0x24),
    (6.25, 0x25), (0.047343749552965164, 0x56), (100.0, 0x4A), (7.75, 0x28), (-7.75, 0xA8), (3.875, 0x20),
    (0.49000000953674316, 0x18), (0.0, 0x00), (-0.0, 0x00), (INF, 0x6F), (-INF, 0xEF), (NAN, 0x80),
]
# en_dtypes does not saturate: from 40960 up finite values become inf.
KNOWN_OVERFLOWS = [(40960.0, 0x6F), (-40960.0, 0xEF), (1e6, 0x6F), (3.0e38, 0x6F)]


def ref_value(code):
    """A code's value read off its bit string: sign | dot | exponent (sign-magnitude, implicit 1) | mantissa."""
    sign = -1.0 if code & 0x80 else 1.0
    bits = format(code & 0x7F, "07b")
    if code == 0x80:
        return NAN
    if code & 0x7F == 0x6F:
        return sign * INF
    if bits[:2] == "11":
        d, rest = 4, bits[2:]
    elif bits[:2] == "10":
        d, rest = 3, bits[2:]
    elif bits[:2] == "01":
        d, rest = 2, bits[2:]
    elif bits[:3] == "001":
        d, rest = 1, bits[3:]
    elif bits[:4] == "0001":
        d, rest = 0, bits[4:]
    else:
        m = int(bits[4:], 2)
        return 0.0 if m == 0 else sign * 2.0 ** (m - 23)
    e = 0
    if d:
        e = int("1" + rest[1:d], 2) * (-1 if rest[0] == "1" else 1)
    mant = rest[d:]
    return sign * (1 + int(mant, 2) / 2 ** len(mant)) * 2.0 ** e


REF = [ref_value(c) for c in range(256)]


def ref_encode(x):
    """Brute force: the nearest finite value (ties to the larger magnitude), saturating; inf/NaN kept."""
    finite = sorted({abs(v) for v in REF if math.isfinite(v)})
    codes = {abs(REF[c]): c for c in range(0x80) if math.isfinite(REF[c])}
    grid = torch.tensor(finite, dtype=torch.float64)
    out = []
    for v in x.double().tolist():
        if math.isnan(v):
            out.append(0x80)
            continue
        if math.isinf(v):
            out.append(0x6F | (0x80 if v < 0 else 0))
            continue
        dist = (grid - abs(v)).abs()
        best = dist.min()
        magnitude = grid[dist == best].max().item()
        code = codes[magnitude]
        out.append(code | (0x80 if v < 0 and code else 0))
    return torch.tensor(out, dtype=torch.uint8)


def same_values(a, b):
    """Equal, NaN where NaN."""
    a, b = a.cpu().double(), b.cpu().double()
    return torch.equal(torch.isnan(a), torch.isnan(b)) and torch.equal(a[~torch.isnan(a)], b[~torch.isnan(b)])


# ------------------------------------------------------------------ codec


def test_decode_all_codes_from_the_bit_strings():
    got = _hifloat8.decode(torch.arange(256, dtype=torch.uint8))
    assert got.dtype == torch.float32 and got.shape == (256,)
    assert same_values(got, torch.tensor(REF))
    assert _hifloat8.MAX == 32768.0 and _hifloat8.MIN_DENORMAL == 2.0 ** -22
    assert len({v for v in REF if not math.isnan(v)}) == 255  # one code per value (single zero, NaN)


def test_decode_known_codes():
    codes = torch.tensor([c for c, _ in KNOWN_CODES], dtype=torch.uint8)
    assert same_values(_hifloat8.decode(codes), torch.tensor([v for _, v in KNOWN_CODES]))
    assert same_values(_hifloat8.decode(codes.view(torch.int8)), torch.tensor([v for _, v in KNOWN_CODES]))
    assert _hifloat8.decode(codes, dtype=torch.bfloat16).dtype == torch.bfloat16


def test_encode_known_values():
    x = torch.tensor([v for v, _ in KNOWN_ENCODINGS], dtype=torch.float32)
    assert _hifloat8.encode(x).tolist() == [c for _, c in KNOWN_ENCODINGS]
    assert _hifloat8.encode(x, saturate=False).tolist() == [c for _, c in KNOWN_ENCODINGS]
    y = torch.tensor([v for v, _ in KNOWN_OVERFLOWS], dtype=torch.float32)
    assert _hifloat8.encode(y, saturate=False).tolist() == [c for _, c in KNOWN_OVERFLOWS]
    assert _hifloat8.encode(y).tolist() == [0x6E, 0xEE, 0x6E, 0x6E]  # saturated at +-32768


def test_encode_every_code_value_and_midpoint_against_brute_force():
    finite = sorted({abs(v) for v in REF if math.isfinite(v)})
    mids = [(a + b) / 2 for a, b in zip(finite, finite[1:])]
    x = torch.tensor(finite + mids, dtype=torch.float32)
    up, down = torch.nextafter(x, torch.tensor(INF)), torch.nextafter(x, torch.tensor(0.0))
    x = torch.cat([x, up, down, torch.tensor([1e-30, 2.0 ** -23, 50000.0, 3e38, INF, NAN])])
    x = torch.cat([x, -x])
    assert torch.equal(_hifloat8.encode(x), ref_encode(x))
    # decode(encode(v)) == v on the grid; encode(decode(c)) == c for every code
    assert torch.equal(_hifloat8.encode(_hifloat8.decode(torch.arange(256, dtype=torch.uint8))),
                       torch.arange(256, dtype=torch.uint8))


def test_encode_random_values_and_input_dtypes():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3000, generator=g) * torch.exp2(torch.randint(-24, 17, (3000,), generator=g).float())
    assert torch.equal(_hifloat8.encode(x), ref_encode(x))
    for dtype in (torch.float16, torch.bfloat16):
        xd = x.to(dtype)
        assert torch.equal(_hifloat8.encode(xd), ref_encode(xd.float()))
    # float64 is rounded to float32 first, as the casts do: a value just below the 1.0625 tie goes to 1.125
    assert _hifloat8.encode(torch.tensor([1.0625 - 1e-12], dtype=torch.float64)).tolist() == [0x09]


def test_codec_on_npu_equals_cpu_and_keeps_shape():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 5, 6, generator=g) * 100
    x[0, 0, :3] = torch.tensor([NAN, INF, -INF])
    codes = _hifloat8.encode(x)
    npu_codes = _hifloat8.encode(x.npu())
    assert npu_codes.device.type == "npu" and npu_codes.dtype == torch.uint8 and npu_codes.shape == x.shape
    assert torch.equal(npu_codes.cpu(), codes)
    assert same_values(_hifloat8.decode(npu_codes), _hifloat8.decode(codes))
    assert _hifloat8.decode(npu_codes).device.type == "npu"
    xt = x.transpose(0, 2)  # strided input
    assert torch.equal(_hifloat8.encode(xt.npu()).cpu(), codes.transpose(0, 2))


def test_codec_bad_input():
    with pytest.raises(RuntimeError, match="floating-point"):
        _hifloat8.encode(torch.arange(4))
    with pytest.raises(RuntimeError, match="uint8"):
        _hifloat8.decode(torch.ones(4))
    with pytest.raises(TypeError):
        _hifloat8.encode([1.0])


# ------------------------------------------------------------------ HiFloat8Tensor


def test_signature_is_real_torch_npus():
    params = inspect.signature(HiFloat8Tensor).parameters
    assert [(p.name, p.kind.name) for p in params.values()] == [("data", "KEYWORD_ONLY"), ("dtype", "KEYWORD_ONLY")]
    assert params["dtype"].default is torch.float32
    assert HiFloat8Tensor is _HiFloat8Tensor
    for name in ("to_hifloat8", "from_hifloat8", "make_like", "float", "bfloat16", "half", "cpu", "clone", "view",
                 "reshape", "contiguous", "transpose", "to_dtype"):
        assert callable(getattr(HiFloat8Tensor, name))
    assert list(inspect.signature(HiFloat8Tensor.contiguous).parameters) == ["self", "memory_format"]
    assert torch_npu.hifloat8 == 256 + 34  # the dtype constant the codes stand for (ACL's 34)
    if hasattr(torch_npu, "HiFloat8Tensor"):  # once torch_npu exports it
        assert torch_npu.HiFloat8Tensor is HiFloat8Tensor


@pytest.mark.parametrize("device", ["cpu", "npu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_to_hifloat8_round_trip_equals_codec(device, dtype):
    x = (torch.randn(6, 8, generator=torch.Generator().manual_seed(2)) * 20).to(dtype)
    h = HiFloat8Tensor.to_hifloat8(x.to(device))
    assert isinstance(h, HiFloat8Tensor) and h.dtype == dtype and h.shape == x.shape
    assert h.device.type == "npu" and h._data.dtype == torch.uint8 and h._data.device.type == "npu"
    assert torch.equal(h._data.cpu(), ref_encode(x.float().reshape(-1)).reshape(x.shape))
    expected = torch.tensor([REF[c] for c in h._data.cpu().reshape(-1).tolist()]).reshape(x.shape)
    assert h.from_hifloat8().dtype == dtype and same_values(h.from_hifloat8(), expected)
    assert h.float().dtype == torch.float32 and same_values(h.float(), expected)
    assert h.half().dtype == torch.float16 and h.bfloat16().dtype == torch.bfloat16
    assert same_values(h.half(), expected) and same_values(h.bfloat16(), expected)  # HiFloat8 fits both exactly
    cpu = h.cpu()
    assert type(cpu) is torch.Tensor and cpu.device.type == "cpu" and cpu.dtype == dtype
    assert "HiFloat8Tensor(data=" in repr(h)


def test_to_hifloat8_other_dtypes_go_through_float32():
    h = HiFloat8Tensor.to_hifloat8(torch.tensor([1, 2, 3, 1000]))
    assert h.dtype == torch.float32 and h.float().tolist() == [1.0, 2.0, 3.0, 1024.0]
    h = HiFloat8Tensor.to_hifloat8(torch.tensor([0.3], dtype=torch.float64))
    assert h.dtype == torch.float32 and h._data.tolist() == [0x32]


def test_constructor_and_make_like():
    codes = torch.tensor([[0x08, 0x95], [0x6E, 0x80]], dtype=torch.uint8)
    h = HiFloat8Tensor(data=codes, dtype=torch.bfloat16)
    assert h.dtype == torch.bfloat16 and h.device.type == "npu" and h._data.device.type == "npu"
    assert same_values(h.float(), torch.tensor([[1.0, -3.25], [32768.0, NAN]]))
    assert HiFloat8Tensor(data=codes).dtype == torch.float32
    m = HiFloat8Tensor.make_like(h, data=codes.npu().flip(0))
    assert m.dtype == torch.bfloat16 and same_values(m.float(), torch.tensor([[32768.0, NAN], [1.0, -3.25]]))
    assert HiFloat8Tensor.make_like(h, data=codes, dtype=torch.float16).dtype == torch.float16
    t = h.to_dtype(torch.float32)
    assert t.dtype == torch.float32 and t._data is h._data
    with pytest.raises(ValueError, match="8-bit"):
        HiFloat8Tensor(data=torch.zeros(3))
    with pytest.raises(ValueError, match="non-differentiable"):
        HiFloat8Tensor(data=torch.zeros(3, dtype=torch.float8_e4m3fn, requires_grad=True))
    with pytest.raises(ValueError, match="floating-point"):
        HiFloat8Tensor(data=codes, dtype=torch.int32)


def test_clone_view_reshape_transpose_contiguous():
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 4
    h = HiFloat8Tensor.to_hifloat8(x)
    vals = h.float().cpu()
    c = h.clone()
    assert isinstance(c, HiFloat8Tensor) and c._data.data_ptr() != h._data.data_ptr()
    assert torch.equal(c.float().cpu(), vals)
    v = h.view(2, 12)
    assert isinstance(v, HiFloat8Tensor) and v.shape == (2, 12) and v._data.data_ptr() == h._data.data_ptr()
    assert torch.equal(v.float().cpu(), vals.view(2, 12))
    r = h.reshape(-1)
    assert isinstance(r, HiFloat8Tensor) and torch.equal(r.float().cpu(), vals.reshape(-1))
    t = h.transpose(0, 1)
    assert isinstance(t, HiFloat8Tensor) and t.shape == (6, 4) and not t._data.is_contiguous()
    assert torch.equal(t.float().cpu(), vals.t())
    tc = t.contiguous()
    assert isinstance(tc, HiFloat8Tensor) and tc._data.is_contiguous() and torch.equal(tc.float().cpu(), vals.t())
    assert h.contiguous() is h
    assert torch.equal(t.reshape(24).float().cpu(), vals.t().reshape(24))


def test_dispatch_slice_view_detach_keep_the_codes():
    h = HiFloat8Tensor.to_hifloat8(torch.arange(12, dtype=torch.float32).reshape(3, 4))
    s = h[1:, 1:3]  # aten.slice
    assert isinstance(s, HiFloat8Tensor) and s.shape == (2, 2)
    assert s.float().tolist() == [[5.0, 6.0], [9.0, 10.0]]
    s.copy_(torch.tensor([[-1.0, -2.0], [-3.0, -4.0]]))  # writes through into h's codes
    assert h.float()[1:, 1:3].tolist() == [[-1.0, -2.0], [-3.0, -4.0]]
    d = h.detach()
    assert isinstance(d, HiFloat8Tensor) and d._data.data_ptr() == h._data.data_ptr()
    data = h.data
    assert isinstance(data, HiFloat8Tensor) and data._data.data_ptr() == h._data.data_ptr()
    v = torch.ops.aten.view.default(h, [4, 3])
    assert isinstance(v, HiFloat8Tensor) and v.float().reshape(-1).tolist() == h.float().reshape(-1).tolist()


def test_dispatch_copy_between_hifloat8_and_plain_tensors():
    a = HiFloat8Tensor.to_hifloat8(torch.tensor([1.0, 2.0, 3.0]))
    b = HiFloat8Tensor.to_hifloat8(torch.tensor([0.3, -7.75, 1e5]))
    a.copy_(b)  # codes copied
    assert a._data.tolist() == b._data.tolist() == [0x32, 0xA8, 0x6E]
    plain = torch.zeros(3)
    plain.copy_(b)  # decoded
    assert plain.tolist() == [0.3125, -8.0, 32768.0]
    plain_npu = torch.zeros(3, dtype=torch.bfloat16).npu()
    plain_npu.copy_(b)
    assert plain_npu.float().cpu().tolist() == [0.3125, -8.0, 32768.0]
    a.copy_(torch.tensor([1.0625, 0.96875, -INF]))  # encoded
    assert a._data.tolist() == [0x09, 0x08, 0xEF]
    a.copy_(torch.tensor(5.5))  # broadcast
    assert a.float().tolist() == [5.5] * 3
    a.data = torch.tensor([0.0, -0.0, NAN])
    assert a._data.tolist() == [0x00, 0x00, 0x80]


def test_dispatch_other_ops_run_on_the_values():
    x = torch.tensor([[1.1, -2.3], [40.0, 0.3]])
    h = HiFloat8Tensor.to_hifloat8(x.npu())
    vals = h.float()
    y = h * 2 + 1
    assert type(y) is torch.Tensor and y.device.type == "npu" and torch.equal(y, vals * 2 + 1)
    assert torch.equal(torch.matmul(h, h), torch.matmul(vals, vals))
    assert torch.equal(h.sum(), vals.sum()) and torch.equal(h[0], vals[0])
    moved = h.to(device="cpu")
    assert type(moved) is torch.Tensor and torch.equal(moved, vals.cpu())
    # in-place: computed on the values, written back re-encoded, the HiFloat8Tensor returned
    r = h.mul_(3)
    assert r is h and h.float().cpu().tolist() == [[3.5, -7.0], [128.0, 0.9375]]  # 3.375: a tie, away
    torch.add(vals, 0.1, out=h)  # out= writes back too
    assert torch.equal(h._data.cpu(), ref_encode((vals + 0.1).cpu().reshape(-1)).reshape(2, 2))
    a, b = HiFloat8Tensor.to_hifloat8(torch.tensor([1.0, 2.0])), HiFloat8Tensor.to_hifloat8(torch.tensor([3.0, 5.0]))
    torch._foreach_mul_([a, b], 3.0)  # a written Tensor(a!)[] list
    assert a.float().tolist() == [3.0, 6.0] and b.float().tolist() == [9.0, 15.0]
    h_half = HiFloat8Tensor.to_hifloat8(x.half())
    assert (h_half + 0).dtype == torch.float16


def test_autograd_passes_gradients_through_the_casts():
    x = torch.randn(3, 4, requires_grad=True)
    h = HiFloat8Tensor.to_hifloat8(x)
    assert h.requires_grad
    w = torch.arange(12.0).reshape(4, 3).npu()
    (h.view(4, 3).float() * w).sum().backward()
    assert x.grad.device.type == "cpu" and torch.equal(x.grad, w.cpu().reshape(3, 4))
    x.grad = None
    HiFloat8Tensor.to_hifloat8(x).transpose(0, 1).float().sum().backward()
    assert torch.equal(x.grad, torch.ones(3, 4))


def test_pickling_keeps_codes_and_nominal_dtype():
    h = HiFloat8Tensor.to_hifloat8(torch.tensor([[0.3, -1e-6], [INF, 224.0]], dtype=torch.bfloat16))
    buf = io.BytesIO()
    torch.save({"exp_avg": h}, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)["exp_avg"]
    assert isinstance(loaded, HiFloat8Tensor) and loaded.dtype == torch.bfloat16 and loaded.device.type == "npu"
    assert torch.equal(loaded._data.cpu(), h._data.cpu())
    p = pickle.loads(pickle.dumps(h))
    assert isinstance(p, HiFloat8Tensor) and torch.equal(p._data.cpu(), h._data.cpu())
    c = copy.deepcopy(h)
    assert isinstance(c, HiFloat8Tensor) and torch.equal(c._data.cpu(), h._data.cpu())
    assert c._data.data_ptr() != h._data.data_ptr()


def test_mindspeed_quant_adamw_usage():
    """MindSpeed's low-precision AdamW (hif8_15 / hif8_224): state = to_hifloat8(scaled), state.meta = scale
    metadata; each step dequantises with .float(), runs fused AdamW in float32 and requantises through
    state.data.copy_(to_hifloat8(...))."""
    torch.manual_seed(0)
    param = torch.randn(4, 64).npu()
    grad = torch.randn(4, 64).npu() * 1e-2

    def quantise(t, fp8_max):
        scale = fp8_max / t.abs().amax().clamp(min=1e-30)
        q = HiFloat8Tensor.to_hifloat8((t * scale).contiguous())
        return q, scale

    exp_avg, s1 = quantise(torch.zeros(4, 64).npu(), 15.0)
    exp_avg_sq, s2 = quantise(torch.zeros(4, 64).npu(), 224.0)
    exp_avg.meta = "hif8_15"
    assert isinstance(exp_avg.data, HiFloat8Tensor) and exp_avg.meta == "hif8_15"
    ref_m, ref_v = torch.zeros(4, 64), torch.zeros(4, 64)
    ref_p = param.cpu().clone()
    step = torch.tensor(0.0).npu()
    for _ in range(3):
        step += 1
        m32, v32 = exp_avg.float() / s1, exp_avg_sq.float() / s2
        torch._fused_adamw_([param], [grad], [m32], [v32], [], [step], lr=1e-3, beta1=0.9, beta2=0.999,
                            weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
        q1, s1 = quantise(m32, 15.0)
        q2, s2 = quantise(v32, 224.0)
        exp_avg.data.copy_(q1)
        exp_avg_sq.data.copy_(q2)
        # the stored state is exactly the rounded scaled float32 state
        assert torch.equal(exp_avg._data.cpu().reshape(-1), ref_encode((m32 * s1).cpu().reshape(-1)))
        assert torch.equal(exp_avg_sq._data.cpu().reshape(-1), ref_encode((v32 * s2).cpu().reshape(-1)))
        ref_m = 0.9 * ref_m + 0.1 * grad.cpu()
        ref_v = 0.999 * ref_v + 0.001 * grad.cpu() ** 2
    assert isinstance(exp_avg, HiFloat8Tensor) and exp_avg.meta == "hif8_15"
    # HiFloat8 keeps 1-3 mantissa bits (up to 1/16 to 1/4 relative error per rounding, three roundings)
    assert ((exp_avg.float().cpu() / s1.cpu() - ref_m).abs() <= ref_m.abs() * 0.2 + 1e-9).all()
    assert ((exp_avg_sq.float().cpu() / s2.cpu() - ref_v).abs() <= ref_v.abs() * 0.4 + 1e-12).all()
    assert (param.cpu() - ref_p).abs().max() > 0
