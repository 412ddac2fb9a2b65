"""The MX quantisers (torch_npu/op_plugin/mx_quant.py) against a reference written here:
block scales from log2 of the block maximum (frexp, float64), elements rounded by
searching the list of every value the element type holds (its codes decoded from the
bit patterns), scales placed block by block in the documented pair layout. Compared bit
for bit: the quantised codes and the E8M0 scale bytes."""
import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_npu
from op_plugin.inputs import gen

E4M3, E5M2, E2M1, E1M2 = "e4m3", "e5m2", "e2m1", "e1m2"
EMAX = {E4M3: 8, E5M2: 15, E2M1: 2, E1M2: 0}
DMAX = {E4M3: 448.0, E5M2: 57344.0, E2M1: 6.0, E1M2: 1.75}
DST = {E4M3: torch_npu.float8_e4m3fn, E5M2: torch_npu.float8_e5m2, E2M1: torch_npu.float4_e2m1fn_x2,
       E1M2: torch_npu.float4_e1m2fn_x2}
FP8 = {E4M3: torch.float8_e4m3fn, E5M2: torch.float8_e5m2}


def _grid(elem):
    """Non-negative finite values of the type, ascending; the index is the code."""
    if elem == E4M3:
        return torch.arange(127, dtype=torch.uint8).view(torch.float8_e4m3fn).double()  # 0x7f is NaN
    if elem == E5M2:
        return torch.arange(124, dtype=torch.uint8).view(torch.float8_e5m2).double()  # 0x7c is inf
    if elem == E2M1:
        return torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)
    return torch.arange(8, dtype=torch.float64) / 4


def _round_codes(v, elem, mode):
    """Codes of float64 ``v`` rounded to the element type (saturating); sign bit set for sign(v)."""
    grid = _grid(elem)
    a = v.abs()
    lo_i = (torch.searchsorted(grid, a.contiguous(), right=True) - 1).clamp(max=len(grid) - 1)
    hi_i = (lo_i + 1).clamp(max=len(grid) - 1)
    lo, hi = grid[lo_i], grid[hi_i]
    below, above = a - lo, hi - a
    negative = torch.signbit(v)
    if mode == "rint":
        up = (below > above) | ((below == above) & (lo_i % 2 == 1))
    elif mode == "round":
        up = below >= above
    else:
        up = negative & (below > 0)
    code = torch.where(up & (a < grid[-1]), hi_i, lo_i)
    sign_bit = 0x80 if elem in FP8 else 0x8
    return code | torch.where(negative, sign_bit, 0)


def _codes(y, elem):
    """The codes the op returned: float8 bits, or FP4 nibbles unpacked (low nibble first)."""
    y = y.cpu()
    if elem in FP8:
        return y.view(torch.uint8).long()
    y = y.long()
    return torch.stack([y & 0xF, y >> 4], -1).flatten(-2)


def _byte(amax, elem, alg=0, dmax=0.0, low=0.0):
    """E8M0 byte of a block with maximum |x| ``amax`` (float)."""
    if not math.isfinite(amax):
        return 255
    if amax == 0:
        return 0
    if alg == 0:
        mant, exp = math.frexp(amax)  # amax = mant * 2^exp, mant in [0.5, 1)
        return max(exp - 1 - EMAX[elem] + 127, 0)
    mant, exp = math.frexp(max(amax, low) / (dmax or DMAX[elem]))
    ceil_log2 = exp - 1 if mant == 0.5 else exp
    return min(max(ceil_log2 + 127, 0), 254)


def _block_codes(x, byte, elem, mode):
    """Codes of the float64 values ``x`` of one block with scale byte ``byte``."""
    if byte == 255:
        return torch.zeros(x.shape, dtype=torch.long)
    if byte == 0:  # zero reciprocal: signed zeros
        return torch.where(torch.signbit(x), 0x80 if elem in FP8 else 0x8, 0).long()
    return _round_codes(x * 2.0 ** (127 - byte), elem, mode)


