"""torch_npu.op_plugin.quant: npu_quant_matmul, npu_weight_quant_batchmatmul and npu_ifmr
against their integer formulas (or real torch_npu's search), with bad input."""

import pytest
import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen


def randint8(*shape, seed=0):
    return torch.randint(-128, 128, shape, generator=gen(seed), dtype=torch.int8)


def pack_int4(x):
    """(..., 8 m) int8 in [-8, 7] -> (..., m) int32, lowest nibble first."""
    nib = (x.to(torch.int64) & 0xF).reshape(*x.shape[:-1], -1, 8)
    word = (nib << torch.arange(0, 32, 4)).sum(-1)
    return torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)


def qmm_reference(x1, x2, scale, offset=None, pertoken=None, bias=None, out=None):
    acc = x1.to(torch.int64) @ x2.to(torch.int64)  # exact int accumulation
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + bias
    y = acc.float() * scale
    if pertoken is not None:
        y = y * pertoken[:, None]
    if bias is not None and bias.dtype != torch.int32:
        y = y + bias.float()
    if offset is not None:
        y = y + offset
    if out in (None, torch.int8):
        return torch.round(y).clamp(-128, 127).to(torch.int8)
    return y.to(out)


@pytest.mark.parametrize("out", [None, torch.int8, torch.float16, torch.bfloat16])
def test_quant_matmul_matches_integer_formula(out):
    x1, x2 = randint8(5, 64, seed=1), randint8(64, 7, seed=2)
    scale = torch.rand(7, generator=gen(3)) * 1e-3
    bias = torch.randint(-1000, 1000, (7,), generator=gen(4), dtype=torch.int32)
    offset = torch.rand(7, generator=gen(5)) * 4 if out in (None, torch.int8) else None
    got = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), offset=None if offset is None else offset.npu(),
                                     bias=bias.npu(), output_dtype=out)
    assert got.device.type == "npu" and got.dtype == (out or torch.int8)
    assert_close(got.cpu(), qmm_reference(x1, x2, scale, offset, bias=bias, out=out))


def test_quant_matmul_pertoken_float_bias_batched_and_int64_scale():
    x1, x2 = randint8(2, 4, 32, seed=6), randint8(32, 8, seed=7)
    scale = torch.rand(8, generator=gen(8)) * 1e-2
    pertoken = torch.rand(4, generator=gen(9))
    bias = torch.randn(8, generator=gen(10)).to(torch.bfloat16)
    got = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), pertoken_scale=pertoken.npu(),
                                     bias=bias.npu(), output_dtype=torch.bfloat16)
    ref = torch.stack([qmm_reference(x1[i], x2, scale, pertoken=pertoken, bias=bias, out=torch.bfloat16)
                       for i in range(2)])
    assert_close(got.cpu(), ref)
    # npu_trans_quant_param's int64 form: the float32 bits in the low word.
    scale64 = scale.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    got = torch_npu.npu_quant_matmul(x1[0].npu(), x2.npu(), scale64.npu(), output_dtype=torch.float16)
    assert_close(got.cpu(), qmm_reference(x1[0], x2, scale, out=torch.float16))


def test_quant_matmul_int4_packed():
    x1 = torch.randint(-8, 8, (3, 16), generator=gen(11), dtype=torch.int8)
    x2 = torch.randint(-8, 8, (16, 8), generator=gen(12), dtype=torch.int8)
    scale = torch.tensor([0.05])
    # x2 (k, n) packs along n, x1 (m, k) along k.
    got = torch_npu.npu_quant_matmul(pack_int4(x1).npu(), pack_int4(x2).npu(), scale.npu(),
                                     output_dtype=torch.float16)
    assert_close(got.cpu(), qmm_reference(x1, x2, scale, out=torch.float16))
    # x2 as (k // 8, n): the transpose of a contiguous (n, k // 8), packed along k.
    x2_t = pack_int4(x2.t().contiguous()).t()
    assert x2_t.shape == (2, 8)
    got = torch_npu.npu_quant_matmul(pack_int4(x1).npu(), x2_t.npu(), scale.npu(), output_dtype=torch.float16)
    assert_close(got.cpu(), qmm_reference(x1, x2, scale, out=torch.float16))


