"""torch_npu.op_plugin.activation_quant: SwiGLU / GELU fused with quantisation and the
quantisers around them, each against a formula written here on cpu (float64 where the
op computes in float32; quantised codes compared bit for bit, or within one step where a
float64 reference can land on the other side of a rounding tie). HiFloat8 codes are
checked against a decoder written here from the format's bit fields and a brute-force
search over all 256 codes. Also: op-plugin's exact schemas, npu == cpu, argument errors,
FakeTensor / torch.compile tracing and autograd where the real op has a backward."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_npu
from op_plugin.inputs import rnd

# op-plugin's op_plugin_functions.yaml, verbatim.
SCHEMAS = [
    "npu_swiglu_quant(Tensor x, *, Tensor? smooth_scales=None, Tensor? offsets=None, Tensor? group_index=None, "
    "bool activate_left=False, int quant_mode=0, int group_list_type=0, ScalarType? dst_type=None) -> (Tensor, Tensor)",
    "npu_swiglu_mx_quant(Tensor x, *, Tensor? group_index=None, int activate_dim=-1, bool activate_left=False, "
    "int swiglu_mode=0, float clamp_limit=7.0, float glu_alpha=1.702, float glu_bias=1.0, int group_mode=0, "
    "int axis=-1, int dst_type=296, str round_mode=\"rint\", int scale_alg=0, float max_dtype_value=0) "
    "-> (Tensor, Tensor)",
    "npu_swiglu_mx_quant_with_dual_axis(Tensor x, *, Tensor? group_index=None, bool activate_left=True, "
    "str round_mode=\"rint\", int scale_alg=1, int dst_type=24, float dst_type_max=0) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    "_npu_swiglu_backward_mx_quant_with_dual_axis(Tensor x, Tensor y_grad, *, Tensor? group_index=None, "
    "bool activate_left=True, str round_mode=\"rint\", int scale_alg=1, int dst_type=24, float dst_type_max=0) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    "npu_dequant_swiglu_quant(Tensor x, *, Tensor? weight_scale=None, Tensor? activation_scale=None, "
    "Tensor? bias=None, Tensor? quant_scale=None, Tensor? quant_offset=None, Tensor? group_index=None, "
    "bool activate_left=False, int quant_mode=0, int? dst_type=None, int? round_mode=None, int? activate_dim=None, "
    "int swiglu_mode=0, float clamp_limit=7.0, float glu_alpha=1.702, float glu_bias=1.0) -> (Tensor, Tensor)",
    "npu_gelu_quant(Tensor self, *, Tensor? input_scale=None, Tensor? input_offset=None, str approximate='none', "
    "str quant_mode='dynamic', int? dst_type=None, str round_mode='rint') -> (Tensor, Tensor)",
    "npu_gelu_mul(Tensor input, *, str approximate='none') -> Tensor",
    "npu_group_quant(Tensor x, Tensor scale, Tensor group_index, *, Tensor? offset=None, "
    "ScalarType? dst_dtype=None) -> Tensor",
    "npu_swiglu_group_quant(Tensor x, *, Tensor? weight=None, Tensor? group_index=None, Tensor? scale=None, "
    "int dst_type=291, int quant_mode=0, int block_size=0, bool round_scale=False, float clamp_limit=-1.0, "
    "float dst_type_max=15.0, bool output_origin=False) -> (Tensor, Tensor, Tensor)",
    "npu_swiglu_group_quant_backward(Tensor grad_y, Tensor x, *, Tensor? weight=None, Tensor? y_origin=None, "
    "Tensor? group_index=None, float clamp_limit=0.0) -> (Tensor, Tensor)",
    "npu_kronecker_quant(Tensor x, Tensor kronecker_p1, Tensor kronecker_p2, float? clip_ratio=None, "
    "int? dst_dtype=None, float? dst_type_max=None) -> (Tensor out, Tensor quant_scale)",
    "npu_anti_mx_quant(Tensor x, Tensor mxscale, *, int? axis=-1, int? dst_type=15, int? src_type=292) -> Tensor",
    "npu_quant_max(Tensor x, Tensor scale, *, str round_mode=\"rint\", int dst_dtype=291, Tensor? group_list=None) "
    "-> (Tensor, Tensor)",
    "npu_rotate_quant(Tensor x, Tensor rotation, *, Tensor? alpha=None, int? dst_dtype=None, int? axis=-1, "
    "str? round_mode=\"rint\", int? scale_alg=0, float? dst_type_max=0.0, bool? transpose_y=False) "
    "-> (Tensor, Tensor)",
    "npu_grouped_dynamic_block_quant(Tensor x, Tensor group_list, *, float min_scale=0.0, str round_mode=\"rint\", "
    "int dst_type=291, int row_block_size=1, int col_block_size=128, int group_list_type=0, "
    "float dst_type_max=0.0) -> (Tensor, Tensor)",
    "_quantize_per_tensor_impl.out(Tensor inputs, Tensor scales, Tensor zero_points, ScalarType dtype, *, "
    "Tensor(a!) result) -> Tensor(a!)",
    "_quantize_per_channel_impl.out(Tensor inputs, Tensor scales, Tensor zero_points, int axis, ScalarType dtype, *, "
    "Tensor(a!) result) -> Tensor(a!)",
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.split("(", 1)[0])
def test_schema_is_op_plugins(schema):
    name = schema.split("(", 1)[0]
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.npu, packet), overload or "default")
    assert str(op._schema) == str(torch._C.parse_schema("npu::" + schema))
    assert getattr(torch_npu, packet) is getattr(torch.ops.npu, packet)


# ------------------------------------------------------------------ reference helpers


def swiglu_ref(x, left):
    a, b = x.double().chunk(2, -1)
    if not left:
        a, b = b, a
    return a * torch.sigmoid(a) * b


def near(q, ref_q, steps=1):
    """Integer codes equal, or within ``steps`` where a float64 reference sits on a rounding tie."""
    d = (q.cpu().to(torch.int64) - ref_q.to(torch.int64)).abs()
    assert d.max() <= steps and (d > 0).float().mean() < 0.02, d


def int4_from_int32(packed):
    nib = (packed.cpu().to(torch.int64).unsqueeze(-1) >> torch.arange(0, 32, 4)) & 0xF
    return torch.where(nib >= 8, nib - 16, nib).flatten(-2)


def int4_from_int8(packed):
    b = packed.cpu().view(torch.uint8).to(torch.int64)
    nib = torch.stack((b & 0xF, b >> 4), -1).flatten(-2)
    return torch.where(nib >= 8, nib - 16, nib)


def hif8_value(code):
    """HiFloat8 code -> value, read from the bit string: sign | dot prefix | exponent | mantissa."""
    if code == 0x80:
        return math.nan
    sign = -1.0 if code & 0x80 else 1.0
    bits = format(code & 0x7F, "07b")
    if bits == "1101111":
        return sign * math.inf
    for prefix, exp_bits in (("11", 4), ("10", 3), ("01", 2), ("001", 1), ("0001", 0)):
        if bits.startswith(prefix):
            rest = bits[len(prefix):]
            e_field, m_field = rest[:exp_bits], rest[exp_bits:]
            exponent = 0
            if exp_bits:
                exponent = int("1" + e_field[1:], 2) * (-1 if e_field[0] == "1" else 1)
            return sign * (1 + int(m_field, 2) / 2 ** len(m_field)) * 2.0 ** exponent
    m = int(bits[4:], 2)  # 0000 mmm: denormal
    return sign * (2.0 ** (m - 23) if m else 0.0)


HIF8_POS = [(hif8_value(c), c) for c in range(0x80) if c != 0x6F]


def hif8_ref(v):
    """Brute force: the nearest HiFloat8 value (ties to the larger magnitude), saturating, NaN -> 0x80."""
    vals = torch.tensor([p[0] for p in HIF8_POS], dtype=torch.float64)
    codes = torch.tensor([p[1] for p in HIF8_POS])
    a = v.double().abs().clamp(max=32768.0)
    dist = (a.reshape(-1, 1) - vals).abs()
    best = dist.min(1, keepdim=True).values
    pick = torch.where(dist == best, vals, -1.0).argmax(1)  # the larger of tied candidates
    code = codes[pick].reshape(v.shape)
    code = torch.where((v < 0) & (code != 0), code | 0x80, code)
    return torch.where(torch.isnan(v), 0x80, code)


def test_hifloat8_decoder_and_known_codes():
    # Values and codes from Ascend's HiFloat8 definition.
    assert hif8_value(0x08) == 1.0 and hif8_value(0x6E) == 32768.0 and hif8_value(0x01) == 2.0 ** -22
    assert hif8_value(0x7E) == 2.0 ** -15 and hif8_value(0x95) == -3.25 and hif8_value(0x09) == 1.125
    assert len({p[0] for p in HIF8_POS}) == len(HIF8_POS)  # every code its own value
    x = torch.tensor([[1.0, 1.1, 32768.0, 40000.0, 2.0 ** -23, -3.3, 0.0, 1e-9]])
    y, _ = torch_npu.npu_quant_max(x, torch.tensor([1.0]), dst_dtype=torch_npu.hifloat8, round_mode="round")
    assert y.tolist() == [[0x08, 0x09, 0x6E, 0x6E, 0x01, 0x95, 0x00, 0x00]]


# ------------------------------------------------------------------ npu_swiglu_quant


def swiglu_quant_ref(x, smooth, offsets, ends, left, dynamic, qmax):
    y = swiglu_ref(x.reshape(-1, x.shape[-1]), left)
    rows = y.shape[0]
    for r in range(rows):
        g = next((i for i, e in enumerate(ends) if r < e), None)
        if g is None:
            continue  # past the last group: neither smoothed nor offset
        if smooth is not None:
            s = smooth[g].double()
            y[r] = y[r] * (s if s.dim() else s.item())
        if not dynamic and offsets is not None:
            o = offsets[g].double()
            y[r] = y[r] + (o if o.dim() else o.item())
    if dynamic:
        scale = qmax / y.abs().amax(-1)
        q = torch.round(y * scale[:, None])
    else:
        scale = None
        q = torch.round(y)
    return q.clamp(-qmax - 1, qmax), scale


@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("list_type", [0, 1])
@pytest.mark.parametrize("dst", [torch.int8, torch.quint4x2])
def test_swiglu_quant_dynamic_groups(left, list_type, dst):
    x = rnd(2, 5, 16, seed=1)
    smooth = rnd(3, 8, seed=2, lo=0.5, hi=1.5)
    cum = [2, 6, 9]  # the last row is in no group
    gi = torch.tensor(cum if list_type == 0 else [2, 4, 3], dtype=torch.int32)
    y, scale = torch_npu.npu_swiglu_quant(x.npu(), smooth_scales=smooth.npu(), group_index=gi.npu(),
                                          activate_left=left, quant_mode=1, group_list_type=list_type, dst_type=dst)
    qmax = 127.0 if dst == torch.int8 else 7.0
    q_ref, s_ref = swiglu_quant_ref(x, smooth, None, cum, left, True, qmax)
    assert scale.shape == (2, 5) and scale.dtype == torch.float32
    torch.testing.assert_close(scale.cpu().reshape(-1).double(), s_ref, rtol=1e-5, atol=0)
    if dst == torch.int8:
        assert y.shape == (2, 5, 8) and y.dtype == torch.int8
        near(y.reshape(10, 8), q_ref)
    else:  # two int4 a byte, low nibble first
        assert y.shape == (2, 5, 4) and y.dtype == torch.int8
        near(int4_from_int8(y).reshape(10, 8), q_ref)


@pytest.mark.parametrize("per_channel", [True, False])
def test_swiglu_quant_static(per_channel):
    x = rnd(6, 8, seed=3, dtype=torch.bfloat16)
    shape = (2, 4) if per_channel else (2,)
    smooth = rnd(*shape, seed=4, lo=5.0, hi=30.0)
    offsets = rnd(*shape, seed=5, lo=-3.0, hi=3.0)
    gi = torch.tensor([2, 6], dtype=torch.int32)
    y, scale = torch_npu.npu_swiglu_quant(x.npu(), smooth_scales=smooth.npu(), offsets=offsets.npu(),
                                          group_index=gi.npu(), quant_mode=0)
    q_ref, _ = swiglu_quant_ref(x.float(), smooth, offsets, [2, 6], False, False, 127.0)
    near(y, q_ref)
    assert torch.equal(scale.cpu(), torch.zeros(6))


# ------------------------------------------------------------------ npu_dequant_swiglu_quant


def test_dequant_swiglu_quant_int32_groups_dynamic_vllm_call():
    # vllm-ascend's W8A8 MoE call: int32 GMM output, per-expert weight scales, per-token activation scales,
    # token counts per expert (the rows past their sum are left unwritten by the kernel, zero here).
    tokens, h2 = 7, 16
    x = torch.randint(-200, 200, (tokens, h2), generator=torch.Generator().manual_seed(6), dtype=torch.int32)
    w_scale = rnd(2, h2, seed=7, lo=0.001, hi=0.01)
    a_scale = rnd(tokens, seed=8, lo=0.5, hi=1.5)
    counts = torch.tensor([2, 3])
    y, scale = torch_npu.npu_dequant_swiglu_quant(
        x=x.npu(), weight_scale=w_scale.npu(), activation_scale=a_scale.npu(), bias=None, quant_scale=None,
        quant_offset=None, group_index=counts.npu(), activate_left=True, quant_mode=1)
    assert y.shape == (tokens, 8) and y.dtype == torch.int8 and scale.shape == (tokens,)
    group = [0, 0, 1, 1, 1]
    v = torch.stack([x[r].double() * w_scale[group[r]].double() * a_scale[r].double() for r in range(5)])
    act = swiglu_ref(v, True)
    s_ref = act.abs().amax(-1) / 127
    torch.testing.assert_close(scale.cpu()[:5].double(), s_ref, rtol=1e-5, atol=0)
    near(y[:5], torch.round(act / s_ref[:, None]).clamp(-128, 127))
    assert not y.cpu()[5:].any() and not scale.cpu()[5:].any()


def test_dequant_swiglu_quant_static_int_bias_and_float_input():
    x = torch.randint(-50, 50, (4, 8), generator=torch.Generator().manual_seed(9), dtype=torch.int32)
    bias = torch.randint(-5, 5, (8,), generator=torch.Generator().manual_seed(10), dtype=torch.int32)
    w = rnd(8, seed=11, lo=0.01, hi=0.05)
    qs, qo = torch.tensor([0.02]), torch.tensor([3.0])
    y, scale = torch_npu.npu_dequant_swiglu_quant(x.npu(), weight_scale=w.npu(), bias=bias.npu(),
                                                  quant_scale=qs.npu(), quant_offset=qo.npu(), quant_mode=0)
    act = swiglu_ref((x + bias).double() * w.double(), False)
    near(y, torch.round(act / 0.02 + 3.0).clamp(-128, 127))
    assert not scale.cpu().any()
    xf = rnd(3, 8, seed=12, dtype=torch.bfloat16)
    y, scale = torch_npu.npu_dequant_swiglu_quant(xf.npu(), quant_mode=1)
    act = swiglu_ref(xf.float(), False)
    near(y, torch.round(act * 127 / act.abs().amax(-1, keepdim=True)))


@pytest.mark.parametrize("mode", [1, 2])
def test_dequant_swiglu_quant_gpt_oss_variant(mode):
    x = rnd(3, 8, seed=13, dtype=torch.bfloat16) * 6
    y, scale = torch_npu.npu_dequant_swiglu_quant(x.npu(), activate_left=True, quant_mode=1, swiglu_mode=mode,
                                                  clamp_limit=5.0, glu_alpha=1.5, glu_bias=0.5)
    v = x.double()
    glu, lin = (v[:, 0::2], v[:, 1::2]) if mode == 1 else v.chunk(2, -1)
    glu, lin = glu.clamp(max=5.0), lin.clamp(-5.0, 5.0)
    act = glu * torch.sigmoid(1.5 * glu) * (lin + 0.5)
    torch.testing.assert_close(scale.cpu().double(), act.abs().amax(-1) / 127, rtol=1e-5, atol=0)
    near(y, torch.round(act * 127 / act.abs().amax(-1, keepdim=True)))


def test_dequant_swiglu_quant_float8_hifloat8_fp4_targets():
    x = rnd(4, 16, seed=14, dtype=torch.float16)
    act = swiglu_ref(x.float(), False)
    amax = act.abs().amax(-1, keepdim=True)
    y, s = torch_npu.npu_dequant_swiglu_quant(x.npu(), quant_mode=1, dst_type=torch_npu.float8_e4m3fn)
    assert y.dtype == torch.float8_e4m3fn
    ref = (act * 448 / amax).float().clamp(-448, 448).to(torch.float8_e4m3fn)
    assert (y.cpu().float() - ref.float()).abs().le(ref.float().abs() * 0.07 + 1e-3).all()
    torch.testing.assert_close(s.cpu().double(), amax.squeeze(-1) / 448, rtol=1e-5, atol=0)
    y, s = torch_npu.npu_dequant_swiglu_quant(x.npu(), quant_mode=1, dst_type=torch_npu.hifloat8)
    assert y.dtype == torch.uint8
    assert torch.equal(y.cpu().long(), hif8_ref((act * 32768 / amax).float()))
    y, s = torch_npu.npu_dequant_swiglu_quant(x.npu(), quant_mode=1, dst_type=torch_npu.float4_e2m1fn_x2)
    assert y.shape == (4, 4) and y.dtype == torch.uint8
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    nib = torch.stack((y.cpu().long() & 0xF, y.cpu().long() >> 4), -1).flatten(-2)
    got = torch.where(nib >= 8, -grid[nib & 7], grid[nib & 7])
    v = (act * 6 / amax).float()
    err = (got - v).abs()
    assert (err <= (grid[1:] - grid[:-1]).max() / 2 + 1e-6).all() and err.max() <= 1.0


# ------------------------------------------------------------------ MX (SwiGLU + MX)

E4M3_MAX = 448.0


def ocp_e4m3(v, dim):
    """OCP MX e4m3 along ``dim`` in blocks of 32: (float8 values, E8M0 bytes in the pair layout)."""
    v = v.double().movedim(dim, -1)
    n = v.shape[-1]
    nb = -(-n // 32)
    padded = F.pad(v, (0, nb * 32 - n)).reshape(*v.shape[:-1], nb, 32)
    amax = padded.abs().amax(-1)
    _, e = torch.frexp(amax)
    byte = torch.where(amax > 0, (e - 1 - 8 + 127).clamp(min=0), 0)
    scaled = padded * torch.where(byte > 0, torch.pow(2.0, (127 - byte).double()), 0.0).unsqueeze(-1)
    y = scaled.clamp(-E4M3_MAX, E4M3_MAX).float().to(torch.float8_e4m3fn).reshape(*v.shape[:-1], nb * 32)[..., :n]
    byte = F.pad(byte, (0, nb % 2)).reshape(*byte.shape[:-1], -1, 2)
    return y.movedim(-1, dim), byte.movedim(-2, dim if dim >= 0 else dim - 1)


def cublas_e4m3(v, dim):
    """The cuBLAS-style MX scale (smallest power of two >= amax / 448) along ``dim`` in blocks of 32."""
    v = v.double().movedim(dim, -1)
    n = v.shape[-1]
    nb = -(-n // 32)
    padded = F.pad(v, (0, nb * 32 - n)).reshape(*v.shape[:-1], nb, 32)
    s = padded.abs().amax(-1).float() * torch.tensor(1 / 448.0, dtype=torch.float32)
    m, e = torch.frexp(s.double())
    exp = torch.where(m == 0.5, e - 1, e)
    byte = torch.where(s > 0, exp + 127, 0)
    scaled = padded * torch.pow(2.0, -exp.double()).unsqueeze(-1)
    y = scaled.clamp(-E4M3_MAX, E4M3_MAX).float().to(torch.float8_e4m3fn).reshape(*v.shape[:-1], nb * 32)[..., :n]
    byte = F.pad(byte, (0, nb % 2)).reshape(*byte.shape[:-1], -1, 2)
    return y.movedim(-1, dim), byte.movedim(-2, dim if dim >= 0 else dim - 1)


def grouped_rows_e4m3(v, ends, alg):
    """MX along the rows of 2-D ``v`` in groups: 32-row blocks restart at each group, group g's pair rows from
    start_g // 64 + g; pair rows no group writes hold 127."""
    m, n = v.shape
    groups = len(ends)
    scale = torch.full((m // 64 + groups, n, 2), 127, dtype=torch.int64)
    y = torch.zeros(m, n, dtype=torch.float8_e4m3fn)
    start = 0
    for g, end in enumerate(ends):
        if end > start:
            yq, sq = (ocp_e4m3 if alg == 0 else cublas_e4m3)(v[start:end], 0)
            y[start:end] = yq
            first = start // 64 + g
            scale[first:first + sq.shape[0]] = sq
        start = end
    return y, scale


def bytes_of(t):
    return t.cpu().view(torch.uint8).long()


def test_swiglu_mx_quant_ocp_along_last_and_rows():
    x = rnd(40, 96, seed=15, dtype=torch.bfloat16)
    act = swiglu_ref(x.float(), False).to(torch.bfloat16)
    y, s = torch_npu.npu_swiglu_mx_quant(x.npu(), dst_type=torch_npu.float8_e4m3fn)
    y_ref, s_ref = ocp_e4m3(act.float(), -1)
    assert y.shape == (40, 48) and s.shape == (40, 1, 2) and s.dtype == torch.uint8
    assert torch.equal(bytes_of(y), bytes_of(y_ref)) and torch.equal(s.cpu().long(), s_ref)
    y, s = torch_npu.npu_swiglu_mx_quant(x.npu(), axis=-2, activate_left=True, dst_type=torch_npu.float8_e4m3fn)
    y_ref, s_ref = ocp_e4m3(swiglu_ref(x.float(), True).to(torch.bfloat16).float(), -2)
    assert s.shape == (1, 48, 2)
    assert torch.equal(bytes_of(y), bytes_of(y_ref)) and torch.equal(s.cpu().long(), s_ref)


def test_swiglu_mx_quant_groups_along_rows():
    x = rnd(70, 64, seed=16, dtype=torch.float16)
    counts = torch.tensor([10, 0, 50])  # count mode; rows 60.. are in no group
    y, s = torch_npu.npu_swiglu_mx_quant(x.npu(), group_index=counts.npu(), axis=-2,
                                         dst_type=torch_npu.float8_e4m3fn)
    act = swiglu_ref(x.float(), False).to(torch.float16).float()
    y_ref, s_ref = grouped_rows_e4m3(act, [10, 10, 60], 0)
    assert s.shape == (70 // 64 + 3, 32, 2)
    assert torch.equal(bytes_of(y)[:60], bytes_of(y_ref)[:60]) and not bytes_of(y)[60:].any()
    assert torch.equal(s.cpu().long()[:3], s_ref[:3])  # the pair rows the groups own (3: past the groups)


def test_swiglu_mx_quant_with_dual_axis_cublas_and_groups():
    x = rnd(96, 128, seed=17, dtype=torch.bfloat16)
    act = swiglu_ref(x.float(), True).to(torch.bfloat16).float()
    y1, s1, y2, s2 = torch_npu.npu_swiglu_mx_quant_with_dual_axis(x.npu())
    r1, b1 = cublas_e4m3(act, -1)
    r2, b2 = cublas_e4m3(act, -2)
    assert (s1.shape, s2.shape) == ((96, 1, 2), (2, 64, 2))
    assert torch.equal(bytes_of(y1), bytes_of(r1)) and torch.equal(s1.cpu().long(), b1)
    assert torch.equal(bytes_of(y2), bytes_of(r2)) and torch.equal(s2.cpu().long(), b2)
    y1, s1, y2, s2 = torch_npu.npu_swiglu_mx_quant_with_dual_axis(x.npu(), group_index=torch.tensor([40, 96]).npu())
    r2, b2 = grouped_rows_e4m3(act, [40, 96], 1)
    assert s2.shape == (96 // 64 + 2, 64, 2)
    assert torch.equal(bytes_of(y1), bytes_of(r1))
    assert torch.equal(bytes_of(y2), bytes_of(r2)) and torch.equal(s2.cpu().long(), b2)


def test_swiglu_backward_mx_quant_with_dual_axis():
    x = rnd(40, 128, seed=18, dtype=torch.bfloat16)
    dy = rnd(40, 64, seed=19, dtype=torch.bfloat16)
    a, b = x.double().chunk(2, -1)
    sig = torch.sigmoid(a)
    grad = torch.cat((dy.double() * b * sig * (1 + a * (1 - sig)), dy.double() * a * sig), -1)
    y1, s1, y2, s2 = torch_npu._npu_swiglu_backward_mx_quant_with_dual_axis(x.npu(), dy.npu())
    g = grad.to(torch.bfloat16).float()
    r1, b1 = cublas_e4m3(g, -1)
    r2, b2 = cublas_e4m3(g, -2)
    assert y1.shape == (40, 128) and s1.shape == (40, 2, 2) and s2.shape == (1, 128, 2)
    assert (bytes_of(y1) != bytes_of(r1)).float().mean() < 0.01  # bfloat16 rounding ties of the gradient
    assert torch.equal(s1.cpu().long(), b1) and torch.equal(s2.cpu().long(), b2)
    assert (bytes_of(y2) != bytes_of(r2)).float().mean() < 0.01


# ------------------------------------------------------------------ SwiGLU + HiFloat8


def test_swiglu_group_quant_hifloat8_dynamic_and_static():
    x = rnd(7, 16, seed=20)
    w = rnd(7, seed=21, lo=0.2, hi=1.0)
    counts = torch.tensor([2, 4])  # row 6 in no group
    y, scale, origin = torch_npu.npu_swiglu_group_quant(x.npu(), weight=w.npu(), group_index=counts.npu(),
                                                        quant_mode=3, clamp_limit=1.5, dst_type_max=15.0,
                                                        output_origin=True)
    a, b = x.double().chunk(2, -1)
    a, b = a.clamp(max=1.5), b.clamp(-1.5, 1.5)
    sw = a * torch.sigmoid(a) * b
    weighted = sw * w.double()[:, None]
    s_ref = torch.stack([weighted[0:2].abs().max(), weighted[2:6].abs().max()]) / 15.0
    torch.testing.assert_close(scale.cpu().double(), s_ref, rtol=1e-6, atol=0)
    q = torch.cat((weighted[0:2] / s_ref[0], weighted[2:6] / s_ref[1])).float()
    assert y.dtype == torch.uint8 and y.shape == (7, 8)
    assert (y.cpu()[:6].long() != hif8_ref(q)).float().mean() < 0.02 and not y.cpu()[6].any()
    torch.testing.assert_close(origin.cpu()[:6].double(), sw[:6], rtol=1e-6, atol=1e-7)
    inv = torch.tensor([4.0, 0.5])
    y, scale, origin = torch_npu.npu_swiglu_group_quant(x.npu(), group_index=counts.npu(), scale=inv.npu(),
                                                        quant_mode=2)
    sw = swiglu_ref(x, True)
    q = torch.cat((sw[0:2] * 4.0, sw[2:6] * 0.5)).float()
    assert (y.cpu()[:6].long() != hif8_ref(q)).float().mean() < 0.02
    assert scale.shape == (0,) and origin.shape == (0,)


def test_swiglu_group_quant_origin_gradient():
    # The real op's derivative (derivatives.yaml) is npu_swiglu_group_quant_backward; here autograd runs
    # through the SwiGLU the y_origin output is made of (the HiFloat8 bytes carry no gradient).
    x = rnd(3, 8, seed=22).requires_grad_()
    _, _, origin = torch_npu.npu_swiglu_group_quant(x, quant_mode=3, output_origin=True)
    g = rnd(3, 4, seed=23)
    (dx,) = torch.autograd.grad(origin, x, g)
    a, b = x.detach().double().chunk(2, -1)
    sig = torch.sigmoid(a)
    ref = torch.cat((g * b * sig * (1 + a * (1 - sig)), g * a * sig), -1)
    torch.testing.assert_close(dx.double(), ref, rtol=1e-5, atol=1e-6)
    dx2, _ = torch_npu.npu_swiglu_group_quant_backward(g, x.detach())
    torch.testing.assert_close(dx2, dx, rtol=1e-6, atol=1e-7)


def test_swiglu_group_quant_backward():
    x = rnd(5, 8, seed=24) * 3
    dy = rnd(5, 4, seed=25)
    w = rnd(5, seed=26, lo=0.1, hi=1.0)
    counts = torch.tensor([1, 3])
    dx, dw = torch_npu.npu_swiglu_group_quant_backward(dy.npu(), x.npu(), weight=w.npu(), group_index=counts.npu(),
                                                        clamp_limit=2.0)
    a, b = x.double().chunk(2, -1)
    ac, bc = a.clamp(max=2.0), b.clamp(-2.0, 2.0)
    sig = torch.sigmoid(ac)
    g0 = dy.double() * w.double()[:, None]
    da = g0 * bc * sig * (1 + ac * (1 - sig)) * (a < 2.0)
    db = g0 * ac * sig * ((b > -2.0) & (b < 2.0))
    ref = torch.cat((da, db), -1)
    ref[4] = 0
    torch.testing.assert_close(dx.cpu().double(), ref, rtol=1e-5, atol=1e-6)
    dw_ref = (dy.double() * ac * sig * bc).sum(-1)
    dw_ref[4] = 0
    torch.testing.assert_close(dw.cpu().double(), dw_ref, rtol=1e-5, atol=1e-6)
    _, empty = torch_npu.npu_swiglu_group_quant_backward(dy, x)
    assert empty.shape == (0,) and empty.dtype == torch.float32


# ------------------------------------------------------------------ GELU


def gelu_ref(x, approximate):
    x = x.double()
    if approximate == "tanh":
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_mul(approximate):
    x = rnd(3, 5, 8, seed=27, dtype=torch.bfloat16)
    out = torch_npu.npu_gelu_mul(x.npu(), approximate=approximate)
    a, b = x.chunk(2, -1)
    assert out.dtype == torch.bfloat16 and out.shape == (3, 5, 4)
    torch.testing.assert_close(out.cpu().double(), gelu_ref(a, approximate) * b.double(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_quant_dynamic_and_static(approximate):
    x = rnd(4, 16, seed=28, dtype=torch.float16) * 3
    s = rnd(16, seed=29, lo=0.5, hi=2.0, dtype=torch.float16)
    o = rnd(16, seed=30, lo=-2.0, hi=2.0, dtype=torch.float16)
    y, scale = torch_npu.npu_gelu_quant(x.npu(), input_scale=s.npu(), approximate=approximate)
    g = gelu_ref(x, approximate) * s.double()
    s_ref = g.abs().amax(-1) / 127
    torch.testing.assert_close(scale.cpu().double(), s_ref, rtol=1e-5, atol=0)
    near(y, torch.round(g / s_ref[:, None]))
    y, scale = torch_npu.npu_gelu_quant(x.npu(), input_scale=(s * 20).npu(), input_offset=o.npu(),
                                        approximate=approximate, quant_mode="static")
    assert scale is None
    near(y, torch.round(gelu_ref(x, approximate) * (s * 20).double() + o.double()).clamp(-128, 127))
    x = x.abs()  # gelu well conditioned in float32: HiFloat8 keeps the relative precision of tiny values
    y, scale = torch_npu.npu_gelu_quant(x.npu(), dst_type=torch_npu.hifloat8, round_mode="round")
    g = gelu_ref(x, approximate)
    assert y.dtype == torch.uint8
    assert (y.cpu().long() != hif8_ref((g * 32768 / g.abs().amax(-1, keepdim=True)).float())).float().mean() < 0.02


# ------------------------------------------------------------------ quantisers


@pytest.mark.parametrize("dst", [None, torch.quint4x2])
def test_group_quant(dst):
    x = rnd(6, 16, seed=31, dtype=torch.float16)
    scale = rnd(4, 16, seed=32, lo=-3.0, hi=3.0)
    gi = torch.tensor([1, 4, 6, 6], dtype=torch.int32)
    offset = torch.tensor([0.25])
    y = torch_npu.npu_group_quant(x.npu(), scale.npu(), gi.npu(), offset=offset.npu(), dst_dtype=dst)
    group = [0, 1, 1, 1, 2, 2]
    v = torch.stack([x[r].double() * scale[group[r]].double() for r in range(6)]) + 0.25
    if dst is None:
        assert y.dtype == torch.int8 and y.shape == (6, 16)
        near(y, torch.round(v).clamp(-128, 127))
    else:
        assert y.dtype == torch.int32 and y.shape == (6, 2)
        near(int4_from_int32(y), torch.round(v).clamp(-8, 7))


def block_quant_ref(x, ends, rb, cb, qmax, min_scale):
    """The kernel reference's steps: rows grouped, each group padded to whole row blocks, the scale rows
    placed at end // rb + g (unwritten rows 1.0), y = x / scale clipped, NaN -> 0."""
    m, n = x.shape
    nc = -(-n // cb)
    scale = torch.ones(m // rb + len(ends), nc, dtype=torch.float64)
    per = torch.zeros(m, n, dtype=torch.float64)
    start, row = 0, 0
    for g, end in enumerate(ends):
        for b0 in range(start, end, rb):
            rows = slice(b0, min(b0 + rb, end))
            for c in range(nc):
                cols = slice(c * cb, min((c + 1) * cb, n))
                amax = x[rows, cols].double().abs().max()
                s = amax / qmax
                if min_scale:
                    s = min(s, 1 / min_scale)
                scale[row, c] = s
                per[rows, cols] = s
            row += 1
        row = end // rb + g + 1
        start = end
    return torch.nan_to_num((x.double() / per).clamp(-qmax, qmax), nan=0.0), scale


@pytest.mark.parametrize("dst", ["e4m3", "hif8"])
def test_grouped_dynamic_block_quant(dst):
    x = rnd(11, 20, seed=33, dtype=torch.bfloat16)
    ends = [3, 3, 11]
    dst_type = torch_npu.float8_e4m3fn if dst == "e4m3" else torch_npu.hifloat8
    mode = "rint" if dst == "e4m3" else "round"
    y, scale = torch_npu.npu_grouped_dynamic_block_quant(x.npu(), torch.tensor(ends, dtype=torch.int32).npu(),
                                                         min_scale=0.01, dst_type=dst_type, round_mode=mode,
                                                         row_block_size=2, col_block_size=8)
    qmax = 448.0 if dst == "e4m3" else 32768.0
    v, s_ref = block_quant_ref(x, ends, 2, 8, qmax, 0.01)
    assert scale.shape == (11 // 2 + 3, 3) and scale.dtype == torch.float32
    torch.testing.assert_close(scale.cpu().double(), s_ref, rtol=1e-6, atol=0)
    if dst == "e4m3":
        assert y.dtype == torch.float8_e4m3fn
        ref = v.float().to(torch.float8_e4m3fn)
        assert (bytes_of(y) != bytes_of(ref)).float().mean() < 0.02
    else:
        assert y.dtype == torch.uint8 and (y.cpu().long() != hif8_ref(v.float())).float().mean() < 0.02


def test_quant_max_plain_and_grouped():
    x = rnd(5, 6, seed=34, dtype=torch.bfloat16)
    y, amax = torch_npu.npu_quant_max(x.npu(), torch.tensor([3.0]).npu())
    assert y.dtype == torch.float8_e5m2 and amax.dtype == torch.bfloat16 and amax.shape == (1,)
    assert torch.equal(bytes_of(y), bytes_of((x.float() * 3).to(torch.float8_e5m2)))
    assert amax.item() == x.abs().max().item()
    gl = torch.tensor([2, 5])
    y, amax = torch_npu.npu_quant_max(x.npu(), torch.tensor([3.0, 0.5]).npu(), dst_dtype=torch_npu.hifloat8,
                                      round_mode="round", group_list=gl.npu())
    v = torch.cat((x[:2].float() * 3, x[2:].float() * 0.5))
    assert torch.equal(y.cpu().long(), hif8_ref(v))
    assert amax.tolist() == [x[:2].abs().max().item(), x[2:].abs().max().item()]


def test_kronecker_quant_int4_vllm_call():
    m, n1, n2 = 3, 4, 16
    x = rnd(m, n1, n2, seed=35, dtype=torch.bfloat16)
    p1 = rnd(n1, n1, seed=36, dtype=torch.bfloat16)
    p2 = rnd(n2, n2, seed=37, dtype=torch.bfloat16)
    out, scale = torch_npu.npu_kronecker_quant(x.npu(), p1.npu(), p2.npu(), clip_ratio=0.9, dst_dtype=torch.int32)
    t = torch.einsum("mij,jk->mik", x.double(), p2.double()).to(torch.bfloat16)
    t = torch.einsum("ij,mjk->mik", p1.double(), t.double()).to(torch.bfloat16).double()
    s_ref = t.abs().amax((1, 2)) * 0.9 / 7
    assert out.shape == (m, n1, n2 // 8) and out.dtype == torch.int32 and scale.shape == (m,)
    torch.testing.assert_close(scale.cpu().double(), s_ref, rtol=1e-6, atol=0)
    near(int4_from_int32(out), torch.round(t / s_ref[:, None, None]).clamp(-8, 7))
    # The MXFP4 form (vllm-ascend's w4a4_mxfp4 call, clip_ratio positional): the OCP MX quantiser on p1 x p2.
    out, scale = torch_npu.npu_kronecker_quant(x.npu(), p1.npu(), p2.npu(), 1.0,
                                               dst_dtype=torch_npu.float4_e2m1fn_x2)
    ref = torch_npu.npu_dynamic_mx_quant(t.to(torch.bfloat16).reshape(m, n1 * n2),
                                         dst_type=torch_npu.float4_e2m1fn_x2)
    assert out.shape == (m, n1 * n2 // 2) and scale.shape == (m, 1, 2) and scale.dtype == torch.uint8
    assert torch.equal(out.cpu(), ref[0]) and torch.equal(scale.cpu(), ref[1])


def test_rotate_quant_int8_int4_and_mx():
    x = rnd(3, 64, seed=38, dtype=torch.float16)
    r = rnd(32, 32, seed=39, dtype=torch.float16) / 4
    y_rot = torch.einsum("mbk,kl->mbl", x.double().reshape(3, 2, 32), r.double()).reshape(3, 64)
    y_rot = y_rot.to(torch.float16).double()
    q, s = torch_npu.npu_rotate_quant(x.npu(), r.npu())
    s_ref = y_rot.abs().amax(-1) / 127
    torch.testing.assert_close(s.cpu().double(), s_ref, rtol=1e-6, atol=0)
    near(q, torch.round(y_rot / s_ref[:, None]))
    q, s = torch_npu.npu_rotate_quant(x.npu(), r.npu(), dst_dtype=torch.quint4x2)
    assert q.shape == (3, 8) and q.dtype == torch.int32
    near(int4_from_int32(q), torch.round(y_rot * 7 / y_rot.abs().amax(-1, keepdim=True)))
    alpha = torch.tensor([0.5])
    q, s = torch_npu.npu_rotate_quant(x.npu(), r.npu(), alpha=alpha.npu(), dst_dtype=torch.float8_e4m3fn)
    g = y_rot.reshape(3, 2, 32)
    lim = 0.5 * g.abs().amax(-1, keepdim=True)
    clamped = torch.maximum(torch.minimum(g, lim), -lim).reshape(3, 64).to(torch.float16).float()
    y_ref, b_ref = ocp_e4m3(clamped, -1)
    assert s.dtype == torch.float8_e8m0fnu and s.shape == (3, 1, 2)
    assert torch.equal(bytes_of(q), bytes_of(y_ref)) and torch.equal(bytes_of(s), b_ref)


@pytest.mark.parametrize("axis", [-1, 0])
def test_anti_mx_quant(axis):
    x = rnd(40, 64, seed=40, dtype=torch.bfloat16)
    q, s = torch_npu.npu_dynamic_mx_quant(x, axis=axis, dst_type=torch_npu.float8_e4m3fn)
    y = torch_npu.npu_anti_mx_quant(q.npu(), s.npu(), axis=axis, dst_type=torch.float32)
    byte = s.long().movedim(-1, axis % 2 + 1).flatten(axis % 2, axis % 2 + 1)
    byte = byte.repeat_interleave(32, dim=axis % 2).narrow(axis % 2, 0, x.shape[axis])
    ref = q.double() * torch.pow(2.0, (byte - 127).double())
    assert y.dtype == torch.float32 and torch.equal(y.cpu().double(), ref)
    q, s = torch_npu.npu_dynamic_mx_quant(x, dst_type=torch_npu.float4_e2m1fn_x2)
    y = torch_npu.npu_anti_mx_quant(q.npu(), s.npu(), src_type=torch_npu.float4_e2m1fn_x2)
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)
    nib = torch.stack((q.long() & 0xF, q.long() >> 4), -1).flatten(-2)
    val = torch.where(nib >= 8, -grid[nib & 7], grid[nib & 7])
    ref = val * torch.pow(2.0, (s.long().flatten(-2).repeat_interleave(32, -1) - 127).double())
    assert y.dtype == torch.bfloat16 and y.shape == (40, 64)
    assert torch.equal(y.cpu().double(), ref.to(torch.bfloat16).double())


def test_quantize_impl_out_overloads():
    x = rnd(3, 4, seed=41) * 5
    res = torch.empty(3, 4, dtype=torch.int8).npu()
    out = torch.ops.npu._quantize_per_tensor_impl.out(x.npu(), torch.tensor([0.05]).npu(),
                                                     torch.tensor([3], dtype=torch.int32).npu(), torch.qint8,
                                                     result=res)
    assert out is res
    assert torch.equal(res.cpu(), torch.round(x.double() / 0.05 + 3).clamp(-128, 127).to(torch.int8))
    scales, zps = torch.tensor([0.1, 0.2, 0.3]), torch.tensor([100, 128, 140], dtype=torch.int32)
    res = torch.empty(3, 4, dtype=torch.uint8)
    torch.ops.npu._quantize_per_channel_impl.out(x, scales, zps, 0, torch.quint8, result=res)
    ref = torch.round(x.double() / scales.double()[:, None] + zps.double()[:, None]).clamp(0, 255)
    near(res, ref)


# ------------------------------------------------------------------ devices, errors, tracing


def _cases():
    x16 = rnd(6, 64, seed=42, dtype=torch.bfloat16)
    xi = torch.randint(-100, 100, (6, 16), generator=torch.Generator().manual_seed(43), dtype=torch.int32)
    return [
        lambda d: torch_npu.npu_swiglu_quant(x16.float().to(d), quant_mode=1,
                                             group_index=torch.tensor([2, 5], dtype=torch.int32).to(d)),
        lambda d: torch_npu.npu_dequant_swiglu_quant(xi.to(d), weight_scale=torch.full((16,), 0.01).to(d),
                                                     group_index=torch.tensor([4]).to(d), quant_mode=1),
        lambda d: torch_npu.npu_swiglu_mx_quant(x16.to(d), axis=-2, group_index=torch.tensor([3, 3]).to(d)),
        lambda d: torch_npu.npu_swiglu_group_quant(x16.to(d), quant_mode=3, output_origin=True),
        lambda d: torch_npu.npu_gelu_quant(x16.to(d), dst_type=torch_npu.float8_e5m2),
        lambda d: torch_npu.npu_grouped_dynamic_block_quant(x16.to(d), torch.tensor([2, 6], dtype=torch.int32).to(d),
                                                            col_block_size=16),
        lambda d: torch_npu.npu_rotate_quant(x16.to(d), torch.eye(32, dtype=torch.bfloat16).to(d)),
    ]


@pytest.mark.parametrize("case", range(7))
def test_npu_equals_cpu(case):
    f = _cases()[case]
    for a, b in zip(f("cpu"), f("npu")):
        assert a.device.type == "cpu" and b.device.type == "npu"
        assert torch.equal(a.view(torch.uint8) if a.dtype.itemsize == 1 else a,
                           b.cpu().view(torch.uint8) if b.dtype.itemsize == 1 else b.cpu())


_X = torch.zeros(4, 16)
_H = torch.zeros(64, 64, dtype=torch.bfloat16)
BAD = [
    (lambda: torch_npu.npu_swiglu_quant(_X, quant_mode=2), "quant_mode should be 0"),
    (lambda: torch_npu.npu_swiglu_quant(_X, dst_type=torch.float16), "dst_type should be torch.int8"),
    (lambda: torch_npu.npu_swiglu_quant(torch.zeros(4, 15)), "should be even"),
    (lambda: torch_npu.npu_swiglu_quant(_X, group_index=torch.tensor([1, 2])), "group_index should be int32"),
    (lambda: torch_npu.npu_swiglu_quant(_X, smooth_scales=torch.ones(3, 5), quant_mode=1), "smooth_scales should"),
    (lambda: torch_npu.npu_swiglu_quant(_X, smooth_scales=torch.ones(1, 8)), "same shape"),
    (lambda: torch_npu.npu_dequant_swiglu_quant(_X), "x should be int32"),
    (lambda: torch_npu.npu_dequant_swiglu_quant(_X.half(), dst_type=torch_npu.int4), "dst_type torch_npu.int4 is not"),
    (lambda: torch_npu.npu_dequant_swiglu_quant(_X.half(), round_mode=3), "round_mode should be 'rint'"),
    (lambda: torch_npu.npu_dequant_swiglu_quant(_X.half(), swiglu_mode=3), "swiglu_mode should be"),
    (lambda: torch_npu.npu_dequant_swiglu_quant(_X.half(), dst_type=torch_npu.hifloat8, round_mode=0),
     "'round' for torch_npu.hifloat8"),
    (lambda: torch_npu.npu_dequant_swiglu_quant(_X.half(), activation_scale=torch.ones(4)), "should be None"),
    (lambda: torch_npu.npu_swiglu_mx_quant(_X), "float16 or bfloat16"),
    (lambda: torch_npu.npu_swiglu_mx_quant(_H, dst_type=torch_npu.int8), "dst_type torch_npu.int8 is not"),
    (lambda: torch_npu.npu_swiglu_mx_quant(_H, scale_alg=1), "scale_alg=1 is only for float8"),
    (lambda: torch_npu.npu_swiglu_mx_quant(_H, dst_type=24, round_mode="floor"), "should be 'rint'"),
    (lambda: torch_npu.npu_swiglu_mx_quant(_H, axis=-2, group_index=torch.tensor([50, 50])), "covers 100 rows"),
    (lambda: torch_npu.npu_swiglu_mx_quant_with_dual_axis(_H, group_index=torch.tensor([10, 20])),
     "should equal the number of rows"),
    (lambda: torch_npu.npu_swiglu_mx_quant_with_dual_axis(_H, dst_type_max=6.0), "reserved"),
    (lambda: torch_npu._npu_swiglu_backward_mx_quant_with_dual_axis(_H[:, :32], _H[:, :16]), "multiple of 64"),
    (lambda: torch_npu._npu_swiglu_backward_mx_quant_with_dual_axis(_H, _H), "y_grad should have shape"),
    (lambda: torch_npu.npu_swiglu_group_quant(_X), "quant_mode 0 is not supported"),
    (lambda: torch_npu.npu_swiglu_group_quant(_X, quant_mode=2), "scale is required"),
    (lambda: torch_npu.npu_swiglu_group_quant(_X, quant_mode=3, clamp_limit=-2.0), "clamp_limit should be"),
    (lambda: torch_npu.npu_swiglu_group_quant(_X, quant_mode=3, weight=torch.ones(3)), "one value per token"),
    (lambda: torch_npu.npu_gelu_quant(_X, quant_mode="per_token"), "quant_mode should be"),
    (lambda: torch_npu.npu_gelu_quant(_X, quant_mode="static"), "input_scale is required"),
    (lambda: torch_npu.npu_gelu_quant(_X, dst_type=torch_npu.hifloat8, round_mode="hybrid"), "not supported on vNPU"),
    (lambda: torch_npu.npu_gelu_quant(_X, approximate="fast"), "approximate should be"),
    (lambda: torch_npu.npu_gelu_quant(_X, input_scale=torch.ones(16), input_offset=torch.ones(1)),
     "input_offset should have input_scale's shape"),
    (lambda: torch_npu.npu_gelu_mul(torch.zeros(2, 3)), "should be even"),
    (lambda: torch_npu.npu_group_quant(_X, torch.ones(2, 16), torch.tensor([1, 3], dtype=torch.int32)),
     "should equal x.shape"),
    (lambda: torch_npu.npu_group_quant(_X, torch.ones(2, 8), torch.tensor([1, 4], dtype=torch.int32)),
     "scale should be a 2-D"),
    (lambda: torch_npu.npu_group_quant(_X, torch.ones(1, 16), torch.tensor([4]), dst_dtype=torch.uint8),
     "dst_dtype should be"),
    (lambda: torch_npu.npu_grouped_dynamic_block_quant(_H, torch.tensor([64])), "int32"),
    (lambda: torch_npu.npu_grouped_dynamic_block_quant(_H, torch.tensor([10], dtype=torch.int32)), "end at"),
    (lambda: torch_npu.npu_grouped_dynamic_block_quant(_H, torch.tensor([64], dtype=torch.int32),
                                                       dst_type=torch_npu.hifloat8), "'round' for torch_npu.hif"),
    (lambda: torch_npu.npu_quant_max(_X, torch.ones(1), dst_dtype=torch_npu.int8), "dst_dtype torch_npu.int8"),
    (lambda: torch_npu.npu_quant_max(_X, torch.ones(2)), "scale should have shape"),
    (lambda: torch_npu.npu_kronecker_quant(torch.zeros(2, 4, 8), torch.eye(4), torch.eye(8)), "float16 or bfloat16"),
    (lambda: torch_npu.npu_kronecker_quant(_H.reshape(4, 16, 64), _H[:16, :16], _H, dst_dtype=torch.int8),
     "dst_dtype should be torch.int32"),
    (lambda: torch_npu.npu_kronecker_quant(_H.reshape(4, 16, 64), _H[:8, :8], _H), "kronecker_p1 should be"),
    (lambda: torch_npu.npu_rotate_quant(_H, _H[:24, :24]), "multiple of K"),
    (lambda: torch_npu.npu_rotate_quant(_H, _H[:32, :32], transpose_y=True), "transpose_y only supports False"),
    (lambda: torch_npu.npu_rotate_quant(_H, _H[:32, :32], axis=0), "axis should be the last"),
    (lambda: torch_npu.npu_anti_mx_quant(torch.zeros(4, 64, dtype=torch.float8_e4m3fn),
                                         torch.zeros(4, 2, 2, dtype=torch.uint8)), "mxscale should have shape"),
    (lambda: torch_npu.npu_anti_mx_quant(torch.zeros(4, 64, dtype=torch.float8_e4m3fn),
                                         torch.zeros(4, 1, 2, dtype=torch.uint8), src_type=291), "should be torch.fl"),
    (lambda: torch_npu.npu_anti_mx_quant(torch.zeros(4, 64, dtype=torch.float8_e4m3fn),
                                         torch.zeros(4, 1, 2, dtype=torch.uint8), dst_type=3), "dst_type 3"),
    (lambda: torch.ops.npu._quantize_per_tensor_impl.out(_X, torch.ones(1), torch.zeros(1, dtype=torch.int32),
                                                         torch.qint8, result=torch.empty(4, 16)), "result should be"),
    (lambda: torch.ops.npu._quantize_per_channel_impl.out(_X, torch.ones(3), torch.zeros(3, dtype=torch.int32), 1,
                                                          torch.qint8, result=torch.empty(4, 16, dtype=torch.int8)),
     "with 16"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments_raise(i):
    f, message = BAD[i]
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        f()


def test_shapes_under_fake_tensors_and_compile():
    with FakeTensorMode():
        x = torch.empty(130, 64, dtype=torch.bfloat16)
        y, s = torch.ops.npu.npu_swiglu_mx_quant(x, axis=-2, group_index=torch.empty(3, dtype=torch.int64))
        assert y.shape == (130, 16) and s.shape == (130 // 64 + 3, 32, 2)
        y, s = torch.ops.npu.npu_dequant_swiglu_quant(torch.empty(8, 64, dtype=torch.int32),
                                                      group_index=torch.empty(2, dtype=torch.int64),
                                                      dst_type=torch_npu.float4_e2m1fn_x2, quant_mode=1)
        assert y.shape == (8, 16) and y.dtype == torch.uint8 and s.shape == (8,)
        y, s, o = torch.ops.npu.npu_swiglu_group_quant(torch.empty(8, 64), quant_mode=3,
                                                       group_index=torch.empty(4, dtype=torch.int64))
        assert y.dtype == torch.uint8 and s.shape == (4,) and o.shape == (0,)
        y, s = torch.ops.npu.npu_grouped_dynamic_block_quant(torch.empty(2, 40, 300, dtype=torch.float16),
                                                             torch.empty(3, dtype=torch.int32), row_block_size=8)
        assert y.shape == (2, 40, 300) and y.dtype == torch.float8_e5m2 and s.shape == (2, 40 // 8 + 3, 3)
    x = rnd(5, 32, seed=44, dtype=torch.float16).npu()
    gi = torch.tensor([2, 5], dtype=torch.int32).npu()
    f = torch.compile(lambda t, g: torch_npu.npu_swiglu_quant(t, group_index=g, quant_mode=1), backend="eager")
    for a, b in zip(f(x, gi), torch_npu.npu_swiglu_quant(x, group_index=gi, quant_mode=1)):
        assert torch.equal(a.cpu(), b.cpu())
    f = torch.compile(lambda t: torch_npu.npu_gelu_mul(t), backend="eager")
    assert torch.equal(f(x).cpu(), torch_npu.npu_gelu_mul(x).cpu())
