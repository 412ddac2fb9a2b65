"""torch_npu.op_plugin.quant_matmul: the quantised matmul / grouped-matmul variants, each on cpu and
npu (identical results) against a formula written out here element by element (loops over rows,
groups and K blocks, E8M0 scales as 2 ** (byte - 127)); op-plugin's schemas; argument errors;
FakeTensor and torch.compile tracing."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_npu
from torch_npu import _hifloat8 as hif8_codec

from op_plugin.inputs import gen, rnd

OPS = torch.ops.npu


def both(op, *args, **kwargs):
    """Runs op on cpu and on npu copies of the tensor arguments; asserts equal results; returns cpu's."""
    def move(a):
        if isinstance(a, torch.Tensor):
            return a.npu()
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            return type(a)(t.npu() for t in a)
        return a
    out_cpu = op(*args, **kwargs)
    out_npu = op(*[move(a) for a in args], **{k: move(v) for k, v in kwargs.items()})
    cpu_list = out_cpu if isinstance(out_cpu, (tuple, list)) else [out_cpu]
    npu_list = out_npu if isinstance(out_npu, (tuple, list)) else [out_npu]
    for c, n in zip(cpu_list, npu_list):
        assert n.device.type == "npu" and n.dtype == c.dtype and n.shape == c.shape
        cc, nn = c.view(torch.uint8) if c.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else c, n.cpu()
        nn = nn.view(torch.uint8) if nn.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else nn
        assert torch.equal(cc, nn) or torch.allclose(cc.double(), nn.double(), equal_nan=True, rtol=0, atol=0)
    return out_cpu


def e8m0(byte):
    return 2.0 ** (int(byte) - 127)


def fp8(*shape, seed, dtype=torch.float8_e4m3fn):
    return (rnd(*shape, seed=seed) * 4).to(dtype)


def scale_bytes(*shape, seed, lo=120, hi=134):
    return torch.randint(lo, hi, shape, generator=gen(seed), dtype=torch.int64).to(torch.uint8)


def ints(*shape, seed, lo=-128, hi=128, dtype=torch.int8):
    return torch.randint(lo, hi, shape, generator=gen(seed), dtype=torch.int64).to(dtype)


def pack_int4(v):
    """int values in [-8, 7] (..., 8 n) -> int32 (..., n), lowest nibble first."""
    nib = (v.to(torch.int64) & 0xF).reshape(*v.shape[:-1], v.shape[-1] // 8, 8)
    word = sum(nib[..., i] << (4 * i) for i in range(8))
    return torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)


def float_bits_int64(f):
    return f.float().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def fp4_pack(codes):
    """E2M1 codes (..., 2 n) -> uint8 (..., n), element 2i in the low nibble."""
    c = codes.to(torch.int64)
    return (c[..., 0::2] | (c[..., 1::2] << 4)).to(torch.uint8)


def fp4_value(code):
    code = int(code)
    v = E2M1[code & 7]
    return -v if code & 8 else v


# ------------------------------------------------------------------ schemas

SCHEMAS = [
    "npu_add_quant_gmm_(Tensor(a!) self, Tensor x1, Tensor x2, Tensor x2_scale, Tensor group_list, *, Tensor? x1_scale=None, int? group_list_type=0, int[]? group_sizes=None, int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None) -> Tensor(a!)",  # noqa: E501
    "npu_add_quant_gmm(Tensor self, Tensor x1, Tensor x2, Tensor x2_scale, Tensor group_list, *, Tensor? x1_scale=None, int? group_list_type=0, int[]? group_sizes=None, int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None) -> Tensor",  # noqa: E501
    "npu_add_quant_matmul_(Tensor(a!) self, Tensor x1, Tensor x2, Tensor x2_scale, *, Tensor? x1_scale=None, int[]? group_sizes=None, int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None) -> Tensor(a!)",  # noqa: E501
    "npu_add_quant_matmul(Tensor self, Tensor x1, Tensor x2, Tensor x2_scale, *, Tensor? x1_scale=None, int[]? group_sizes=None, int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None) -> Tensor",  # noqa: E501
    "npu_quant_grouped_matmul_dequant(Tensor x, Tensor quantized_weight, Tensor weight_scale, Tensor group_list, *, Tensor? bias=None, Tensor? x_scale=None, Tensor? x_offset=None, Tensor? smooth_scale=None, str? quant_mode='pertoken') -> Tensor",  # noqa: E501
    "npu_transpose_quant_batchmatmul(Tensor x1, Tensor x2, int dtype, *, Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, int[]? group_sizes=None, int[]? perm_x1=None, int[]? perm_x2=None, int[]? perm_y=None, int? batch_split_factor=1, int? x1_dtype=None, int? x2_dtype=None) -> Tensor",  # noqa: E501
    "npu_matmul_compress_dequant(Tensor x1, Tensor x2, Tensor compress_index, Tensor bias, Tensor scale, *, Tensor? offsetW=None, int? offsetX=None) -> Tensor",  # noqa: E501
    "npu_grouped_matmul_swiglu_quant(Tensor x, Tensor weight, Tensor group_list, Tensor weight_scale, Tensor x_scale, *, Tensor? bias=None, Tensor? offset=None) -> (Tensor, Tensor, Tensor)",  # noqa: E501
    "npu_grouped_matmul_swiglu_quant_v2(Tensor x, Tensor[] weight, Tensor[] weight_scale, Tensor x_scale, Tensor group_list, *, Tensor? smooth_scale=None, Tensor[]? weight_assist_matrix=None, Tensor? bias=None, int? dequant_mode=0, int? dequant_dtype=0, int? quant_mode=0, int? quant_dtype=1, int? group_list_type=0, int[]? tuning_config=None, int? x_dtype=None, int? weight_dtype=None, int? weight_scale_dtype=None, int? x_scale_dtype=None) -> (Tensor, Tensor)",  # noqa: E501
    "npu_grouped_matmul_add(Tensor self, Tensor x, Tensor weight, Tensor group_list, *, bool transpose_x=True, bool transpose_weight=False, int group_type=2, int? group_list_type=0) -> Tensor",  # noqa: E501
    "npu_grouped_matmul_add_(Tensor(a!) self, Tensor x, Tensor weight, Tensor group_list, *, bool transpose_x=True, bool transpose_weight=False, int group_type=2, int? group_list_type=0) -> Tensor(a!)",  # noqa: E501
    "npu_quant_matmul_dequant(Tensor x, Tensor quantized_weight, Tensor weight_scale, *, Tensor? bias=None, Tensor? x_scale=None, Tensor? x_offset=None, Tensor? smooth_scale=None, str? quant_mode='pertoken') -> Tensor",  # noqa: E501
    "npu_quant_matmul_gelu(Tensor x1, Tensor x2, Tensor x1_scale, Tensor x2_scale, *, Tensor? bias=None, str? approximate='gelu_erf') -> Tensor",  # noqa: E501
    "npu_quant_matmul_reduce_sum(Tensor x1, Tensor x2, *, Tensor? x1_scale=None, Tensor? x2_scale=None) -> Tensor",
    "npu_dual_level_quant_matmul(Tensor x1, Tensor x2, Tensor x1_level0_scale, Tensor x2_level0_scale, Tensor x1_level1_scale, Tensor x2_level1_scale, *, Tensor? bias=None, int output_dtype=15) -> Tensor",  # noqa: E501
    "npu_dequant_bias(Tensor x, Tensor weight_scale, Tensor? activation_scale, Tensor? bias, *, ScalarType? output_dtype=None) -> Tensor",  # noqa: E501
    "npu_weight_quant_preprocess(Tensor weight, Tensor weight_scale, int x_dtype, int weight_dtype, int weight_scale_dtype, Tensor? weight_offset=None, Tensor? bias=None, int? x_scale_dtype=None, int? k_group_size=0) -> (Tensor, Tensor, Tensor, Tensor)",  # noqa: E501
    "npu_batch_gather_matmul(Tensor self, Tensor x, Tensor weight_b, Tensor indices, Tensor? weight_a=None, int layer_idx=0, float scale=1e-3, int y_offset=0, int y_slice_size=-1) -> Tensor",  # noqa: E501
    "npu_batch_gather_matmul_(Tensor(a!) self, Tensor x, Tensor weight_b, Tensor indices, Tensor? weight_a=None, int layer_idx=0, float scale=1e-3, int y_offset=0, int y_slice_size=-1) -> Tensor(a!)",  # noqa: E501
    "npu_fused_matmul(Tensor x1, Tensor x2, *, Tensor? bias=None, Tensor? x3=None, str fused_op_type='') -> Tensor",
    "npu_quant_conv2d(Tensor input, Tensor weight, Tensor scale, int[2] strides=1, int[2] pads=0, int[2] dilations=1, int groups=1, int offset_x=0, str round_mode='rint', int? output_dtype=None, Tensor? bias=None, Tensor? offset=None, int? input_dtype=None, int? weight_dtype=None) -> Tensor",  # noqa: E501
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[s.split("(", 1)[0] for s in SCHEMAS])
def test_schema_is_op_plugins(schema):
    name = schema.split("(", 1)[0]
    assert str(getattr(OPS, name).default._schema) == str(torch._C.parse_schema("npu::" + schema))
    assert getattr(torch_npu, name) is getattr(OPS, name)