def test_quant_matmul_bad_input():
    x1, x2, s = randint8(2, 4).npu(), randint8(4, 3).npu(), torch.ones(3).npu()
    with pytest.raises(RuntimeError, match="both int8 or both int32"):
        torch_npu.npu_quant_matmul(x1.float(), x2, s)
    with pytest.raises(RuntimeError, match="k dimension"):
        torch_npu.npu_quant_matmul(x1, randint8(5, 3).npu(), s)
    with pytest.raises(RuntimeError, match="scale should have shape"):
        torch_npu.npu_quant_matmul(x1, x2, torch.ones(2).npu())
    with pytest.raises(RuntimeError, match="offset is only supported"):
        torch_npu.npu_quant_matmul(x1, x2, s, offset=s, output_dtype=torch.float16)
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        torch_npu.npu_quant_matmul(x1, x2, s, output_dtype=torch.float32)
    with pytest.raises(RuntimeError, match="scale should be int64, float32 or bfloat16"):
        torch_npu.npu_quant_matmul(x1, x2, s.half())
    with pytest.raises(RuntimeError, match="int32 bias or none"):
        torch_npu.npu_quant_matmul(x1, x2, s, bias=torch.ones(3).npu(), output_dtype=torch.int32)
    with pytest.raises(RuntimeError, match="no offset and no pertoken_scale"):
        torch_npu.npu_quant_matmul(x1, x2, s, pertoken_scale=torch.ones(2).npu(), output_dtype=torch.int32)


def test_quant_matmul_int32_output_is_the_accumulator():
    # CANN: with int8 inputs and an int32 output the scales take no part: x1 @ x2 (+ int32 bias).
    x1, x2 = randint8(3, 40), randint8(40, 5)
    bias = torch.randint(-1000, 1000, (5,), dtype=torch.int32)
    want = x1.int() @ x2.int() + bias
    scale = torch.full((5,), 0.25)
    got = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), bias=bias.npu(), output_dtype=torch.int32)
    assert got.dtype == torch.int32 and torch.equal(got.cpu(), want)
    got = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.bfloat16().npu(), output_dtype=torch.int32)
    assert torch.equal(got.cpu(), x1.int() @ x2.int())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_weight_quant_batchmatmul_per_channel(dtype):
    x = torch.randn(3, 5, 64, generator=gen(20)).to(dtype)
    w = randint8(64, 16, seed=21)
    scale = (torch.rand(16, generator=gen(22)) * 0.01).to(dtype)
    offset = torch.randn(16, generator=gen(23)).to(dtype)
    bias = torch.randn(16, generator=gen(24)).to(dtype)
    got = torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.npu(), scale.npu(), antiquant_offset=offset.npu(),
                                                 bias=bias.npu())
    wf = (w.to(dtype) + offset) * scale
    ref = (x.float() @ wf.float() + bias.float()).to(dtype)
    assert got.dtype == dtype
    assert_close(got.cpu(), ref)


def test_weight_quant_batchmatmul_per_group_and_requant():
    k, n, g = 96, 8, 32
    x = torch.randn(4, k, generator=gen(25)).half()
    w = randint8(k, n, seed=26)
    scale = (torch.rand(k // g, n, generator=gen(27)) * 0.01).half()
    wf = w.half() * scale.repeat_interleave(g, 0)
    got = torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.npu(), scale.npu(), antiquant_group_size=g)
    assert_close(got.cpu(), (x.float() @ wf.float()).half())
    qs = torch.full((n,), 4.0)
    got = torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.npu(), scale.npu(), quant_scale=qs.npu(),
                                                 antiquant_group_size=g)
    assert got.dtype == torch.int8
    assert_close(got.cpu(), torch.round((x.float() @ wf.float()) * 4).clamp(-128, 127).to(torch.int8))


def test_weight_quant_batchmatmul_bad_input():
    x, w, s = torch.randn(2, 64).half().npu(), randint8(64, 4).npu(), torch.ones(4).half().npu()
    with pytest.raises(RuntimeError, match="last dimension of x"):
        torch_npu.npu_weight_quant_batchmatmul(torch.randn(2, 32).half().npu(), w, s)
    with pytest.raises(RuntimeError, match="antiquant_group_size should be"):
        torch_npu.npu_weight_quant_batchmatmul(x, w, s, antiquant_group_size=20)
    with pytest.raises(RuntimeError, match="should have shape \\(2, 4\\)"):
        torch_npu.npu_weight_quant_batchmatmul(x, w, torch.ones(3, 4).half().npu(), antiquant_group_size=32)