def _ref_along(x, axis, elem, mode="rint", block=32, alg=0, dmax=0.0, low=0.0, amax_of=None):
    """Reference codes (x's shape) and scale bytes (pair layout) along ``axis``, block by block."""
    x64 = x.double()
    axis %= x.dim()
    n = x.shape[axis]
    nb = -(-n // block)
    codes = torch.zeros(x.shape, dtype=torch.long)
    scale_shape = list(x.shape)
    scale_shape[axis] = (nb + 1) // 2
    scale = torch.zeros(scale_shape + [2], dtype=torch.long)
    rest = [d for d in range(x.dim()) if d != axis]
    for b in range(nb):
        part = x64.narrow(axis, b * block, min(block, n - b * block))
        part_in = x.narrow(axis, b * block, min(block, n - b * block))
        indices = torch.cartesian_prod(*[torch.arange(x.shape[d]) for d in rest]).reshape(-1, len(rest)).tolist() \
            if rest else [[]]
        for index in indices:
            sel = [slice(None)] * x.dim()
            for d, i in zip(rest, index):
                sel[d] = i
            values = part[tuple(sel)]
            amax = values.abs().max().item() if amax_of is None else amax_of(part_in[tuple(sel)])
            byte = _byte(amax, elem, alg, dmax, low)
            out_sel = list(sel)
            out_sel[axis] = slice(b * block, b * block + values.shape[0])
            codes[tuple(out_sel)] = _block_codes(values, byte, elem, mode)
            scale_sel = list(sel)
            scale_sel[axis] = b // 2
            scale[tuple(scale_sel) + (b % 2,)] = byte
    return codes, scale


def _varied(shape, dtype, seed):
    """Normal values times powers of two varying element by element (blocks of many magnitudes)."""
    g = gen(seed)
    x = torch.randn(*shape, generator=g) * 2.0 ** torch.randint(-6, 7, shape, generator=g).float()
    return x.to(dtype)


def _check(y, scale, x, axis, elem, **kw):
    want_codes, want_scale = _ref_along(x, axis, elem, **kw)
    assert scale.dtype == torch.uint8 and tuple(scale.shape) == tuple(want_scale.shape)
    assert torch.equal(scale.cpu().long(), want_scale)
    if elem in FP8:
        assert y.dtype == FP8[elem] and y.shape == x.shape
    else:
        assert y.dtype == torch.uint8 and tuple(y.shape) == tuple(x.shape[:-1]) + (x.shape[-1] // 2,)
    assert torch.equal(_codes(y, elem), want_codes)


# ------------------------------------------------------------------ npu_dynamic_mx_quant


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("elem", [E4M3, E5M2, E2M1, E1M2])
@pytest.mark.parametrize("shape, axis, block", [((5, 70), -1, 32), ((3, 96, 6), 1, 32), ((2, 3, 130), -1, 64),
                                                ((70, 4), 0, 32)])
def test_dynamic_mx_quant_matches_reference(dtype, elem, shape, axis, block):
    x = _varied(shape, dtype, seed=sum(shape) + block)
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), axis=axis, dst_type=DST[elem], block_size=block)
    _check(y, scale, x, axis, elem, block=block)


def test_float8_dst_type_may_be_a_torch_dtype():
    x = _varied((4, 64), torch.bfloat16, seed=3)
    for dst, elem in ((torch.float8_e4m3fn, E4M3), (torch.float8_e5m2, E5M2)):
        y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=dst)
        _check(y, scale, x, -1, elem)


