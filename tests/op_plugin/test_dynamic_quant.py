"""npu_dynamic_quant / npu_dynamic_quant_asymmetric against their formulas,
written here on cpu in float64 (see torch_npu/op_plugin/dynamic_quant.py)."""
import pytest
import torch

import torch_npu
from torch_npu.op_plugin.tensor_ops import _unpack_int4


def _rows(x, smooth=None, group_index=None):
    x = x.double()
    if smooth is None:
        return x
    if group_index is None:
        return x * smooth.double()
    out, start = x.clone().reshape(-1, x.shape[-1]), 0
    for g, end in enumerate(group_index.tolist()):
        out[start:end] *= smooth[g].double()
        start = end
    return out.reshape(x.shape)  # rows after the last count are not smoothed


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("quant_mode", ["pertoken", "pertensor"])
def test_symmetric_int8_equals_the_formula(dtype, quant_mode):
    torch.manual_seed(0)
    x = (torch.randn(3, 5, 32) * 4).to(dtype)
    smooth = (torch.rand(32) + 0.5).to(dtype)
    y, scale = torch_npu.npu_dynamic_quant(x.npu(), smooth_scales=smooth.npu(), quant_mode=quant_mode)
    xs = _rows(x, smooth)
    amax = xs.abs().amax(-1) if quant_mode == "pertoken" else xs.abs().amax().reshape(1)
    want_scale = amax / 127
    per = want_scale[..., None] if quant_mode == "pertoken" else want_scale
    assert y.dtype == torch.int8 and scale.dtype == torch.float32
    assert scale.shape == ((3, 5) if quant_mode == "pertoken" else (1,))
    torch.testing.assert_close(scale.cpu().double(), want_scale, rtol=1e-6, atol=0)
    want = torch.round(xs / per).clamp(-128, 127)
    # float32 on npu vs float64 here: values at exactly .5 may round apart.
    assert (y.cpu().double() - want).abs().max() <= 1
    assert (y.cpu().double() - want).abs().gt(0).float().mean() < 0.01


def test_group_index_picks_each_groups_smooth_scales():
    torch.manual_seed(1)
    x = torch.randn(7, 16, dtype=torch.float16)
    smooth = (torch.rand(3, 16) + 0.5).half()
    group_index = torch.tensor([2, 5, 6], dtype=torch.int32)  # row 6 is in no group
    y, scale = torch_npu.npu_dynamic_quant(x.npu(), smooth_scales=smooth.npu(), group_index=group_index.npu())
    xs = _rows(x, smooth, group_index)
    torch.testing.assert_close(scale.cpu().double(), xs.abs().amax(-1) / 127, rtol=1e-6, atol=0)


def test_perchannel_reduces_over_dim_minus_2():
    torch.manual_seed(4)
    x = torch.randn(2, 8, 32, dtype=torch.bfloat16)
    smooth = (torch.rand(8) + 0.5).bfloat16()
    y, scale = torch_npu.npu_dynamic_quant(x.npu(), smooth_scales=smooth.npu(), quant_mode="perchannel")
    xs = x.double() * smooth.double()[:, None]
    want_scale = xs.abs().amax(-2) / 127
    assert scale.shape == (2, 32)
    torch.testing.assert_close(scale.cpu().double(), want_scale, rtol=1e-6, atol=0)
    assert (y.cpu().double() - torch.round(xs / want_scale[:, None, :])).abs().max() <= 1


def test_int4_output_is_packed_eight_per_int32():
    torch.manual_seed(2)
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    y, scale = torch_npu.npu_dynamic_quant(x.npu(), dst_type=torch.quint4x2)
    assert y.dtype == torch.int32 and y.shape == (4, 8)
    xs = x.double()
    want = torch.round(xs / (xs.abs().amax(-1, keepdim=True) / 7)).clamp(-8, 7)
    assert (_unpack_int4(y.cpu()).double() - want).abs().max() <= 1
    with pytest.raises(RuntimeError, match="multiple of 8"):
        torch_npu.npu_dynamic_quant(torch.randn(2, 12, dtype=torch.float16).npu(), dst_type=torch.quint4x2)