def ifmr_reference(x, dmin, dmax, cumsum, bins, min_p, max_p, start, end, step, with_offset):
    """Real torch_npu's test formula, one search step at a time."""
    cdf = cumsum.float() / x.numel()
    max_init = (cdf < max_p).sum() / bins * (dmax - dmin) + dmin
    min_init = (cdf < 1 - min_p).sum() / bins * (dmax - dmin) + dmin
    steps = torch.arange(start, end, step)
    best = None
    for f in steps.tolist():
        if with_offset:
            hi, lo = max(float(max_init), 0.0) * f, min(float(min_init), 0.0)
            scale = (hi - lo) / 255
            scale = 1.0 if scale < 1.192092896e-07 else scale
            offset = -(round(lo / scale) + 128)
        else:
            scale = max(abs(float(max_init)), abs(float(min_init))) * f / 127
            offset = 0.0
        s32 = torch.tensor(scale, dtype=torch.float32)
        q = (torch.round(x / s32) + offset).clamp(-128, 127)
        loss = float(((q - offset) * s32 - x).square().sum())
        if best is None or loss < best[0]:
            best = (loss, float(s32), float(offset))
    return best[1], best[2]


@pytest.mark.parametrize("with_offset", [False, True])
def test_ifmr_matches_search(with_offset):
    x = torch.rand(2, 2, 4, 4, generator=gen(30)) * 2 - 0.7
    dmin, dmax = x.min().reshape(1), x.max().reshape(1)
    cumsum = torch.cumsum(torch.histc(x, bins=128, min=float(dmin), max=float(dmax)), 0).int()
    scale, offset = torch_npu.npu_ifmr(x.npu(), dmin.npu(), dmax.npu(), cumsum.npu(), 0.999999, 0.999999,
                                       0.7, 1.3, 0.01, with_offset)
    assert scale.shape == (1,) and offset.shape == (1,)
    ref_scale, ref_offset = ifmr_reference(x, dmin, dmax, cumsum, 128, 0.999999, 0.999999, 0.7, 1.3, 0.01,
                                           with_offset)
    assert_close(scale.cpu().item(), ref_scale, rtol=1e-5, atol=1e-7)
    assert offset.cpu().item() == ref_offset


def test_trans_quant_param_packs_fp19_scale_and_offset_bits():
    scale = torch.tensor([1.0, 0.123456789, -2.5])
    out = torch_npu.npu_trans_quant_param(scale.npu()).cpu()
    bits = scale.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    assert out.dtype == torch.int64
    assert torch.equal(out, (bits & 0xFFFFE000) | (1 << 46))
    rounded = torch_npu.npu_trans_quant_param(scale.npu(), round_mode=1).cpu()
    low = rounded & 0xFFFFFFFF
    as_float = torch.where(low >= 2 ** 31, low - 2 ** 32, low).to(torch.int32).view(torch.float32)
    assert (as_float - scale).abs().max() <= scale.abs().max() * 2 ** -11  # 10 mantissa bits kept, rounded
    with_offset = torch_npu.npu_trans_quant_param(scale.npu(), torch.tensor([3.4, -300.0, 7.6]).npu()).cpu()
    assert ((with_offset >> 37) & 0x1FF).tolist() == [3, (-256) & 0x1FF, 8]
    # npu_quant_matmul reads the packed scale.
    x1, x2 = randint8(4, 32, seed=1), randint8(32, 8, seed=2)
    y = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), out[:1].npu(), output_dtype=torch.float16)
    want = (x1.int() @ x2.int()).float() * 1.0
    assert_close(y.float().cpu(), want.half().float())
    with pytest.raises(RuntimeError, match="scale should be float32"):
        torch_npu.npu_trans_quant_param(scale.double().npu())


def test_convert_weight_to_int4pack_packs_eight_per_int32():
    w = torch.randint(-8, 8, (16, 32), generator=gen(3), dtype=torch.int32)
    packed = torch_npu.npu_convert_weight_to_int4pack(w.npu()).cpu()
    assert packed.dtype == torch.int32 and packed.shape == (16, 4)
    assert torch.equal(packed, pack_int4(w.to(torch.int8)))
    with pytest.raises(RuntimeError, match="int4"):
        torch_npu.npu_convert_weight_to_int4pack((w * 4).npu())