# Ties and saturation in a block of scale 1 (amax 7.5: 2^(2 - emax(e2m1)) = 1).
TIES = [7.5, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -2.5, -5.0, -0.1, 0.1, 0.0, -0.0, -7.5, 6.5]
WANT_E2M1 = {  # by hand: codes 0..7 are 0, .5, 1, 1.5, 2, 3, 4, 6; 8 is the sign
    "rint": [7, 0, 2, 2, 4, 4, 6, 6, 8, 10, 12, 14, 8, 0, 0, 8, 15, 7],
    "round": [7, 1, 2, 3, 4, 5, 6, 7, 9, 10, 13, 15, 8, 0, 0, 8, 15, 7],
    "floor": [7, 0, 1, 2, 3, 4, 5, 6, 9, 10, 13, 15, 9, 0, 0, 8, 15, 7],
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mode", ["rint", "round", "floor"])
def test_fp4_round_modes_ties_and_saturation(dtype, mode):
    x = torch.tensor(TIES + [0.0] * (32 - len(TIES)), dtype=dtype)
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=torch_npu.float4_e2m1fn_x2, round_mode=mode)
    assert scale.cpu().tolist() == [[127, 0]]
    assert _codes(y, E2M1)[:len(TIES)].tolist() == WANT_E2M1[mode]
    _check(y, scale, x, -1, E2M1, mode=mode)
    # float4_e1m2 (emax 0): the block's scale is 2^2, steps of 0.25 there.
    x = _varied((3, 64), dtype, seed=11)
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=torch_npu.float4_e1m2fn_x2, round_mode=mode)
    _check(y, scale, x, -1, E1M2, mode=mode)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("elem", [E4M3, E5M2])
def test_fp8_ties_round_to_even_and_saturate(dtype, elem):
    # amax 400 / 50000 gives scale 1 (emax 8 / 15); values between the type's neighbours.
    top = 448.0 if elem == E4M3 else 57344.0
    grid = _grid(elem)
    mids = ((grid[1:20] + grid[:19]) / 2).tolist() + [top * 1.07, -top * 1.07]
    x = torch.tensor(mids + [0.0] * (32 - len(mids)), dtype=torch.float64).to(dtype)
    x[-1] = 400.0 if elem == E4M3 else 50000.0
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=DST[elem])
    assert scale.cpu()[0, 0].item() == 127
    _check(y, scale, x, -1, elem)
    assert _codes(y, elem)[19:21].tolist() == [len(grid) - 1, 0x80 | (len(grid) - 1)]  # saturated


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("elem", [E4M3, E5M2])
def test_scale_alg_1_rounds_the_scale_up_with_max_low_bound(dtype, elem):
    x = _varied((4, 96), dtype, seed=7)
    x[0, :32] = 0  # all-zero block: byte 0 whatever the bound
    x[1, 32:64] *= 1e-3  # a block below the bound
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=DST[elem], scale_alg=1)
    _check(y, scale, x, -1, elem, alg=1)
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=DST[elem], scale_alg=1, max_low_bound=3.0)
    _check(y, scale, x, -1, elem, alg=1, low=3.0)


def _bf16_amax(t):
    """The kernel's dynamic-range block maximum: float16 values rounded to bfloat16."""
    return t.to(torch.bfloat16).double().abs().max().item()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dmax", [0.0, 7.0, 10.0])
def test_scale_alg_2_e2m1_dynamic_range(dtype, dmax):
    x = _varied((5, 64), dtype, seed=int(dmax) + 1)
    x[:4, :32] = torch.rand(4, 32, generator=gen(8)).to(dtype) - 0.5  # each first block led by the value below
    x[0, 0] = 1.5 * 2 ** 4  # mantissa 1.5: no extra exponent with dst max 6
    x[1, 0] = 1.5078125 * 2 ** 4  # just above 1.5 (bfloat16): one more
    x[2, 0] = 1.875 * 2 ** 4  # above 1.75: one more with dst max 7 as well
    if dtype == torch.float16:
        x[3, 0] = (1.5 + 2 ** -10) * 2 ** 4  # rounds to 1.5 in bfloat16: no extra exponent for 0 / 7
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=torch_npu.float4_e2m1fn_x2, scale_alg=2,
                                              dst_type_max=dmax)
    amax_of = _bf16_amax if dmax in (0.0, 7.0) else None
    _check(y, scale, x, -1, E2M1, alg=2, dmax=dmax or 6.0, amax_of=amax_of)
    # 24 / 6, 24.125 / 6 and 30 / 6 need 2^2, 2^3, 2^3; over 7: 2^2, 2^2, 2^3; over 10: 2^2, 2^2, 2^2.
    assert scale.cpu()[:3, 0, 0].tolist() == [129, 129 + (dmax == 0.0), 129 + (dmax != 10.0)]