def test_torch_npu_dtype_constants_select_the_same_targets():
    assert (torch_npu.int8, torch_npu.int4, torch_npu.hifloat8, torch_npu.float4_e2m1fn_x2) == (258, 285, 290, 296)
    assert torch_npu._C._cd.DType.float8_e5m2 == torch_npu.float8_e5m2 == 291
    x = torch.randn(4, 16, dtype=torch.float16).npu()
    for npu_type, torch_type in ((torch_npu.int8, torch.int8), (torch_npu.int4, torch.quint4x2),
                                 (torch_npu.float8_e4m3fn, torch.float8_e4m3fn)):
        a, b = torch_npu.npu_dynamic_quant(x, dst_type=npu_type), torch_npu.npu_dynamic_quant(x, dst_type=torch_type)
        assert torch.equal(a[0].cpu().view(torch.uint8) if a[0].dtype.is_floating_point else a[0].cpu(),
                           b[0].cpu().view(torch.uint8) if b[0].dtype.is_floating_point else b[0].cpu())


def test_float8_output_and_dst_type_max():
    x = torch.tensor([[1.0, -2.0, 4.0, 0.5]], dtype=torch.bfloat16)
    y, scale = torch_npu.npu_dynamic_quant(x.npu(), dst_type=torch.float8_e4m3fn)
    assert y.dtype == torch.float8_e4m3fn and scale.item() == pytest.approx(4.0 / 448)
    assert y.float().cpu().tolist() == [[112.0, -224.0, 448.0, 56.0]]
    _, scale = torch_npu.npu_dynamic_quant(x.npu(), dst_type=torch.float8_e4m3fn, dst_type_max=224.0)
    assert scale.item() == pytest.approx(4.0 / 224)


def test_asymmetric_int8_equals_the_formula_and_round_trips():
    torch.manual_seed(3)
    x = (torch.randn(6, 32) + 2).half()
    y, scale, offset = torch_npu.npu_dynamic_quant_asymmetric(x.npu())
    xs = x.double()
    hi, lo = xs.amax(-1), xs.amin(-1)
    want_scale = (hi - lo) / 255
    torch.testing.assert_close(scale.cpu().double(), want_scale, rtol=1e-6, atol=0)
    torch.testing.assert_close(offset.cpu().double(), 127 - hi / want_scale, rtol=1e-5, atol=1e-4)
    assert y.cpu().max().item() == 127 and y.cpu().min().item() == -128
    back = (y.cpu().double() - offset.cpu().double()[:, None]) * want_scale[:, None]
    assert (back - xs).abs().max() <= want_scale.max() * 0.51


def test_a_zero_row_quantises_to_zero():
    x = torch.zeros(2, 8, dtype=torch.float16)
    x[1] = 1
    y, scale = torch_npu.npu_dynamic_quant(x.npu())
    assert scale.cpu().tolist() == [0.0, pytest.approx(1 / 127)]
    assert y.cpu()[0].eq(0).all() and y.cpu()[1].eq(127).all()


def test_under_torch_compile_like_eager():
    x = torch.randn(4, 16, dtype=torch.float16).npu()
    f = torch.compile(lambda t: torch_npu.npu_dynamic_quant(t), backend="aot_eager")
    for a, b in zip(f(x), torch_npu.npu_dynamic_quant(x)):
        assert torch.equal(a.cpu(), b.cpu())


@pytest.mark.parametrize("call, message", [
    (lambda x: torch_npu.npu_dynamic_quant(x.float()), "float16 or bfloat16"),
    (lambda x: torch_npu.npu_dynamic_quant(x, dst_type=torch.int32), "dst_type 3 is not supported"),
    (lambda x: torch_npu.npu_dynamic_quant(x, dst_type=torch_npu.hifloat8),
     "dst_type torch_npu.hifloat8 is not supported on vNPU"),
    (lambda x: torch_npu.npu_dynamic_quant(x, quant_mode="perblock"), "quant_mode"),
    (lambda x: torch_npu.npu_dynamic_quant(x, smooth_scales=torch.ones(16).npu()), "input's dtype"),
    (lambda x: torch_npu.npu_dynamic_quant(x, smooth_scales=torch.ones(2, 16).half().npu(),
                                           group_index=torch.tensor([1, 4]).npu()), "int32"),
    (lambda x: torch_npu.npu_dynamic_quant_asymmetric(x, dst_type=torch.float8_e5m2), "asymmetric"),
    (lambda x: torch_npu.npu_dynamic_quant(x, group_index=torch.tensor([4], dtype=torch.int32).npu()),
     "group_index needs smooth_scales"),
])
def test_bad_arguments_name_the_argument(call, message):
    with pytest.raises(RuntimeError, match=message):
        call(torch.randn(4, 16, dtype=torch.float16).npu())


@pytest.mark.parametrize("qtype, storage, lo, hi", [(torch.qint8, torch.int8, -128, 127),
                                                    (torch.quint8, torch.uint8, 0, 255),
                                                    (torch.int32, torch.int32, -2 ** 31, 2 ** 31 - 1)])