# ------------------------------------------------------------------ npu_add_quant_matmul(_)


def mx_add_reference(y, x1, s1, x2, s2):
    """y[m, n] + sum_k x1[m, k] s1(m, k) x2[k, n] s2(k, n); s1 (M, pairs, 2), s2 (pairs, N, 2)."""
    m, k = x1.shape
    n = x2.shape[1]
    a, b = x1.double(), x2.double()
    out = y.double().clone()
    for i in range(m):
        for j in range(n):
            acc = 0.0
            for t in range(k):
                acc += a[i, t] * e8m0(s1[i, t // 64, (t // 32) % 2]) * b[t, j] * e8m0(s2[t // 64, j, (t // 32) % 2])
            out[i, j] += acc
    return out


def test_add_quant_matmul_mx_in_place_and_functional():
    m, n, k = 3, 5, 70  # 70: two 64-pairs, the last 32-block partial
    pairs = 2
    x1 = fp8(k, m, seed=1).t()  # the documented call: a (K, M) tensor seen as (M, K)
    x2 = fp8(k, n, seed=2, dtype=torch.float8_e5m2)
    s1 = scale_bytes(pairs, m, 2, seed=3).transpose(0, 1)  # (M, pairs, 2), transposed like x1
    s2 = scale_bytes(pairs, n, 2, seed=4)
    y = rnd(m, n, seed=5)
    kw = dict(x1_scale=s1, x1_scale_dtype=torch_npu.float8_e8m0fnu, x2_scale_dtype=torch_npu.float8_e8m0fnu,
              group_sizes=[1, 1, 32])
    expect = mx_add_reference(y, x1, s1, x2, s2)
    out = both(torch_npu.npu_add_quant_matmul, y, x1, x2, s2, **kw)
    assert out.dtype == torch.float32 and torch.allclose(out.double(), expect, rtol=1e-6, atol=1e-5)
    y0 = y.clone()
    yi = y.clone()
    ret = torch_npu.npu_add_quant_matmul_(yi, x1, x2, s2, **kw)
    assert ret is yi and torch.equal(yi, out) and torch.equal(y, y0)
    yn = y.npu()
    ret = torch_npu.npu_add_quant_matmul_(yn, x1.npu(), x2.npu(), s2.npu(), **{**kw, "x1_scale": s1.npu()})
    assert ret is yn and torch.equal(yn.cpu(), out)
    # float8_e8m0fnu scale tensors need no scale dtype argument
    out2 = torch_npu.npu_add_quant_matmul(y, x1, x2, s2.view(torch.float8_e8m0fnu),
                                          x1_scale=s1.view(torch.float8_e8m0fnu))
    assert torch.equal(out2, out)


def test_add_quant_matmul_errors():
    m, n, k = 2, 3, 64
    x1, x2 = fp8(m, k, seed=1), fp8(k, n, seed=2)
    s1, s2 = scale_bytes(m, 1, 2, seed=3), scale_bytes(1, n, 2, seed=4)
    y = torch.zeros(m, n)
    e8 = dict(x1_scale_dtype=torch_npu.float8_e8m0fnu, x2_scale_dtype=torch_npu.float8_e8m0fnu)
    with pytest.raises(RuntimeError, match="x1_scale should be a float32 tensor of shape \\[1\\]"):
        torch_npu.npu_add_quant_matmul(y, x1.view(torch.uint8), x2.view(torch.uint8), torch.ones(1),
                                       x1_scale=torch.ones(2), x1_dtype=torch_npu.hifloat8,
                                       x2_dtype=torch_npu.hifloat8)
    with pytest.raises(RuntimeError, match="x1_dtype and x2_dtype both"):
        torch_npu.npu_add_quant_matmul(y, x1.view(torch.uint8), x2, torch.ones(1), x1_scale=torch.ones(1),
                                       x1_dtype=torch_npu.hifloat8)
    with pytest.raises(RuntimeError, match="x1_scale should have shape"):
        torch_npu.npu_add_quant_matmul(y, x1, x2, s2, x1_scale=s1[:, :, :1], **e8)
    with pytest.raises(RuntimeError, match="x2_scale_dtype"):
        torch_npu.npu_add_quant_matmul(y, x1, x2, s2, x1_scale=s1, x1_scale_dtype=torch_npu.float8_e8m0fnu)
    with pytest.raises(RuntimeError, match="self should be a 2-D float32"):
        torch_npu.npu_add_quant_matmul(y.half(), x1, x2, s2, x1_scale=s1, **e8)
    with pytest.raises(RuntimeError, match="group_sizes"):
        torch_npu.npu_add_quant_matmul(y, x1, x2, s2, x1_scale=s1, group_sizes=[1, 1, 16], **e8)


# ------------------------------------------------------------------ npu_add_quant_gmm(_)


def gmm_mx_reference(y, x1, s1, x2, s2, sizes):
    """y[g] + x1[:, k_g] @ x2[k_g, :] with group g's scale pairs from start_g // 64 + g on."""
    out = y.double().clone()
    start = 0
    a, b = x1.double(), x2.double()
    for g, size in enumerate(sizes):
        for i in range(x1.shape[0]):
            for j in range(x2.shape[1]):
                acc = 0.0
                for t in range(start, start + size):
                    local = t - start
                    pair, half = start // 64 + g + local // 64, (local // 32) % 2
                    acc += a[i, t] * e8m0(s1[i, pair, half]) * b[t, j] * e8m0(s2[pair, j, half])
                out[g, i, j] += acc
        start += size
    return out


@pytest.mark.parametrize("group_list_type", [0, 1])
def test_add_quant_gmm_mx(group_list_type):
    m, n, k, g = 2, 3, 140, 3
    sizes = [70, 0, 60]  # an empty group, and 10 K rows past the last group
    x1 = fp8(k, m, seed=11).t()
    x2 = fp8(k, n, seed=12)
    pairs = k // 64 + g
    s1 = scale_bytes(pairs, m, 2, seed=13).permute(1, 0, 2)  # MindSpeed's rearrange 'n h f -> h n f'
    s2 = scale_bytes(pairs, n, 2, seed=14)
    y = rnd(g, m, n, seed=15)
    gl = torch.tensor(sizes if group_list_type else [70, 70, 130], dtype=torch.int64)
    kw = dict(x1_scale=s1, group_list_type=group_list_type, x1_scale_dtype=torch_npu.float8_e8m0fnu,
              x2_scale_dtype=torch_npu.float8_e8m0fnu)
    out = both(torch_npu.npu_add_quant_gmm, y, x1, x2, s2, gl, **kw)
    assert torch.allclose(out.double(), gmm_mx_reference(y, x1, s1, x2, s2, sizes), rtol=1e-6, atol=1e-5)
    yi = y.clone()
    assert torch_npu.npu_add_quant_gmm_(yi, x1, x2, s2, gl, **kw) is yi and torch.equal(yi, out)


def test_add_quant_gmm_with_grouped_mx_quant_scales():
    """MindSpeed's wgrad: scales from npu_grouped_dynamic_mx_quant of the token-major tensors."""
    tokens, h, ffn = 96, 4, 3
    group_list = torch.tensor([40, 96], dtype=torch.int64)
    x = rnd(tokens, h, seed=21).bfloat16()
    grad = rnd(tokens, ffn, seed=22).bfloat16()
    xq, xs = torch_npu.npu_grouped_dynamic_mx_quant(x, group_list.to(torch.int32), dst_type=torch.float8_e4m3fn)
    gq, gs = torch_npu.npu_grouped_dynamic_mx_quant(grad, group_list.to(torch.int32), dst_type=torch.float8_e4m3fn)
    main_grad = torch.zeros(2, h, ffn)
    torch_npu.npu_add_quant_gmm_(main_grad, xq.t(), gq, gs, group_list, x1_scale=xs.permute(1, 0, 2),
                                 group_list_type=0, x1_scale_dtype=torch_npu.float8_e8m0fnu,
                                 x2_scale_dtype=torch_npu.float8_e8m0fnu)
    x, grad = x.float(), grad.float()
    expect = torch.stack([x[:40].t() @ grad[:40], x[40:].t() @ grad[40:]])
    assert torch.allclose(main_grad, expect, rtol=0.15, atol=0.6)


def test_add_quant_gmm_errors():
    x1, x2 = fp8(2, 64, seed=1), fp8(64, 3, seed=2)
    s1, s2 = scale_bytes(2, 3, 2, seed=3), scale_bytes(3, 3, 2, seed=4)
    e8 = dict(x1_scale=s1, x1_scale_dtype=torch_npu.float8_e8m0fnu, x2_scale_dtype=torch_npu.float8_e8m0fnu)
    y = torch.zeros(2, 2, 3)
    with pytest.raises(RuntimeError, match="group_sizes is not supported"):
        torch_npu.npu_add_quant_gmm(y, x1, x2, s2, torch.tensor([30, 64]), group_sizes=[1, 1, 32], **e8)
    with pytest.raises(RuntimeError, match="group_list .* should be"):
        torch_npu.npu_add_quant_gmm(y, x1, x2, s2, torch.tensor([40, 30]), **e8)
    with pytest.raises(RuntimeError, match="group_list should have 2 entries"):
        torch_npu.npu_add_quant_gmm(y, x1, x2, s2, torch.tensor([64]), **e8)
    with pytest.raises(RuntimeError, match="group_list_type"):
        torch_npu.npu_add_quant_gmm(y, x1, x2, s2, torch.tensor([30, 64]), group_list_type=2, **e8)


# ------------------------------------------------------------------ npu_quant_(grouped_)matmul_dequant


def dequant_reference(x, w, ws, xs=None, smooth=None, pertensor=False):
    """Rows quantised (dynamic: row max / 127) then (x_q @ w^T) * ws * x_scale, float16."""
    m, k = x.shape
    out = torch.zeros(m, w.shape[0], dtype=torch.float64)
    for i in range(m):
        row = [float(x[i, t]) * (float(smooth[t]) if smooth is not None else 1.0) for t in range(k)]
        row = torch.tensor(row, dtype=torch.float32)
        s = float(xs[0] if pertensor else xs[i]) if xs is not None else float(row.abs().max() / 127)
        q = torch.clamp(torch.round(row / s), -128, 127).double() if s > 0 else torch.zeros(k, dtype=torch.float64)
        for j in range(w.shape[0]):
            out[i, j] = float((q * w[j].double()).sum()) * float(ws[j]) * s
    return out


def test_quant_matmul_dequant_dynamic_and_static():
    m, n, k = 4, 6, 32
    x = rnd(m, k, seed=31).half()
    x[2] = 0  # an all-zero row quantises to zeros
    w = ints(n, k, seed=32)
    ws = rnd(n, seed=33, lo=0.01, hi=0.05)
    out = both(torch_npu.npu_quant_matmul_dequant, x, w, ws, quant_mode="pertoken")
    assert out.dtype == torch.float16 and out.shape == (m, n)
    assert torch.allclose(out.double(), dequant_reference(x, w, ws), rtol=2e-3, atol=1e-3)
    smooth = rnd(k, seed=34, lo=0.5, hi=1.5).half()
    xs = torch.tensor([0.02])
    out = both(torch_npu.npu_quant_matmul_dequant, x, w, ws, x_scale=xs, smooth_scale=smooth, quant_mode="pertensor")
    assert torch.allclose(out.double(), dequant_reference(x, w, ws, xs, smooth, pertensor=True), rtol=2e-3, atol=1e-3)
    # int64 weight scale: weight_scale * x_scale folded in advance (float32 bits), float16 pertensor x_scale
    folded = float_bits_int64(ws * 0.02)
    out64 = torch_npu.npu_quant_matmul_dequant(x, w, folded, x_scale=torch.tensor([0.02]).half(),
                                               smooth_scale=smooth, quant_mode="pertensor")
    assert torch.allclose(out64.double(), dequant_reference(x, w, ws, xs, smooth, pertensor=True), rtol=4e-3,
                          atol=2e-3)


def test_quant_grouped_matmul_dequant():
    g, m, n, k = 3, 6, 4, 16
    x = rnd(m, k, seed=41).half()
    w = ints(g, n, k, seed=42)
    ws = rnd(g, n, seed=43, lo=0.01, hi=0.05)
    gl = torch.tensor([2, 2, 5])  # cumsum; group 1 empty, row 5 past the last group
    out = both(torch_npu.npu_quant_grouped_matmul_dequant, x, w, ws, gl, quant_mode="pertoken")
    expect = torch.zeros(m, n, dtype=torch.float64)
    for grp, (s, e) in enumerate([(0, 2), (2, 2), (2, 5)]):
        if e > s:
            expect[s:e] = dequant_reference(x[s:e], w[grp], ws[grp])
    assert torch.allclose(out.double(), expect, rtol=2e-3, atol=1e-3)
    assert torch.equal(out[5], torch.zeros(n, dtype=torch.float16))


def test_dequant_errors():
    x, w, ws = rnd(2, 16, seed=1).half(), ints(3, 16, seed=2), torch.ones(3)
    with pytest.raises(RuntimeError, match="x should be a 2-D float16"):
        torch_npu.npu_quant_matmul_dequant(x.float(), w, ws)
    with pytest.raises(RuntimeError, match="bias is not supported"):
        torch_npu.npu_quant_matmul_dequant(x, w, ws, bias=torch.zeros(3, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="supports only quant_mode 'pertoken'"):
        torch_npu.npu_quant_matmul_dequant(x, w, ws, quant_mode="pertensor")
    with pytest.raises(RuntimeError, match="quant_mode should be"):
        torch_npu.npu_quant_matmul_dequant(x, w, ws, quant_mode="perchannel")
    with pytest.raises(RuntimeError, match="weight_scale should be a float32"):
        torch_npu.npu_quant_grouped_matmul_dequant(x, w.unsqueeze(0), ws, torch.tensor([2]))


# ------------------------------------------------------------------ npu_transpose_quant_batchmatmul


def test_transpose_quant_batchmatmul_kc():
    m, b, k, n = 3, 2, 8, 5
    x1 = fp8(m, b, k, seed=51)
    x2 = fp8(b, k, n, seed=52)
    s1 = rnd(m, seed=53, lo=0.5, hi=2)
    s2 = rnd(n, seed=54, lo=0.5, hi=2)
    out = both(torch_npu.npu_transpose_quant_batchmatmul, x1, x2, torch.bfloat16, x1_scale=s1, x2_scale=s2,
               perm_x1=[1, 0, 2], perm_x2=[0, 1, 2], perm_y=[1, 0, 2])
    assert out.shape == (m, b, n) and out.dtype == torch.bfloat16
    expect = torch.zeros(m, b, n, dtype=torch.float64)
    for i in range(m):
        for bb in range(b):
            for j in range(n):
                expect[i, bb, j] = sum(float(x1[i, bb, t].float()) * float(x2[bb, t, j].float())
                                       for t in range(k)) * float(s2[j]) * float(s1[i])
    assert torch.allclose(out.double(), expect, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("perm_x2", [[0, 1, 2], [0, 2, 1]])
def test_transpose_quant_batchmatmul_mx(perm_x2):
    m, b, k, n = 2, 2, 96, 3
    pairs = 2
    x1 = fp8(m, b, k, seed=61)
    s1 = scale_bytes(m, b, pairs, 2, seed=62, lo=118, hi=128).view(torch.float8_e8m0fnu)
    if perm_x2 == [0, 1, 2]:
        x2 = fp8(b, k, n, seed=63)
        s2 = scale_bytes(b, pairs, n, 2, seed=64, lo=118, hi=128)
        w = lambda bb, t, j: float(x2[bb, t, j].float()) * e8m0(s2[bb, t // 64, j, (t // 32) % 2])  # noqa: E731
    else:
        x2 = fp8(b, n, k, seed=63)
        s2 = scale_bytes(b, n, pairs, 2, seed=64, lo=118, hi=128)
        w = lambda bb, t, j: float(x2[bb, j, t].float()) * e8m0(s2[bb, j, t // 64, (t // 32) % 2])  # noqa: E731
    out = both(torch_npu.npu_transpose_quant_batchmatmul, x1, x2, torch.float16, x1_scale=s1,
               x2_scale=s2.view(torch.float8_e8m0fnu), group_sizes=(0, 0, 32), perm_x1=(1, 0, 2), perm_x2=perm_x2,
               perm_y=(1, 0, 2))
    s1b = s1.view(torch.uint8)
    expect = torch.zeros(m, b, n, dtype=torch.float64)
    for i in range(m):
        for bb in range(b):
            for j in range(n):
                expect[i, bb, j] = sum(float(x1[i, bb, t].float()) * e8m0(s1b[i, bb, t // 64, (t // 32) % 2]) *
                                       w(bb, t, j) for t in range(k))
    assert torch.allclose(out.double(), expect, rtol=2e-3, atol=1e-3)


def test_transpose_quant_batchmatmul_errors():
    x1, x2 = fp8(2, 2, 8, seed=1), fp8(2, 8, 3, seed=2)
    s1, s2 = torch.ones(2), torch.ones(3)
    with pytest.raises(RuntimeError, match="perm_x1 should be"):
        torch_npu.npu_transpose_quant_batchmatmul(x1, x2, torch.float16, x1_scale=s1, x2_scale=s2, perm_x1=[0, 1, 2])
    with pytest.raises(RuntimeError, match="dtype should be one of"):
        torch_npu.npu_transpose_quant_batchmatmul(x1, x2, torch.float32, x1_scale=s1, x2_scale=s2)
    with pytest.raises(RuntimeError, match="T-C quantisation takes x1_scale None or float32 of shape"):
        torch_npu.npu_transpose_quant_batchmatmul(x1.view(torch.uint8), x2.view(torch.uint8), torch.float16,
                                                  x1_scale=s1, x2_scale=s2, x1_dtype=torch_npu.hifloat8,
                                                  x2_dtype=torch_npu.hifloat8)
    with pytest.raises(RuntimeError, match="x1_dtype and x2_dtype both"):
        torch_npu.npu_transpose_quant_batchmatmul(x1.view(torch.uint8), x2, torch.float16, x2_scale=s2,
                                                  x1_dtype=torch_npu.hifloat8)
    with pytest.raises(RuntimeError, match="batch_split_factor"):
        torch_npu.npu_transpose_quant_batchmatmul(x1, x2, torch.float16, x1_scale=s1, x2_scale=s2,
                                                  batch_split_factor=2)


# ------------------------------------------------------------------ npu_matmul_compress_dequant


def test_matmul_compress_dequant_is_not_supported():
    x1 = ints(2, 256, seed=1)
    x2 = ints(256 * 128, seed=2)
    index = ints(8, seed=3)
    bias = torch.zeros(1, 128, dtype=torch.int32)
    scale = float_bits_int64(torch.ones(1, 128)).to(torch.uint64)
    with pytest.raises(RuntimeError, match="not supported on vNPU: msModelSlim"):
        torch_npu.npu_matmul_compress_dequant(x1, x2, index, bias, scale)
    with pytest.raises(RuntimeError, match="offsetX currently only supports 0"):
        torch_npu.npu_matmul_compress_dequant(x1, x2, index, bias, scale, offsetX=1)
    with pytest.raises(RuntimeError, match="bias should be a 2-D int32"):
        torch_npu.npu_matmul_compress_dequant(x1, x2, index, bias[0], scale)


# ------------------------------------------------------------------ grouped matmul + SwiGLU + quant


def swiglu_quant_reference(c, qmax=127.0):
    """c (rows, n) float64 -> (q values before the cast, scale): SwiGLU of the halves, per-row max scale."""
    half = c.shape[1] // 2
    act, gate = c[:, :half], c[:, half:]
    s = act / (1 + torch.exp(-act)) * gate
    scale = s.abs().amax(dim=1) / qmax
    return s / scale.unsqueeze(1), scale


def grouped_c(x, w, ws, xs, sizes):
    """C rows of each group: (x_g @ w_g) * x_scale * w_scale, float64."""
    rows = []
    start = 0
    for g, size in enumerate(sizes):
        for i in range(start, start + size):
            rows.append((x[i].double() @ w[g].double()) * float(xs[i]) * ws[g].double())
        start += size
    return torch.stack(rows)


def test_grouped_matmul_swiglu_quant_a8w8():
    e, m, k, n = 3, 7, 16, 8
    x = ints(m, k, seed=71)
    w = ints(e, k, n, seed=72)
    ws = rnd(e, n, seed=73, lo=0.001, hi=0.01)
    xs = rnd(m, seed=74, lo=0.01, hi=0.1)
    gl = torch.tensor([3, 3, 6])  # cumsum; group 1 empty; row 6 past the last group
    q, scale, offset = both(torch_npu.npu_grouped_matmul_swiglu_quant, x, w, gl, ws, xs)
    assert q.dtype == torch.int8 and q.shape == (m, n // 2) and scale.shape == (m,) and offset.shape == ()
    qv, sv = swiglu_quant_reference(grouped_c(x, w, ws, xs, [3, 0, 3]))
    assert torch.allclose(scale[:6].double(), sv, rtol=1e-5)
    assert (q[:6].double() - torch.round(qv)).abs().max() <= 1
    assert torch.equal(q[6], torch.zeros(n // 2, dtype=torch.int8)) and scale[6] == 0


def test_grouped_matmul_swiglu_quant_a8w4_equals_a8w8_with_documented_assist():
    e, m, k, n = 2, 5, 16, 16
    x = ints(m, k, seed=81)
    wv = ints(e, k, n, seed=82, lo=-8, hi=8)
    ws = rnd(e, n, seed=83, lo=0.001, hi=0.01)
    xs = rnd(m, seed=84, lo=0.01, hi=0.1)
    gl = torch.tensor([2, 5])
    assist = 8 * ws * wv.double().sum(1).float()  # 8 * weight_scale * sum_k(weight), generated offline
    scale64 = float_bits_int64(ws)
    q4, s4, _ = both(torch_npu.npu_grouped_matmul_swiglu_quant, x, pack_int4(wv), gl, scale64, xs, bias=assist)
    q8, s8, _ = torch_npu.npu_grouped_matmul_swiglu_quant(x, wv, gl, ws, xs)
    assert torch.allclose(s4, s8, rtol=1e-5) and (q4.int() - q8.int()).abs().max() <= 1


def test_grouped_matmul_swiglu_quant_v2_a8w8_count_and_a4w4_smooth():
    e, m, k, n = 2, 5, 16, 8
    x = ints(m, k, seed=91)
    w = ints(e, k, n, seed=92)
    ws = rnd(e, n, seed=93, lo=0.001, hi=0.01)
    xs = rnd(m, seed=94, lo=0.01, hi=0.1)
    q, scale = both(torch_npu.npu_grouped_matmul_swiglu_quant_v2, x, [w], [ws], xs, torch.tensor([2, 3]),
                    group_list_type=1, dequant_dtype=torch.float32)
    qv, sv = swiglu_quant_reference(grouped_c(x, w, ws, xs, [2, 3]))
    assert torch.allclose(scale.double(), sv, rtol=1e-5) and (q.double() - torch.round(qv)).abs().max() <= 1
    # A4W4: int4 values packed eight to an int32, uint64 scale bits, smooth_scale (E,) broadcast
    x4, w4 = ints(m, k, seed=95, lo=-8, hi=8), ints(e, k, n, seed=96, lo=-8, hi=8)
    smooth = torch.tensor([0.5, 2.0])
    q, scale = both(torch_npu.npu_grouped_matmul_swiglu_quant_v2, pack_int4(x4), [pack_int4(w4)],
                    [float_bits_int64(ws)], xs, torch.tensor([2, 5]), smooth_scale=smooth)
    c = grouped_c(x4, w4, ws, xs, [2, 3])
    half = n // 2
    s = c[:, :half] / (1 + torch.exp(-c[:, :half])) * c[:, half:]
    s = s * torch.tensor([0.5, 0.5, 2.0, 2.0, 2.0], dtype=torch.float64).unsqueeze(1)
    sv = s.abs().amax(1) / 127
    assert torch.allclose(scale.double(), sv, rtol=1e-5)
    assert (q.double() - torch.round(s / sv.unsqueeze(1))).abs().max() <= 1


def test_grouped_matmul_swiglu_quant_v2_float8_pertoken():
    """vllm-ascend's A5 call: float8 x / weight, float32 scales, float8 output with max|S| / 448 scales."""
    e, m, k, n = 2, 4, 32, 8
    x, w = fp8(m, k, seed=101), fp8(e, k, n, seed=102)
    ws = rnd(e, n, seed=103, lo=0.01, hi=0.1)
    xs = rnd(m, seed=104, lo=0.1, hi=1.0)
    q, scale = both(torch_npu.npu_grouped_matmul_swiglu_quant_v2, x=x, weight=[w], weight_scale=[ws], x_scale=xs,
                    group_list=torch.tensor([1, 4]), quant_dtype=torch.float8_e4m3fn, dequant_dtype=torch.float32)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (m, n // 2)
    qv, sv = swiglu_quant_reference(grouped_c(x.float(), w.float(), ws, xs, [1, 3]), qmax=448.0)
    assert torch.allclose(scale.double(), sv, rtol=1e-5)
    assert torch.equal(q.view(torch.uint8), qv.float().to(torch.float8_e4m3fn).view(torch.uint8))


def mx_quant_reference(s, emax, dtype):
    """OCP MX of rows s (float64) in 32-blocks: byte = 127 + floor(log2(amax)) - emax, values saturated."""
    rows, cols = s.shape
    nb = -(-cols // 32)
    q = torch.zeros(rows, cols, dtype=torch.float32)
    byte = torch.zeros(rows, nb + nb % 2, dtype=torch.uint8)
    maxv = torch.finfo(dtype).max
    for i in range(rows):
        for blk in range(nb):
            seg = s[i, blk * 32:(blk + 1) * 32]
            amax = float(seg.abs().max())
            b = max(127 + math.floor(math.log2(amax)) - emax, 0) if amax > 0 else 0
            byte[i, blk] = b
            q[i, blk * 32:(blk + 1) * 32] = (seg.float() * 2.0 ** (127 - b)).clamp(-maxv, maxv) if b else 0
    return q.to(dtype), byte.view(rows, -1, 2)


def test_grouped_matmul_swiglu_quant_v2_mxfp8():
    e, m, k, n = 2, 3, 64, 128
    x = fp8(m, k, seed=111)
    w = fp8(e, k, n, seed=112)
    xs = scale_bytes(m, 1, 2, seed=113)
    ws = scale_bytes(e, 1, n, 2, seed=114)
    q, scale = both(torch_npu.npu_grouped_matmul_swiglu_quant_v2, x, [w], [ws], xs, torch.tensor([1, 3]),
                    dequant_mode=2, quant_mode=2, dequant_dtype=torch.float32, quant_dtype=torch.float8_e4m3fn,
                    weight_scale_dtype=torch_npu.float8_e8m0fnu, x_scale_dtype=torch_npu.float8_e8m0fnu)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (m, n // 2) and scale.shape == (m, 1, 2)
    c = torch.zeros(m, n, dtype=torch.float64)
    for i in range(m):
        g = 0 if i < 1 else 1
        for j in range(n):
            c[i, j] = sum(float(x[i, t].float()) * e8m0(xs[i, 0, t // 32]) * float(w[g, t, j].float()) *
                          e8m0(ws[g, 0, j, t // 32]) for t in range(k))
    half = n // 2
    s = (c[:, :half] / (1 + torch.exp(-c[:, :half])) * c[:, half:]).float().double()
    q_ref, byte_ref = mx_quant_reference(s, 8, torch.float8_e4m3fn)
    assert torch.equal(scale, byte_ref)
    assert (q.float() - q_ref.float()).abs().max() <= 0.0625 * q_ref.float().abs().max()


def test_grouped_matmul_swiglu_quant_errors():
    x, w = ints(4, 16, seed=1), ints(2, 16, 8, seed=2)
    ws, xs, gl = torch.ones(2, 8), torch.ones(4), torch.tensor([2, 4])
    with pytest.raises(RuntimeError, match="offset is reserved"):
        torch_npu.npu_grouped_matmul_swiglu_quant(x, w, gl, ws, xs, offset=torch.zeros(2, 8))
    with pytest.raises(RuntimeError, match="x_scale should be a float32 tensor of shape \\[4\\]"):
        torch_npu.npu_grouped_matmul_swiglu_quant(x, w, gl, ws, xs[:3])
    with pytest.raises(RuntimeError, match="size of weight should be 1"):
        torch_npu.npu_grouped_matmul_swiglu_quant_v2(x, [w, w], [ws], xs, gl)
    with pytest.raises(RuntimeError, match="quant_dtype torch.int8"):
        torch_npu.npu_grouped_matmul_swiglu_quant_v2(x, [w], [ws], xs, gl, quant_dtype=torch.float8_e4m3fn)
    with pytest.raises(RuntimeError, match="quant_dtype torch.int8, got hifloat8"):
        torch_npu.npu_grouped_matmul_swiglu_quant_v2(x, [w], [ws], xs, gl, quant_dtype=torch_npu.hifloat8)
    with pytest.raises(RuntimeError, match="hifloat8 is not supported on vNPU: .*per-token quantisation only"):
        torch_npu.npu_grouped_matmul_swiglu_quant_v2(x.view(torch.uint8), [w.view(torch.uint8)], [ws], xs, gl,
                                                     dequant_mode=2, quant_mode=2, x_dtype=torch_npu.hifloat8,
                                                     weight_dtype=torch_npu.hifloat8)
    with pytest.raises(RuntimeError, match="quant_dtype all torch_npu.hifloat8"):
        torch_npu.npu_grouped_matmul_swiglu_quant_v2(x.view(torch.uint8), [w.view(torch.uint8)], [ws], xs, gl,
                                                     x_dtype=torch_npu.hifloat8, weight_dtype=torch_npu.hifloat8)
    with pytest.raises(RuntimeError, match="MX quantisation needs"):
        torch_npu.npu_grouped_matmul_swiglu_quant_v2(x, [w], [ws], xs, gl, dequant_mode=2)


# ------------------------------------------------------------------ npu_grouped_matmul_add(_)


@pytest.mark.parametrize("dtype,group_list_type,flat", [(torch.float16, 0, False), (torch.bfloat16, 1, True)])
def test_grouped_matmul_add(dtype, group_list_type, flat):
    k, m, n, g = 10, 3, 4, 3
    x = rnd(k, m, seed=121).to(dtype)
    w = rnd(k, n, seed=122).to(dtype)
    sizes = [4, 0, 5]  # row 9 of K past the last group
    gl = torch.tensor(sizes if group_list_type else [4, 4, 9])
    y = rnd(g, m, n, seed=123)
    y_in = y.reshape(g * m, n) if flat else y  # MindSpeed passes main_grad.view(-1, n)
    expect = y.double().clone()
    start = 0
    for grp, size in enumerate(sizes):
        for i in range(m):
            for j in range(n):
                expect[grp, i, j] += sum(float(x[t, i]) * float(w[t, j]) for t in range(start, start + size))
        start += size
    out = both(torch_npu.npu_grouped_matmul_add, y_in, x, w, gl, transpose_x=True, transpose_weight=False,
               group_type=2, group_list_type=group_list_type)
    assert out.shape == y_in.shape and torch.allclose(out.reshape(g, m, n).double(), expect, rtol=1e-6, atol=1e-5)
    before = y_in.clone()
    assert torch.equal(y_in, before)
    yi = y_in.clone().npu()
    ret = torch_npu.npu_grouped_matmul_add_(yi, x.npu(), w.npu(), gl.npu(), group_list_type=group_list_type)
    assert ret is yi and torch.equal(yi.cpu(), out)


def test_grouped_matmul_add_errors():
    x, w, y = rnd(8, 2, seed=1).half(), rnd(8, 3, seed=2).half(), torch.zeros(2, 2, 3)
    gl = torch.tensor([4, 8])
    with pytest.raises(RuntimeError, match="group_type only supports 2"):
        torch_npu.npu_grouped_matmul_add_(y, x, w, gl, group_type=0)
    with pytest.raises(RuntimeError, match="transpose_x only supports True"):
        torch_npu.npu_grouped_matmul_add_(y, x, w, gl, transpose_x=False)
    with pytest.raises(RuntimeError, match="both be float16 or both bfloat16"):
        torch_npu.npu_grouped_matmul_add_(y, x, w.bfloat16(), gl)
    with pytest.raises(RuntimeError, match="self should have shape"):
        torch_npu.npu_grouped_matmul_add_(torch.zeros(3, 2, 3), x, w, gl)


# ------------------------------------------------------------------ npu_quant_matmul_gelu / reduce_sum


def gelu_ref(v, tanh):
    if tanh:
        return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    return 0.5 * v * (1 + math.erf(v / math.sqrt(2)))


def test_quant_matmul_gelu_a8w8_biases_and_batch():
    b, m, k, n = 2, 3, 16, 4
    x1, x2 = ints(b, m, k, seed=131), ints(k, n, seed=132)
    s1, s2 = rnd(m, seed=133, lo=0.001, hi=0.01), rnd(n, seed=134, lo=0.01, hi=0.1)
    bias_i = ints(n, seed=135, lo=-100, hi=100, dtype=torch.int32)
    out = both(torch_npu.npu_quant_matmul_gelu, x1, x2, s1, s2, bias=bias_i)
    assert out.shape == (b, m, n) and out.dtype == torch.float16
    bias_f = rnd(b, 1, n, seed=136).bfloat16()
    out_t = both(torch_npu.npu_quant_matmul_gelu, x1, x2, s1, s2, bias=bias_f, approximate="gelu_tanh")
    assert out_t.dtype == torch.bfloat16  # a bfloat16 bias makes the output bfloat16
    for bb in range(b):
        for i in range(m):
            for j in range(n):
                acc = sum(int(x1[bb, i, t]) * int(x2[t, j]) for t in range(k))
                ref = gelu_ref((acc + int(bias_i[j])) * float(s2[j]) * float(s1[i]), False)
                assert abs(float(out[bb, i, j]) - ref) <= 2e-3 * abs(ref) + 1e-3
                ref_t = gelu_ref(acc * float(s2[j]) * float(s1[i]) + float(bias_f[bb, 0, j]), True)
                assert abs(float(out_t[bb, i, j]) - ref_t) <= 1e-2 * abs(ref_t) + 1e-2


def test_quant_matmul_gelu_a4w4():
    m, k, n = 3, 16, 8
    a, w = ints(m, k, seed=141, lo=-8, hi=8), ints(k, n, seed=142, lo=-8, hi=8)
    s1, s2 = rnd(m, seed=143, lo=0.05, hi=0.1), rnd(n, seed=144, lo=0.05, hi=0.1).bfloat16()
    out = both(torch_npu.npu_quant_matmul_gelu, pack_int4(a), pack_int4(w), s1, s2)
    out_t = torch_npu.npu_quant_matmul_gelu(pack_int4(a), pack_int4(w.t()).t(), s1, s2)  # packed along k
    assert out.dtype == torch.bfloat16 and torch.equal(out, out_t)
    for i in range(m):
        for j in range(n):
            ref = gelu_ref(sum(int(a[i, t]) * int(w[t, j]) for t in range(k)) * float(s2[j]) * float(s1[i]), False)
            assert abs(float(out[i, j]) - ref) <= 1e-2 * abs(ref) + 1e-2


def test_quant_matmul_reduce_sum():
    b, m, k, n = 3, 2, 8, 4
    x1, x2 = ints(b, m, k, seed=151), ints(b, k, n, seed=152)
    s1, s2 = rnd(b, m, seed=153, lo=0.001, hi=0.01), rnd(n, seed=154, lo=0.01, hi=0.1).bfloat16()
    out = both(torch_npu.npu_quant_matmul_reduce_sum, x1, x2, x1_scale=s1, x2_scale=s2)
    assert out.shape == (m, n) and out.dtype == torch.bfloat16
    for i in range(m):
        for j in range(n):
            ref = sum(sum(int(x1[bb, i, t]) * int(x2[bb, t, j]) for t in range(k)) * float(s1[bb, i]) *
                      float(s2[j]) for bb in range(b))
            assert abs(float(out[i, j]) - ref) <= 1e-2 * abs(ref) + 1e-3
    with pytest.raises(RuntimeError, match="x2_scale should be a bfloat16"):
        torch_npu.npu_quant_matmul_reduce_sum(x1, x2, x1_scale=s1, x2_scale=s2.float())
    with pytest.raises(RuntimeError, match="x1_scale should be a float32"):
        torch_npu.npu_quant_matmul_reduce_sum(x1, x2, x2_scale=s2)


def test_quant_matmul_gelu_errors():
    x1, x2, s1, s2 = ints(2, 8, seed=1), ints(8, 3, seed=2), torch.ones(2), torch.ones(3)
    with pytest.raises(RuntimeError, match="approximate must be"):
        torch_npu.npu_quant_matmul_gelu(x1, x2, s1, s2, approximate="relu")
    with pytest.raises(RuntimeError, match="only A8W8"):
        torch_npu.npu_quant_matmul_gelu(x1.float(), x2, s1, s2)
    with pytest.raises(RuntimeError, match="x1_scale should be float32 of shape \\[2\\]"):
        torch_npu.npu_quant_matmul_gelu(x1, x2, torch.ones(3), s2)


# ------------------------------------------------------------------ npu_dual_level_quant_matmul


def test_dual_level_quant_matmul():
    m, n, k = 2, 3, 1024 + 64  # three level-0 groups, the last one partial
    c1 = torch.randint(0, 16, (m, k), generator=gen(161))
    c2 = torch.randint(0, 16, (n, k), generator=gen(162))
    g0, pairs = 3, k // 64
    l0a, l0b = rnd(m, g0, seed=163, lo=-1, hi=1), rnd(g0, n, seed=164, lo=-1, hi=1)
    l1a, l1b = scale_bytes(m, pairs, 2, seed=165, lo=124, hi=130), scale_bytes(n, pairs, 2, seed=166, lo=124, hi=130)
    bias = rnd(n, seed=167)
    out = both(torch_npu.npu_dual_level_quant_matmul, fp4_pack(c1), fp4_pack(c2), l0a, l0b, l1a, l1b, bias=bias,
               output_dtype=torch.bfloat16)
    assert out.shape == (m, n) and out.dtype == torch.bfloat16
    for i in range(m):
        for j in range(n):
            total = float(bias[j])
            for grp in range(g0):
                acc = 0.0
                for t in range(grp * 512, min((grp + 1) * 512, k)):
                    acc += fp4_value(c1[i, t]) * e8m0(l1a[i, t // 64, (t // 32) % 2]) * \
                        fp4_value(c2[j, t]) * e8m0(l1b[j, t // 64, (t // 32) % 2])
                total += acc * float(l0a[i, grp]) * float(l0b[grp, j])
            assert abs(float(out[i, j]) - total) <= 1e-2 * abs(total) + 1e-2
    with pytest.raises(RuntimeError, match="x2_level0_scale should be float32 of shape"):
        torch_npu.npu_dual_level_quant_matmul(fp4_pack(c1), fp4_pack(c2), l0a, l0b[:2], l1a, l1b)
    with pytest.raises(RuntimeError, match="output_dtype should be one of"):
        torch_npu.npu_dual_level_quant_matmul(fp4_pack(c1), fp4_pack(c2), l0a, l0b, l1a, l1b,
                                              output_dtype=torch.float32)


# ------------------------------------------------------------------ npu_dequant_bias


def test_dequant_bias():
    m, n = 3, 4
    x = ints(m, n, seed=171, lo=-1000, hi=1000, dtype=torch.int32)
    ws, act = rnd(n, seed=172, lo=0.01, hi=0.1), rnd(m, seed=173, lo=0.5, hi=2)
    bias_i = ints(n, seed=174, lo=-50, hi=50, dtype=torch.int32)
    bias_f = rnd(n, seed=175)
    out_i = both(torch_npu.npu_dequant_bias, x, ws, act, bias_i)
    out_f = both(torch_npu.npu_dequant_bias, x, ws, None, bias_f, output_dtype=torch.float16)
    out_b = both(torch_npu.npu_dequant_bias, x, ws.bfloat16(), act, None, output_dtype=torch.bfloat16)
    assert out_i.dtype == torch.float16 and out_b.dtype == torch.bfloat16
    for i in range(m):
        for j in range(n):
            ref_i = (int(x[i, j]) + int(bias_i[j])) * float(ws[j]) * float(act[i])
            ref_f = int(x[i, j]) * float(ws[j]) + float(bias_f[j])
            ref_b = int(x[i, j]) * float(ws.bfloat16()[j]) * float(act[i])
            assert abs(float(out_i[i, j]) - ref_i) <= 1e-3 * abs(ref_i) + 1e-3
            assert abs(float(out_f[i, j]) - ref_f) <= 1e-3 * abs(ref_f) + 1e-3
            assert abs(float(out_b[i, j]) - ref_b) <= 1e-2 * abs(ref_b) + 1e-2
    with pytest.raises(RuntimeError, match="output_dtype should be torch.bfloat16 for a torch.bfloat16"):
        torch_npu.npu_dequant_bias(x, ws.bfloat16(), None, None)
    with pytest.raises(RuntimeError, match="x should be a 2-D int32"):
        torch_npu.npu_dequant_bias(x.float(), ws, None, None)


# ------------------------------------------------------------------ npu_weight_quant_preprocess


@pytest.mark.parametrize("gmm", [False, True])
def test_weight_quant_preprocess_keeps_values_and_layout(gmm):
    k, n = 128, 64
    if gmm:
        weight = ints(2, n, k // 2, seed=181, lo=0, hi=256, dtype=torch.uint8).transpose(1, 2)
        scale = scale_bytes(2, n, k // 64, 2, seed=182).transpose(1, 2)
    else:
        weight = ints(n, k // 2, seed=181, lo=0, hi=256, dtype=torch.uint8).transpose(0, 1)
        scale = scale_bytes(n, k // 64, 2, seed=182).transpose(0, 1)
    outs = both(torch_npu.npu_weight_quant_preprocess, weight, scale, x_dtype=torch.float8_e4m3fn,
                weight_dtype=torch_npu.float4_e2m1fn_x2, weight_scale_dtype=torch_npu.float8_e8m0fnu,
                x_scale_dtype=torch_npu.float8_e8m0fnu, k_group_size=32)
    ow, os_, oo, ob = outs
    assert torch.equal(ow, weight) and ow.stride() == weight.stride() and ow.dtype == weight.dtype
    assert torch.equal(os_, scale) and os_.stride() == scale.stride()
    assert oo.shape == (0,) and ob.shape == (0,) and oo.dtype == weight.dtype
    with pytest.raises(RuntimeError, match="should be transposed"):
        torch_npu.npu_weight_quant_preprocess(weight.contiguous(), scale, torch.float8_e4m3fn,
                                              torch_npu.float4_e2m1fn_x2, torch_npu.float8_e8m0fnu,
                                              x_scale_dtype=torch_npu.float8_e8m0fnu)
    with pytest.raises(RuntimeError, match="unsupported data flow"):
        torch_npu.npu_weight_quant_preprocess(weight, scale, torch.int8, torch_npu.float4_e2m1fn_x2,
                                              torch_npu.float8_e8m0fnu, x_scale_dtype=torch_npu.float8_e8m0fnu)


# ------------------------------------------------------------------ npu_batch_gather_matmul(_)


def test_batch_gather_matmul():
    bsz, h1, r, h3, loras, layers = 4, 16, 8, 48, 2, 2
    y = rnd(bsz, h3, seed=191).half()
    x = rnd(bsz, h1, seed=192).half()
    wa = (rnd(loras, layers, r, h1, seed=193) * 0.3).half()
    wb = (rnd(loras, layers, 32, r, seed=194) * 0.3).half()
    idx = torch.tensor([1, 0, -1, 1], dtype=torch.int32)  # -1: no LoRA for that row
    out = both(torch_npu.npu_batch_gather_matmul, y, x, wb, idx, wa, layer_idx=1, scale=2.0, y_offset=8,
               y_slice_size=32)
    expect = y.double().clone()
    for i in range(bsz):
        if idx[i] < 0:
            continue
        z1 = [sum(float(x[i, t]) * float(wa[idx[i], 1, rr, t]) for t in range(h1)) for rr in range(r)]
        for j in range(32):
            expect[i, 8 + j] += 2.0 * sum(z1[rr] * float(wb[idx[i], 1, j, rr]) for rr in range(r))
    assert out.dtype == torch.float16 and torch.allclose(out.double(), expect, rtol=1e-2, atol=2e-2)
    assert torch.equal(out[2], y[2]) and torch.equal(out[:, :8], y[:, :8]) and torch.equal(out[:, 40:], y[:, 40:])
    yi = y.clone()
    assert torch_npu.npu_batch_gather_matmul_(yi, x, wb, idx, wa, layer_idx=1, scale=2.0, y_offset=8,
                                              y_slice_size=32) is yi
    assert torch.equal(yi, out)
    with pytest.raises(RuntimeError, match="same size as the y shape 0"):
        torch_npu.npu_batch_gather_matmul(y, x, wb, idx[:3], wa)
    with pytest.raises(RuntimeError, match="H2 \\(32\\) should equal y_slice_size \\(48\\)"):
        torch_npu.npu_batch_gather_matmul(y, x, wb, idx, wa)


# ------------------------------------------------------------------ npu_fused_matmul


@pytest.mark.parametrize("op", ["", "16cast32", "add", "mul", "gelu_erf", "gelu_tanh", "relu"])
def test_fused_matmul(op):
    x1 = rnd(2, 3, 8, seed=201).half() if op in ("", "relu", "add", "mul") else rnd(3, 8, seed=201).half()
    x2 = rnd(8, 5, seed=202).half()
    bias = rnd(5, seed=203).half() if op not in ("gelu_erf", "gelu_tanh") else None
    x3 = rnd(1, 3, 5, seed=204).half() if op in ("add", "mul") else None
    out = both(torch_npu.npu_fused_matmul, x1, x2, bias=bias, x3=x3, fused_op_type=op)
    assert out.dtype == (torch.float32 if op == "16cast32" else torch.float16)
    mm = x1.double() @ x2.double() + (bias.double() if bias is not None else 0)
    if op == "relu":
        ref = mm.clamp(min=0)
    elif op == "add":
        ref = mm + x3.double()
    elif op == "mul":
        ref = mm * x3.double()
    elif op.startswith("gelu"):
        ref = mm.clone().apply_(lambda v: gelu_ref(v, op == "gelu_tanh"))
    else:
        ref = mm
    assert torch.allclose(out.double(), ref, rtol=2e-3, atol=2e-3)


def test_fused_matmul_errors_and_autograd():
    x1, x2 = rnd(3, 4, seed=1), rnd(4, 2, seed=2)
    with pytest.raises(RuntimeError, match="there must be x3 for add"):
        torch_npu.npu_fused_matmul(x1, x2, fused_op_type="add")
    with pytest.raises(RuntimeError, match="no bias for gelu_erf"):
        torch_npu.npu_fused_matmul(x1, x2, bias=torch.zeros(2), fused_op_type="gelu_erf")
    with pytest.raises(RuntimeError, match="fused_op_type should be one of"):
        torch_npu.npu_fused_matmul(x1, x2, fused_op_type="silu")
    with pytest.raises(RuntimeError, match="same dtype"):
        torch_npu.npu_fused_matmul(x1, x2.half())
    a = x1.clone().requires_grad_()
    torch_npu.npu_fused_matmul(a, x2, fused_op_type="relu").sum().backward()
    expect = ((x1 @ x2) > 0).float() @ x2.t()
    assert torch.allclose(a.grad, expect)


# ------------------------------------------------------------------ npu_quant_conv2d


def test_quant_conv2d_int8_offset_x_padding_and_groups():
    n, cin, h, w, cout, groups = 1, 4, 5, 5, 4, 2
    x = ints(n, cin, h, w, seed=211)
    wt = ints(cout, cin // groups, 3, 3, seed=212)
    sc = rnd(cout, seed=213, lo=0.0001, hi=0.001)
    scale = torch_npu.npu_trans_quant_param(sc)
    bias = ints(cout, seed=214, lo=-100, hi=100, dtype=torch.int32)
    out = both(torch_npu.npu_quant_conv2d, x, wt, scale, strides=[2, 1], pads=[1, 1], dilations=[1, 1], groups=groups,
               offset_x=-3, output_dtype=torch.float16, bias=bias)
    ho, wo = (h + 2 - 3) // 2 + 1, w
    assert out.shape == (n, cout, ho, wo) and out.dtype == torch.float16
    scale_f = scale.bitwise_and(0xFFFFFFFF).to(torch.int32).view(torch.float32)  # the FP19 value the kernel reads
    padded = torch.full((n, cin, h + 2, w + 2), -3, dtype=torch.int64)
    padded[:, :, 1:-1, 1:-1] = x
    per = cin // groups
    for co in range(cout):
        g = co // (cout // groups)
        for i in range(ho):
            for j in range(wo):
                acc = sum(int(padded[0, g * per + c, 2 * i + di, j + dj]) * int(wt[co, c, di, dj])
                          for c in range(per) for di in range(3) for dj in range(3))
                ref = acc * float(scale_f[co]) + int(bias[co])
                assert abs(float(out[0, co, i, j]) - ref) <= 1e-3 * abs(ref) + 1e-2


def test_quant_conv2d_errors():
    x, wt = ints(1, 2, 4, 4, seed=1), ints(2, 2, 3, 3, seed=2)
    scale = torch_npu.npu_trans_quant_param(torch.ones(2))
    with pytest.raises(RuntimeError, match="output_dtype can not be None"):
        torch_npu.npu_quant_conv2d(x, wt, scale)
    with pytest.raises(RuntimeError, match="should be torch.float16 when input is int8"):
        torch_npu.npu_quant_conv2d(x, wt, scale, output_dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="only support torch_npu.hifloat8"):
        torch_npu.npu_quant_conv2d(x, wt, scale, output_dtype=torch.float16, input_dtype=torch.float16,
                                   weight_dtype=torch.float16)
    with pytest.raises(RuntimeError, match="should be uint8 / int8 bytes"):
        torch_npu.npu_quant_conv2d(x.half(), wt.half(), scale, output_dtype=torch.float16,
                                   input_dtype=torch_npu.hifloat8, weight_dtype=torch_npu.hifloat8)
    with pytest.raises(RuntimeError, match="'round' is for hifloat8 output only"):
        torch_npu.npu_quant_conv2d(x, wt, scale, output_dtype=torch.float16, round_mode="round")
    with pytest.raises(RuntimeError, match="needs hifloat8 input"):
        torch_npu.npu_quant_conv2d(x, wt, scale, output_dtype=torch_npu.hifloat8, round_mode="round")
    with pytest.raises(RuntimeError, match="offset_x should be in"):
        torch_npu.npu_quant_conv2d(x, wt, scale, output_dtype=torch.float16, offset_x=200)
    with pytest.raises(RuntimeError, match="scale should be an int64"):
        torch_npu.npu_quant_conv2d(x, wt, torch.ones(2, dtype=torch.float16), output_dtype=torch.float16)


# ------------------------------------------------------------------ hifloat8 (bytes decoded / encoded by the codec)

HIF8 = torch_npu.hifloat8


def hif8(*shape, seed):
    """Random HiFloat8 codes (uint8) of finite values around +-1."""
    return hif8_codec.encode(rnd(*shape, seed=seed))


def test_add_quant_matmul_hifloat8_tt():
    m, n, k = 3, 4, 8
    x1, x2 = hif8(m, k, seed=1), hif8(k, n, seed=2)
    s1, s2 = torch.tensor([0.5]), torch.tensor([0.375])
    y = rnd(m, n, seed=3)
    kw = dict(x1_scale=s1, x1_dtype=HIF8, x2_dtype=HIF8)
    out = both(torch_npu.npu_add_quant_matmul, y, x1, x2, s2, **kw)
    a, b = hif8_codec.decode(x1), hif8_codec.decode(x2)
    expect = torch.empty(m, n)
    for i in range(m):
        for j in range(n):
            acc = sum(float(a[i, t]) * float(b[t, j]) for t in range(k))
            expect[i, j] = float(y[i, j]) + float(torch.tensor(acc, dtype=torch.float32) * (s1 * s2))
    assert out.dtype == torch.float32 and torch.allclose(out, expect, rtol=1e-6, atol=1e-6)
    # int8 bytes, group_sizes [0, 0, 0] and the in-place variant give the same
    y2 = y.clone()
    ret = torch_npu.npu_add_quant_matmul_(y2, x1.view(torch.int8), x2, s2, group_sizes=[0, 0, 0], **kw)
    assert ret is y2 and torch.equal(y2, out)


def test_add_quant_gmm_hifloat8_not_supported():
    y = torch.zeros(2, 2, 3)
    with pytest.raises(RuntimeError, match="hifloat8 is not supported on vNPU: .*not documented"):
        torch_npu.npu_add_quant_gmm(y, hif8(2, 8, seed=1), hif8(8, 3, seed=2), torch.ones(1), torch.tensor([4, 8]),
                                    x1_scale=torch.ones(1), x1_dtype=HIF8, x2_dtype=HIF8)
    with pytest.raises(RuntimeError, match="T-C quantisation .* is not supported on vNPU"):
        torch_npu.npu_add_quant_gmm(y, fp8(2, 8, seed=1), fp8(8, 3, seed=2), torch.ones(1), torch.tensor([4, 8]),
                                    x1_scale=torch.ones(1))


@pytest.mark.parametrize("with_x1_scale", [True, False])
def test_transpose_quant_batchmatmul_hifloat8_tc(with_x1_scale):
    m, b, k, n = 3, 2, 8, 4
    x1, x2 = hif8(m, b, k, seed=1), hif8(b, k, n, seed=2)
    s2 = rnd(n, seed=3, lo=0.5, hi=2.0)
    s1 = torch.tensor([0.75]) if with_x1_scale else None
    a, w = hif8_codec.decode(x1), hif8_codec.decode(x2)
    expect = torch.empty(m, b, n)
    for i in range(m):
        for bb in range(b):
            for j in range(n):
                acc = torch.tensor(sum(float(a[i, bb, t]) * float(w[bb, t, j]) for t in range(k)),
                                   dtype=torch.float32)
                v = acc * s2[j]
                expect[i, bb, j] = v * s1[0] if with_x1_scale else v
    kw = dict(x1_scale=s1, x2_scale=s2, x1_dtype=HIF8, x2_dtype=HIF8)
    out = both(torch_npu.npu_transpose_quant_batchmatmul, x1, x2, torch.float16, **kw)
    assert out.dtype == torch.float16 and torch.equal(out, expect.half())
    codes = both(torch_npu.npu_transpose_quant_batchmatmul, x1, x2, HIF8, **kw)
    assert codes.dtype == torch.uint8 and codes.shape == (m, b, n)
    assert torch.equal(codes, hif8_codec.encode(expect))
    # perm_x2 [0, 2, 1]: x2 given as (b, n, k)
    out_t = torch_npu.npu_transpose_quant_batchmatmul(x1, x2.transpose(1, 2).contiguous(), torch.float16,
                                                      perm_x2=[0, 2, 1], **kw)
    assert torch.equal(out_t, out)


def test_grouped_matmul_swiglu_quant_v2_hifloat8_per_token():
    m, k, n, groups = 5, 8, 6, 2
    x, w = hif8(m, k, seed=1), hif8(groups, k, n, seed=2)
    ws, xs = rnd(groups, n, seed=3, lo=0.5, hi=1.5), rnd(m, seed=4, lo=0.5, hi=1.5)
    gl = torch.tensor([2, 4])  # cumsum: row 4 is past the last group
    q, scale = both(torch_npu.npu_grouped_matmul_swiglu_quant_v2, x, [w], [ws], xs, gl, quant_dtype=HIF8,
                    x_dtype=HIF8, weight_dtype=HIF8)
    assert q.dtype == torch.uint8 and q.shape == (m, n // 2) and scale.dtype == torch.float32 and scale.shape == (m,)
    a, wv = hif8_codec.decode(x), hif8_codec.decode(w)
    for r in range(m):
        g = 0 if r < 2 else 1 if r < 4 else None
        if g is None:
            assert int(q[r].abs().sum()) == 0 and float(scale[r]) == 0.0
            continue
        c = torch.tensor([sum(float(a[r, t]) * float(wv[g, t, j]) for t in range(k)) for j in range(n)],
                         dtype=torch.float32) * xs[r] * ws[g]
        act, gate = c[:n // 2], c[n // 2:]
        s = act * torch.sigmoid(act) * gate
        ref_scale = s.abs().max() / 32768.0  # max(type) of HiFloat8
        assert torch.allclose(scale[r], ref_scale, rtol=1e-6, atol=0)
        assert torch.equal(q[r], hif8_codec.encode(s / ref_scale))


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, HIF8])
def test_quant_conv2d_hifloat8(out_dtype):
    x, wt = hif8(1, 2, 4, 4, seed=1), hif8(2, 2, 3, 3, seed=2)
    scale_f = rnd(2, seed=3, lo=0.5, hi=1.5)
    bias = rnd(2, seed=4)
    round_mode = "round" if out_dtype == HIF8 else "rint"
    out = both(torch_npu.npu_quant_conv2d, x, wt, scale_f, pads=(1, 1), output_dtype=out_dtype, bias=bias,
               round_mode=round_mode, input_dtype=HIF8, weight_dtype=HIF8)
    xv, wv = hif8_codec.decode(x), hif8_codec.decode(wt)
    expect = torch.empty(1, 2, 4, 4)
    for co in range(2):
        for i in range(4):
            for j in range(4):
                acc = 0.0
                for c in range(2):
                    for di in range(3):
                        for dj in range(3):
                            hi, wj = i + di - 1, j + dj - 1
                            if 0 <= hi < 4 and 0 <= wj < 4:
                                acc += float(xv[0, c, hi, wj]) * float(wv[co, c, di, dj])
                expect[0, co, i, j] = torch.tensor(acc, dtype=torch.float32) * scale_f[co] + bias[co]
    if out_dtype == HIF8:
        assert out.dtype == torch.uint8 and torch.equal(out, hif8_codec.encode(expect))
    else:
        assert out.dtype == out_dtype and torch.equal(out, expect.to(out_dtype))
    # an int64 (npu_trans_quant_param) scale of the same (few-bit) values gives the same output
    short = torch.tensor([0.75, 1.25])
    kw = dict(pads=(1, 1), output_dtype=out_dtype, bias=bias, round_mode=round_mode, input_dtype=HIF8,
              weight_dtype=HIF8)
    out64 = torch_npu.npu_quant_conv2d(x, wt, torch_npu.npu_trans_quant_param(short), **kw)
    assert torch.equal(out64, torch_npu.npu_quant_conv2d(x, wt, short, **kw))


def test_hifloat8_fake_tensor_shapes():
    with FakeTensorMode():
        t = torch_npu.npu_transpose_quant_batchmatmul(torch.empty(4, 2, 8, dtype=torch.uint8),
                                                      torch.empty(2, 8, 3, dtype=torch.uint8), HIF8,
                                                      x2_scale=torch.empty(3), x1_dtype=HIF8, x2_dtype=HIF8)
        assert t.shape == (4, 2, 3) and t.dtype == torch.uint8
        y = torch_npu.npu_add_quant_matmul(torch.empty(4, 3), torch.empty(4, 8, dtype=torch.uint8),
                                           torch.empty(8, 3, dtype=torch.uint8), torch.empty(1),
                                           x1_scale=torch.empty(1), x1_dtype=HIF8, x2_dtype=HIF8)
        assert y.shape == (4, 3) and y.dtype == torch.float32


# ------------------------------------------------------------------ tracing


def test_fake_tensor_shapes():
    with FakeTensorMode():
        x = torch.empty(6, 16, dtype=torch.int8)
        q, s = torch_npu.npu_grouped_matmul_swiglu_quant_v2(x, [torch.empty(2, 16, 8, dtype=torch.int8)],
                                                            [torch.empty(2, 8)], torch.empty(6),
                                                            torch.empty(2, dtype=torch.int64))
        assert q.shape == (6, 4) and q.dtype == torch.int8 and s.shape == (6,) and s.dtype == torch.float32
        y = torch_npu.npu_quant_grouped_matmul_dequant(torch.empty(6, 16, dtype=torch.float16),
                                                       torch.empty(3, 8, 16, dtype=torch.int8), torch.empty(3, 8),
                                                       torch.empty(3, dtype=torch.int64))
        assert y.shape == (6, 8) and y.dtype == torch.float16
        t = torch_npu.npu_transpose_quant_batchmatmul(torch.empty(4, 2, 8, dtype=torch.float8_e4m3fn),
                                                      torch.empty(2, 8, 3, dtype=torch.float8_e4m3fn),
                                                      torch.bfloat16, x1_scale=torch.empty(4), x2_scale=torch.empty(3))
        assert t.shape == (4, 2, 3) and t.dtype == torch.bfloat16
        g = torch_npu.npu_grouped_matmul_add(torch.empty(2, 3, 4), torch.empty(9, 3, dtype=torch.float16),
                                             torch.empty(9, 4, dtype=torch.float16), torch.empty(2, dtype=torch.int64))
        assert g.shape == (2, 3, 4) and g.dtype == torch.float32


def test_torch_compile_eager():
    def f(y, x, w, gl, a, b, s1, s2):
        return torch_npu.npu_grouped_matmul_add(y, x, w, gl), torch_npu.npu_quant_matmul_gelu(a, b, s1, s2)

    args = (rnd(2, 3, 4, seed=1), rnd(9, 3, seed=2).half(), rnd(9, 4, seed=3).half(), torch.tensor([4, 9]),
            ints(3, 8, seed=4), ints(8, 4, seed=5), rnd(3, seed=6, lo=0.01, hi=0.02), rnd(4, seed=7, lo=0.01, hi=0.02))
    compiled = torch.compile(f, backend="eager", fullgraph=False)(*args)
    eager = f(*args)
    for c, e in zip(compiled, eager):
        assert torch.allclose(c.double(), e.double(), rtol=1e-5, atol=1e-5)