def test_float32_input():
    x = _varied((3, 70), torch.float32, seed=5)
    for elem in (E4M3, E2M1):
        y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=DST[elem])
        _check(y, scale, x, -1, elem)


def test_zero_tiny_inf_and_nan_blocks():
    x = _varied((4, 64), torch.bfloat16, seed=9)
    x[0, :32] = 0
    x[1, :32] = torch.linspace(-1, 1, 32).bfloat16() * 2.0 ** -120  # amax below 2^(8 - 126): byte 0
    x[2, 5] = float("inf")
    x[3, 40] = float("nan")
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=torch.float8_e4m3fn)
    bytes_ = scale.cpu()[..., 0, 0].tolist() + [scale.cpu()[3, 0, 1].item()]
    assert bytes_ == [0, 0, 255, scale.cpu()[3, 0, 0].item(), 255]
    codes = _codes(y, E4M3)
    assert codes[0, :32].eq(0).all() and codes[2, :32].eq(0).all() and codes[3, 32:].eq(0).all()
    assert torch.equal(codes[1, :32], torch.where(x[1, :32] < 0, 0x80, 0))  # signed zeros
    assert codes[2, 32:].ne(0).any()  # the next block is unaffected
    _check(y, scale, x, -1, E4M3)


def test_cpu_tensors_give_the_npu_result():
    x = _varied((3, 6, 64), torch.bfloat16, seed=2)
    for kwargs in ({"axis": 1, "dst_type": torch_npu.float8_e4m3fn}, {"dst_type": torch_npu.float4_e2m1fn_x2}):
        on_cpu = torch_npu.npu_dynamic_mx_quant(x, **kwargs)
        on_npu = torch_npu.npu_dynamic_mx_quant(x.npu(), **kwargs)
        assert on_cpu[0].device.type == "cpu"
        for a, b in zip(on_cpu, on_npu):
            assert torch.equal(a.view(torch.uint8), b.cpu().view(torch.uint8))


def test_shapes_under_fake_tensors_and_compile():
    with FakeTensorMode():
        x = torch.empty(6, 100, 8, dtype=torch.float16)
        y, scale = torch.ops.npu.npu_dynamic_mx_quant(x, axis=1, dst_type=torch_npu.float4_e2m1fn_x2)
        assert y.shape == (6, 100, 4) and y.dtype == torch.uint8 and scale.shape == (6, 2, 8, 2)
        g = torch.ops.npu.npu_grouped_dynamic_mx_quant(torch.empty(130, 8, dtype=torch.bfloat16),
                                                       torch.empty(3, dtype=torch.int32))
        assert g[0].dtype == torch.float8_e5m2 and g[1].shape == (2 + 3, 8, 2)
    x = _varied((4, 96), torch.float16, seed=4).npu()
    f = torch.compile(lambda t: torch_npu.npu_dynamic_mx_quant(t, dst_type=torch_npu.float8_e4m3fn), backend="npu")
    for a, b in zip(f(x), torch_npu.npu_dynamic_mx_quant(x, dst_type=torch_npu.float8_e4m3fn)):
        assert torch.equal(a.cpu().view(torch.uint8), b.cpu().view(torch.uint8))


# ------------------------------------------------------------------ the other four


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("elem", [E4M3, E2M1])
def test_dual_axis_quantises_along_both_last_axes(dtype, elem):
    x = _varied((2, 40, 70), dtype, seed=12)
    y1, s1, y2, s2 = torch_npu.npu_dynamic_mx_quant_with_dual_axis(x.npu(), dst_type=DST[elem])
    _check(y1, s1, x, -1, elem)
    _check(y2, s2, x, -2, elem)
    assert s2.shape == (2, 1, 70, 2)