def test_npu_quantize_divides_by_the_scales_along_axis(qtype, storage, lo, hi):
    torch.manual_seed(5)
    x = torch.randn(3, 6, 4) * 100
    scales = torch.rand(6) + 0.1
    zero = torch.randint(-3, 4, (6,), dtype=torch.int32)
    y = torch_npu.npu_quantize(x.npu(), scales.npu(), zero.npu(), qtype, 1)
    want = torch.round(x.double() / scales.double()[:, None] + zero.double()[:, None]).clamp(lo, hi)
    assert y.dtype == storage and y.shape == x.shape
    assert (y.cpu().double() - want).abs().max() <= 1


def test_npu_quantize_multiplies_without_div_mode_and_packs_int4():
    torch.manual_seed(6)
    x = torch.randn(4, 16) * 3
    scales = torch.rand(16) + 0.5
    y = torch_npu.npu_quantize(x.npu(), scales.npu(), None, torch.quint4x2, -1, False)
    assert y.dtype == torch.int32 and y.shape == (4, 2)
    want = torch.round(x.double() * scales.double()).clamp(-8, 7)
    assert (_unpack_int4(y.cpu()).double() - want).abs().max() <= 1
    # axis -2: the scales run along the second-to-last dimension.
    y8 = torch_npu.npu_quantize(x.npu(), scales[:4].npu(), None, torch.qint8, -2, False)
    assert torch.equal(y8.cpu(), torch.round(x * scales[:4, None]).clamp(-128, 127).to(torch.int8))


@pytest.mark.parametrize("call, message", [
    (lambda x: torch_npu.npu_quantize(x, torch.ones(5).npu(), None, torch.qint8, 1), "1-D with 16"),
    (lambda x: torch_npu.npu_quantize(x, torch.ones(16).npu(), None, torch.quint4x2, 1), "div_mode=True"),
    (lambda x: torch_npu.npu_quantize(x, torch.ones(16).npu(), None, torch.qint8, 5), "axis 5 is out of range"),
    (lambda x: torch_npu.npu_quantize(x.int(), torch.ones(16).npu(), None, torch.qint8, 1), "float32"),
])
def test_npu_quantize_bad_arguments(call, message):
    with pytest.raises(RuntimeError, match=message):
        call(torch.randn(4, 16).npu())


def _block_reference(x, rb, cb, qmax=127.0, min_scale=0.0):
    rows, cols = x.shape[-2:]
    out_scale = torch.zeros(*x.shape[:-2], -(-rows // rb), -(-cols // cb), dtype=torch.float64)
    y = torch.zeros(x.shape, dtype=torch.float64)
    xd = x.double()
    for i in range(out_scale.shape[-2]):
        for j in range(out_scale.shape[-1]):
            block = xd[..., i * rb:(i + 1) * rb, j * cb:(j + 1) * cb]
            s = (block.abs().amax(dim=(-2, -1)) / qmax).clamp(min=min_scale)
            out_scale[..., i, j] = s
            y[..., i * rb:(i + 1) * rb, j * cb:(j + 1) * cb] = torch.round(block / s[..., None, None]).clamp(-qmax,
                                                                                                            qmax)
    return y, out_scale


@pytest.mark.parametrize("shape, rb, cb", [((4, 300), 1, 128), ((2, 5, 64), 2, 32), ((3, 128), 1, 128)])
def test_dynamic_block_quant_equals_the_block_formula(shape, rb, cb):
    torch.manual_seed(7)
    x = (torch.randn(shape) * 3).half()
    y, scale = torch_npu.npu_dynamic_block_quant(x.npu(), row_block_size=rb, col_block_size=cb)
    want_y, want_scale = _block_reference(x, rb, cb)
    assert y.dtype == torch.int8 and scale.shape == want_scale.shape
    torch.testing.assert_close(scale.cpu().double(), want_scale, rtol=1e-6, atol=0)
    assert (y.cpu().double() - want_y).abs().max() <= 1 and y.cpu().abs().max() <= 127


def test_dynamic_block_quant_min_scale_and_float8():
    x = torch.full((1, 128), 0.01, dtype=torch.bfloat16)
    _, scale = torch_npu.npu_dynamic_block_quant(x.npu(), min_scale=0.001)
    assert scale.item() == pytest.approx(0.001)
    y, scale = torch_npu.npu_dynamic_block_quant((x * 100).npu(), dst_type=torch.float8_e4m3fn)
    assert y.dtype == torch.float8_e4m3fn and y.float().abs().max().item() == 448
    with pytest.raises(RuntimeError, match="dst_type 5 is not supported on vNPU"):
        torch_npu.npu_dynamic_block_quant(x.npu(), dst_type=torch.float16)
