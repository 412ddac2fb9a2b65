"""npu_hans_encode / npu_hans_decode (torch_npu/op_plugin/hans.py): lossless round trips, the pdf, the
mantissa layout, schemas, argument checks, MindSpeed's calls."""

import math

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.op_plugin import hans

ENCODE_SCHEMA = ("npu::npu_hans_encode.out(Tensor input, bool statistic=False, bool reshuff=False, *, "
                 "Tensor(a!) pdf, Tensor(b!) mantissa, Tensor(c!) fixed, Tensor(d!) var) -> "
                 "(Tensor(a!), Tensor(b!), Tensor(c!), Tensor(d!))")
DECODE_SCHEMA = ("npu::npu_hans_decode.out(Tensor mantissa, Tensor fixed, Tensor var, Tensor pdf, "
                 "bool reshuff=False, *, Tensor(a!) out) -> Tensor(a!)")
INTS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
N = 32768  # the smallest size the operators take


def buffers(x, fixed_bytes=None, var_bytes=None):
    """pdf, mantissa, fixed, var as op-plugin's example allocates them (fixed and var: numel elements each)."""
    n, es = x.numel(), x.element_size()
    pdf = torch.zeros(256, dtype=torch.int32, device=x.device)
    mantissa = torch.zeros(n * (es - 1) // es, dtype=x.dtype, device=x.device)
    fixed = torch.zeros(n if fixed_bytes is None else fixed_bytes // es, dtype=x.dtype, device=x.device)
    var = torch.zeros(n if var_bytes is None else var_bytes // es, dtype=x.dtype, device=x.device)
    return pdf, mantissa, fixed, var


def round_trip(x, statistic=True, reshuff=False, bufs=None):
    pdf, mantissa, fixed, var = bufs or buffers(x)
    got = hans.npu_hans_encode(x, statistic, reshuff, out=(pdf, mantissa, fixed, var))
    assert got[0] is pdf and got[1] is mantissa and got[2] is fixed and got[3] is var
    out = torch.full_like(x, 7.0)
    back = hans.npu_hans_decode(mantissa, fixed, var, pdf, reshuff, out=out)
    assert back is out
    return out, (pdf, mantissa, fixed, var)


def bits(t):
    return t.view(INTS[t.dtype]).cpu()


def exponent_bytes(x):
    """The 8 bits after the sign of each element (plain formula)."""
    width = 8 * x.element_size()
    u = x.view(INTS[x.dtype]).cpu().reshape(-1).long() & ((1 << width) - 1)
    return (u >> (width - 9)) & 0xFF


def test_schemas_are_op_plugins():
    assert str(torch.ops.npu.npu_hans_encode.out._schema) == ENCODE_SCHEMA
    assert str(torch.ops.npu.npu_hans_decode.out._schema) == DECODE_SCHEMA


@pytest.mark.parametrize("reshuff", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_random_round_trip_is_bit_exact(device, dtype, reshuff):
    x = torch.randn(64, 512, generator=torch.Generator().manual_seed(0)).to(dtype).to(device)
    out, (pdf, mantissa, fixed, var) = round_trip(x, reshuff=reshuff)
    assert out.device == x.device and torch.equal(bits(out), bits(x))
    # statistic=True: pdf is the count of each exponent byte
    assert pdf.dtype == torch.int32 and torch.equal(pdf.cpu(), torch.bincount(exponent_bytes(x), minlength=256).int())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_every_16_bit_pattern(dtype):
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype).npu()  # NaN payloads, -0.0, ...
    out, _ = round_trip(x)
    assert torch.equal(bits(out), bits(x))


def test_float32_special_values_and_random_bit_patterns():
    g = torch.Generator().manual_seed(1)
    u = torch.randint(-2 ** 31, 2 ** 31, (N,), generator=g, dtype=torch.int64).to(torch.int32)
    x = u.view(torch.float32)
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, -1e-45, 1e-40,
                             torch.finfo(torch.float32).max, torch.finfo(torch.float32).tiny, 1.0, -1.0])
    x[:specials.numel()] = specials
    x.view(torch.int32)[20] = 0x7FC12345  # a NaN payload
    x.view(torch.int32)[21] = -0x00123457  # a negative NaN payload (0xFFEDCBA9)
    for device in ("cpu", "npu"):
        out, _ = round_trip(x.to(device))
        assert torch.equal(bits(out), x.view(torch.int32))


def test_zeros_and_constant_data():
    for x in (torch.zeros(N), torch.full((N,), -0.0, dtype=torch.bfloat16), torch.full((N,), 3.0).half()):
        out, (pdf, _, fixed, _) = round_trip(x.npu())
        assert torch.equal(bits(out), bits(x))
        assert int(pdf.max()) == N


def test_mantissa_holds_the_sign_and_low_bits_element_by_element():
    x = torch.randn(N, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    _, (_, mantissa, _, _) = round_trip(x)
    u = x.view(torch.int16).long() & 0xFFFF
    expected = ((u >> 15) << 7) | (u & 0x7F)
    assert torch.equal(mantissa.view(torch.uint8).long(), expected)
    y = torch.randn(N, generator=torch.Generator().manual_seed(3))
    _, (_, mantissa, _, _) = round_trip(y)
    u = y.view(torch.int32).long() & 0xFFFFFFFF
    low = ((u >> 31) << 23) | (u & 0x7FFFFF)
    got = mantissa.view(torch.uint8).long().view(N, 3)
    assert torch.equal(got[:, 0] | (got[:, 1] << 8) | (got[:, 2] << 16), low)


def test_code_is_compact_for_gaussian_data():
    """Exponent bytes of N(0, 1) data need about 3 bits: the code fits in fixed at MindSpeed's ratio 0.5."""
    x = torch.randn(N, generator=torch.Generator().manual_seed(4))
    bufs = buffers(x, fixed_bytes=N // 2, var_bytes=N)
    out, (_, _, _, var) = round_trip(x, bufs=bufs)
    assert torch.equal(bits(out), bits(x))
    assert not var.any()  # nothing spilled into var


def test_code_spills_from_fixed_into_var():
    x = torch.rand(N, generator=torch.Generator().manual_seed(5)) * torch.exp2(torch.randint(-126, 127, (N,)).float())
    bufs = buffers(x, fixed_bytes=1024, var_bytes=N)
    out, (_, _, _, var) = round_trip(x, bufs=bufs)
    assert torch.equal(bits(out), bits(x)) and var.any()


def test_statistic_false_uses_the_pdf_given():
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(N, generator=g).npu(), (torch.randn(N, generator=g) * 1e10).npu()
    bufs_a = buffers(a)
    pdf = bufs_a[0]
    round_trip(a, statistic=True, bufs=bufs_a)
    counts = pdf.clone()
    # b's exponents are nowhere near a's: coded with a's pdf it still round trips, and pdf stays as it was
    bufs_b = (pdf,) + buffers(b)[1:]
    out, _ = round_trip(b, statistic=False, bufs=bufs_b)
    assert torch.equal(bits(out), bits(b)) and torch.equal(pdf, counts)
    # an all-zero pdf: raw exponent bytes
    zero = torch.zeros(1, 256, dtype=torch.int32)
    out, _ = round_trip(a.cpu(), statistic=False, bufs=(zero,) + buffers(a.cpu())[1:])
    assert torch.equal(bits(out), bits(a)) and not zero.any()


def test_npu_and_cpu_write_the_same_bytes():
    x = torch.randn(128, 256, generator=torch.Generator().manual_seed(7)).half()
    _, cpu_bufs = round_trip(x)
    _, npu_bufs = round_trip(x.npu())
    for c, n in zip(cpu_bufs, npu_bufs):
        assert n.device.type == "npu" and torch.equal(c.view(torch.uint8), n.cpu().view(torch.uint8))


def test_strided_input_and_out():
    x = torch.randn(256, 128, generator=torch.Generator().manual_seed(8)).t()
    pdf, mantissa, fixed, var = buffers(x)
    hans.npu_hans_encode(x, True, False, out=[pdf, mantissa, fixed, var])
    out = torch.empty(256, 128).t()
    hans.npu_hans_decode(mantissa, fixed, var, pdf, False, out=out)
    assert torch.equal(out, x)
    torch.ops.npu.npu_hans_decode.out(mantissa, fixed, var, pdf, out=out)  # the op itself, reshuff by default


def test_mindspeed_tensor_manager_flow():
    """mindspeed/core/memory/compress: fixed sized by compress_ratio 0.5, var a swapped-memory tensor of
    numel / element_size elements, the activation's storage released after encode and restored before decode."""
    act = torch.randn(64, 1024, generator=torch.Generator().manual_seed(9)).to(torch.bfloat16).npu()
    ref = act.clone()
    n, es = act.numel(), act.element_size()
    fixed = torch.zeros((math.ceil(n * 0.5) // es + 1) // 2 * 2, dtype=act.dtype, device=act.device)
    mantissa = torch.zeros(n * (es - 1) // es, dtype=act.dtype, device=act.device)
    var = torch_npu.empty_with_swapped_memory(torch.Size([n // es]), dtype=act.dtype, device=act.device)
    var.zero_()
    pdf = torch.zeros(256, dtype=torch.int32, device=act.device)
    pdf, mantissa, fixed, var = hans.npu_hans_encode(act, True, False, out=(pdf, mantissa, fixed, var))
    act.untyped_storage().resize_(0)
    act.untyped_storage().resize_(n * es)
    act = hans.npu_hans_decode(mantissa, fixed, var, pdf, False, out=act)
    assert torch.equal(bits(act), bits(ref))


def test_decode_checks_the_code_matches():
    x = torch.randn(N, generator=torch.Generator().manual_seed(10))
    pdf, mantissa, fixed, var = buffers(x)
    hans.npu_hans_encode(x, True, False, out=(pdf, mantissa, fixed, var))
    out = torch.empty(N)
    with pytest.raises(RuntimeError, match="pdf is not the one"):
        other = pdf.clone()
        other[0] += 1
        hans.npu_hans_decode(mantissa, fixed, var, other, False, out=out)
    with pytest.raises(RuntimeError, match="reshuff"):
        hans.npu_hans_decode(mantissa, fixed, var, pdf, True, out=out)
    with pytest.raises(RuntimeError, match="no vNPU HANS code"):
        hans.npu_hans_decode(mantissa, torch.zeros_like(fixed), var, pdf, False, out=out)
    with pytest.raises(RuntimeError, match="other dtype or size"):  # the same bytes read as float16
        hans.npu_hans_decode(mantissa.view(torch.float16), fixed.view(torch.float16), var.view(torch.float16), pdf,
                             False, out=torch.empty(3 * N, dtype=torch.float16))
    with pytest.raises(RuntimeError, match="mantissa should hold"):
        hans.npu_hans_decode(mantissa, fixed, var, pdf, False, out=torch.empty(N + 64))


def test_bad_input():
    x = torch.randn(N)
    pdf, mantissa, fixed, var = buffers(x)

    def enc(inp=x, p=pdf, m=mantissa, f=fixed, v=var, reshuff=False):
        return hans.npu_hans_encode(inp, True, reshuff, out=(p, m, f, v))

    with pytest.raises(RuntimeError, match="input should be float16, bfloat16 or float32"):
        enc(inp=x.double())
    with pytest.raises(RuntimeError, match="multiple of 64 elements, at least 32768"):
        enc(inp=torch.randn(N - 64))
    with pytest.raises(RuntimeError, match="multiple of 64 elements"):
        enc(inp=torch.randn(N + 4))
    with pytest.raises(RuntimeError, match="pdf should be int32"):
        enc(p=pdf.long())
    with pytest.raises(RuntimeError, match=r"pdf should have shape \[1, 256\]"):
        enc(p=torch.zeros(255, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="mantissa should have the data's dtype"):
        enc(m=mantissa.half())
    with pytest.raises(RuntimeError, match="mantissa should hold numel"):
        enc(m=mantissa[:-1])
    with pytest.raises(RuntimeError, match="fixed should hold at least 512 bytes"):
        enc(f=torch.zeros(64))
    with pytest.raises(RuntimeError, match="fixed and var together should hold"):
        enc(f=torch.zeros(256), v=torch.zeros(N // 8))
    with pytest.raises(RuntimeError, match="with reshuff=True fixed should hold the whole code"):
        enc(f=torch.zeros(N // 4), reshuff=True)
    with pytest.raises(RuntimeError, match="var should be contiguous"):
        enc(v=torch.zeros(2 * N).view(N, 2)[:, 0])
    with pytest.raises(TypeError, match="out should be a tuple"):
        hans.npu_hans_encode(x, True, False, out=(pdf, mantissa))
    with pytest.raises(RuntimeError, match="out should be float16, bfloat16 or float32"):
        hans.npu_hans_decode(mantissa, fixed, var, pdf, False, out=torch.empty(N, dtype=torch.int32))


def test_torch_npu_bindings_take_out():
    if not hasattr(torch_npu, "npu_hans_encode"):
        pytest.skip("torch_npu does not export npu_hans_encode / npu_hans_decode yet")
    assert torch_npu.npu_hans_encode is hans.npu_hans_encode and torch_npu.npu_hans_decode is hans.npu_hans_decode
    x = torch.randn(N).npu()
    pdf, mantissa, fixed, var = torch_npu.npu_hans_encode(x, True, False, out=buffers(x))
    out = torch_npu.npu_hans_decode(mantissa, fixed, var, pdf, False, out=torch.empty_like(x))
    assert torch.equal(bits(out), bits(x))