def test_dual_axis_scale_alg_2():
    x = _varied((64, 34), torch.bfloat16, seed=13)
    y1, s1, y2, s2 = torch_npu.npu_dynamic_mx_quant_with_dual_axis(x.npu(), scale_alg=2, dst_type_max=7.0)
    _check(y1, s1, x, -1, E2M1, alg=2, dmax=7.0)
    _check(y2, s2, x, -2, E2M1, alg=2, dmax=7.0)


def _ref_block(x, elem, mode="rint", alg=0, dmax=0.0):
    """Reference of the 32 x 32 tile op: codes, scale1 (per row), scale2 (per column)."""
    lead, (rows, cols) = x.shape[:-2], x.shape[-2:]
    nr, nc = -(-rows // 32), -(-cols // 32)
    x2 = x.reshape(-1, rows, cols)
    codes = torch.zeros(x2.shape, dtype=torch.long)
    s1 = torch.zeros(x2.shape[0], rows, (nc + 1) // 2, 2, dtype=torch.long)
    s2 = torch.zeros(x2.shape[0], (nr + 1) // 2, cols, 2, dtype=torch.long)
    for b in range(x2.shape[0]):
        for i in range(nr):
            for j in range(nc):
                tile = x2[b, i * 32:(i + 1) * 32, j * 32:(j + 1) * 32]
                amax = tile.double().abs().max().item()
                if alg == 2 and dmax in (0.0, 7.0):
                    amax = _bf16_amax(tile)
                byte = _byte(amax, elem, alg, dmax or 6.0)
                codes[b, i * 32:(i + 1) * 32, j * 32:(j + 1) * 32] = _block_codes(tile.double(), byte, elem, mode)
                s1[b, i * 32:(i + 1) * 32, j // 2, j % 2] = byte
                s2[b, i // 2, j * 32:(j + 1) * 32, i % 2] = byte
    return (codes.reshape(x.shape), s1.reshape(*lead, *s1.shape[1:]), s2.reshape(*lead, *s2.shape[1:]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("elem, shape", [(E4M3, (2, 40, 70)), (E5M2, (96, 64)), (E2M1, (2, 70, 34)),
                                         (E1M2, (33, 66))])
def test_block_mx_quant_shares_one_scale_per_tile(dtype, elem, shape):
    x = _varied(shape, dtype, seed=len(shape) + shape[-1])
    y, s1, s2 = torch_npu.npu_dynamic_block_mx_quant(x.npu(), dst_type=DST[elem])
    codes, w1, w2 = _ref_block(x, elem)
    assert torch.equal(s1.cpu().long(), w1) and torch.equal(s2.cpu().long(), w2)
    assert torch.equal(_codes(y, elem), codes)


def test_block_mx_quant_scale_alg_2_and_round_mode():
    x = _varied((40, 70), torch.float16, seed=21)
    y, s1, s2 = torch_npu.npu_dynamic_block_mx_quant(x.npu(), scale_alg=2, dst_type_max=7.0, round_mode="floor")
    codes, w1, w2 = _ref_block(x, E2M1, mode="floor", alg=2, dmax=7.0)
    assert torch.equal(s1.cpu().long(), w1) and torch.equal(s2.cpu().long(), w2)
    assert torch.equal(_codes(y, E2M1), codes)


def _ref_grouped(x, ends, elem, mode="rint", alg=0):
    m, n = x.shape
    pairs = m // 64 + len(ends)
    scale = torch.full((pairs, n, 2), 127, dtype=torch.long)  # pair rows no group writes
    codes = torch.zeros(m, n, dtype=torch.long)
    start = 0
    for g, end in enumerate(ends):
        first = start // 64 + g
        blocks = -(-(end - start) // 32)
        for j in range(blocks):
            lo, hi = start + 32 * j, min(start + 32 * (j + 1), end)
            for c in range(n):
                part = x[lo:hi, c].double()
                byte = _byte(part.abs().max().item(), elem, alg)
                scale[first + j // 2, c, j % 2] = byte
                codes[lo:hi, c] = _block_codes(part, byte, elem, mode)
        if blocks % 2:
            scale[first + blocks // 2, :, 1] = 0  # the odd block's pad
        start = end
    return codes, scale


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("elem, alg", [(E5M2, 0), (E4M3, 1), (E2M1, 0)])
def test_grouped_quantises_each_group_in_32_row_blocks(dtype, elem, alg):
    x = _varied((150, 6), dtype, seed=31)
    ends = [40, 40, 107, 150]  # an empty group, groups not aligned to 32 or 64
    y, scale = torch_npu.npu_grouped_dynamic_mx_quant(x.npu(), torch.tensor(ends, dtype=torch.int32).npu(),
                                                      dst_type=DST[elem], scale_alg=alg)
    codes, want = _ref_grouped(x, ends, elem, alg=alg)
    assert scale.dtype == torch.uint8 and scale.shape == (150 // 64 + 4, 6, 2)
    assert torch.equal(scale.cpu().long(), want)
    assert torch.equal(_codes(y, elem), codes)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mode", ["rint", "floor"])
def test_dual_level_scales_per_512_then_per_32(dtype, mode):
    x = _varied((3, 1100), dtype, seed=41)
    x[1, 7] = float("inf")  # left out of its 512-block's maximum; its 32-block becomes NaN (255)
    y, level0, level1 = torch_npu.npu_dynamic_dual_level_mx_quant(x.npu(), round_mode=mode)
    assert level0.dtype == torch.float32 and level0.shape == (3, 3) and y.shape == (3, 550)
    xf = x.float()
    temps, want0 = [], torch.zeros(3, 3)
    for k in range(3):
        part = xf[:, k * 512:(k + 1) * 512]
        finite = torch.where(part.abs() < float("inf"), part.abs(), 0)
        want0[:, k] = finite.amax(-1) * torch.tensor(1 / 6, dtype=torch.float32)
        temps.append(torch.where(part == 0, part, part / want0[:, k:k + 1]))
    assert torch.equal(level0.cpu(), want0)
    temp = torch.cat(temps, -1).to(dtype)
    _check(y, level1, temp, -1, E2M1, mode=mode)
    assert level1.cpu()[1, 0, 0].item() == 255


# ------------------------------------------------------------------ bad input


def _h(*shape):
    return torch.randn(*shape).half().npu()


_GI = torch.tensor([64], dtype=torch.int32)


@pytest.mark.parametrize("call, message", [
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), axis=2), "axis 2 is out of range"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), block_size=48), "block_size should be a positive multiple"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), block_size=2048), "block_size"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), dst_type=torch_npu.hifloat8),
     "dst_type torch_npu.hifloat8 is not supported"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), dst_type=1), "dst_type 1 is not supported"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64).double()), "input should be"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64).int()), "input should be"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), dst_type=torch_npu.float8_e4m3fn, round_mode="floor"),
     "round_mode should be 'rint' for dst_type float8_e4m3fn"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), round_mode="ceil"), "round_mode should be"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), scale_alg=3), "scale_alg should be one of"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), scale_alg=1), "scale_alg=1 is only for float8"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), dst_type=torch_npu.float8_e5m2, scale_alg=2),
     "scale_alg=2 is only for float4"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), dst_type=torch_npu.float4_e1m2fn_x2, scale_alg=2),
     "scale_alg=2 is only for torch_npu.float4_e2m1fn_x2"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), scale_alg=2, block_size=64), "block_size should be 32"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64).float(), block_size=64), "block_size should be 32"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), scale_alg=2, dst_type_max=5.0), "dst_type_max should be"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), dst_type=torch_npu.float8_e4m3fn, dst_type_max=6.0),
     "dst_type_max is only for"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), dst_type=torch_npu.float8_e4m3fn, max_low_bound=1.0),
     "max_low_bound should be 0.0 unless scale_alg=1"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 64), dst_type=torch_npu.float8_e4m3fn, scale_alg=1,
                                            max_low_bound=-1.0), "max_low_bound should be non-negative"),
    (lambda: torch_npu.npu_dynamic_mx_quant(_h(4, 63)), "last dimension of input should be even"),
    (lambda: torch_npu.npu_dynamic_mx_quant_with_dual_axis(_h(64)), "input should have 2 to 7 dimensions"),
    (lambda: torch_npu.npu_dynamic_mx_quant_with_dual_axis(_h(4, 64).float()), "input should be"),
    (lambda: torch_npu.npu_dynamic_mx_quant_with_dual_axis(_h(4, 64), dst_type_max=7.0), "dst_type_max is only"),
    (lambda: torch_npu.npu_dynamic_mx_quant_with_dual_axis(_h(4, 64), dst_type=24, scale_alg=2),
     "scale_alg=2 is only for float4"),
    (lambda: torch_npu.npu_dynamic_block_mx_quant(_h(2, 2, 4, 64)), "input should be 2-D or 3-D"),
    (lambda: torch_npu.npu_dynamic_block_mx_quant(_h(4, 64), scale_alg=1, dst_type=24),
     "scale_alg should be one of \\[0, 2\\]"),
    (lambda: torch_npu.npu_dynamic_block_mx_quant(_h(4, 64), scale_alg=2, dst_type_max=8.0),
     "dst_type_max should be 0.0, 6.0 or 7.0"),
    (lambda: torch_npu.npu_dynamic_block_mx_quant(_h(4, 64), dst_type_max=6.0), "dst_type_max should be 0.0 unless"),
    (lambda: torch_npu.npu_grouped_dynamic_mx_quant(_h(2, 64, 4), _GI.npu()), "x should be 2-D"),
    (lambda: torch_npu.npu_grouped_dynamic_mx_quant(_h(64, 4), _GI.long().npu()), "group_index should be int32"),
    (lambda: torch_npu.npu_grouped_dynamic_mx_quant(_h(64, 4), _GI[None].npu()), "group_index should be a non-empty"),
    (lambda: torch_npu.npu_grouped_dynamic_mx_quant(_h(64, 4), _GI.npu(), blocksize=64), "blocksize should be 32"),
    (lambda: torch_npu.npu_grouped_dynamic_mx_quant(_h(64, 4), torch.tensor([70], dtype=torch.int32).npu()),
     "group_index should be non-decreasing, non-negative and end at x.shape\\[0\\] = 64"),
    (lambda: torch_npu.npu_grouped_dynamic_mx_quant(_h(64, 4), _GI.npu(), dst_type=torch_npu.float4_e1m2fn_x2,
                                                    scale_alg=2, dst_type_max=4.0), "dst_type_max should be 0 or"),
    (lambda: torch_npu.npu_grouped_dynamic_mx_quant(_h(64, 4), _GI.npu(), dst_type_max=6.0),
     "dst_type_max is only for float4"),
    (lambda: torch_npu.npu_dynamic_dual_level_mx_quant(_h(4, 64), smooth_scale=_h(64)),
     "smooth_scale is not supported on vNPU"),
    (lambda: torch_npu.npu_dynamic_dual_level_mx_quant(_h(4, 63)), "last dimension of input should be even"),
    (lambda: torch_npu.npu_dynamic_dual_level_mx_quant(_h(4, 64), round_mode="trunc"), "round_mode should be"),
])
def test_bad_arguments_name_the_argument(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_all_five_are_exported():
    for name in ("npu_dynamic_mx_quant", "npu_dynamic_mx_quant_with_dual_axis", "npu_grouped_dynamic_mx_quant",
                 "npu_dynamic_block_mx_quant", "npu_dynamic_dual_level_mx_quant"):
        assert getattr(torch_npu, name) is getattr(torch.ops.npu, name)
