"""torch_npu.op_plugin.norm_quant: the add / RMS / layer / deep / group norms fused with
quantisers, casts and activations, against formulas written here in float64 on cpu;
npu against cpu; the backward operators against autograd through the plain formula;
op-plugin's schemas; argument errors; FakeTensor and torch.compile tracing."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import rnd

HALVES = [torch.float16, torch.bfloat16]
NPU = torch.ops.npu

# op-plugin's op_plugin_functions.yaml, verbatim.
SCHEMAS = [
    "npu_add_rms_norm_quant(Tensor x1, Tensor x2, Tensor gamma, Tensor scales1, Tensor? zero_points1, Tensor? beta=None, "
    "Tensor? scales2=None, Tensor? zero_points2=None, *, int axis=-1, float epsilon=1e-06, bool div_mode=True, "
    "int? dst_type=None) -> (Tensor, Tensor, Tensor)",
    "npu_add_rms_norm_dynamic_quant(Tensor x1, Tensor x2, Tensor gamma, *, Tensor? smooth_scale1=None, "
    "Tensor? smooth_scale2=None, Tensor? beta=None, float epsilon=1e-6, bool[2]? output_mask=None, "
    "int? y_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_add_rms_norm_dynamic_mx_quant(Tensor x1, Tensor x2, Tensor gamma, *, Tensor? beta=None, float epsilon=1e-06, "
    "int scale_alg=0, str round_mode=\"rint\", int dst_type=296) -> (Tensor, Tensor, Tensor, Tensor)",
    "npu_add_rms_norm_cast(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor, Tensor)",
    "npu_add_rms_norm_v2(Tensor(a!) x1, Tensor(b!) x2, Tensor gamma, float epsilon=1e-06) -> Tensor",
    "npu_add_rms_norm_v2_functional(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor)",
    "npu_rms_norm_quant(Tensor x, Tensor gamma, Tensor beta, Tensor scale, Tensor offset, float epsilon=1e-06, *, "
    "int? dst_dtype=None) -> Tensor",
    "npu_rms_norm_quant_v2(Tensor x, Tensor gamma, Tensor scale, *, Tensor? offset=None, Tensor? beta=None, "
    "float epsilon=1e-06, bool div_mode=True, int? dst_dtype=None) -> (Tensor, Tensor)",
    "npu_rms_norm_dynamic_mx_quant(Tensor x, Tensor gamma, *, Tensor? beta=None, float epsilon=1e-06, int scale_alg=0, "
    "str round_mode=\"rint\", int dst_type=296) -> (Tensor, Tensor, Tensor)",
    "_npu_rms_norm_backward_quant(Tensor dy, Tensor x, Tensor rstd, Tensor gamma, Tensor scale_x, *, "
    "Tensor? offset_x=None, bool? div_mode=True, str quant_mode=\"static\", int? dst_type=1) -> (Tensor, Tensor)",
    "npu_gemma_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    "npu_add_layer_norm(Tensor x1, Tensor x2, Tensor gamma, Tensor beta, float epsilon=1e-05, "
    "bool additional_output=False) -> (Tensor, Tensor, Tensor, Tensor)",
    "npu_add_layer_norm_backward(Tensor? dy_opt, Tensor x1, Tensor x2, Tensor rstd, Tensor mean, Tensor gamma, "
    "Tensor? dsum_opt) -> (Tensor, Tensor, Tensor, Tensor)",
    "npu_deep_norm(Tensor x, Tensor gx, Tensor beta, Tensor gamma, float alpha=0.3, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor)",
    "npu_deep_norm_backward(Tensor dy, Tensor x, Tensor gx, Tensor gamma, Tensor mean, Tensor rstd, float alpha=0.3) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    "npu_group_norm_silu(Tensor input, Tensor? weight, Tensor? bias, int group, float eps=0.00001) "
    "-> (Tensor, Tensor, Tensor)",
    "npu_group_norm_swish(Tensor input, int num_groups, Tensor weight, Tensor bias, float? eps=1e-5, "
    "float? swish_scale=1.0) -> (Tensor, Tensor, Tensor)",
    "npu_group_norm_swish_grad(Tensor grad, Tensor input, int num_groups, Tensor weight, Tensor bias, Tensor mean, "
    "Tensor rstd, bool[3] grad_input_mask, float? swish_scale=1.0) -> (Tensor, Tensor, Tensor)",
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.split("(")[0])
def test_schema_is_op_plugins(schema):
    name = schema.split("(")[0]
    op = getattr(NPU, name).default
    assert str(op._schema) == str(torch._C.parse_schema("npu::" + schema))
    assert getattr(torch_npu, name) is getattr(NPU, name)


# --- plain references (float64) ---------------------------------------------------------

def rms_ref(x, gamma, eps=1e-6, beta=None):
    """(x * rstd * gamma + beta, rstd) over gamma's dimensions, in float64."""
    x = x.double()
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    rstd = 1.0 / torch.sqrt((x * x).mean(dims, keepdim=True) + eps)
    y = x * rstd * gamma.double()
    if beta is not None:
        y = y + beta.double()
    return y, rstd


def int_quant_ref(v, lo=-128, hi=127):
    return torch.clamp(torch.round(v), lo, hi)


def unpack_int4(packed):
    """int32 words -> eight signed nibbles each, low nibble first."""
    words = packed.to(torch.int64) & 0xFFFFFFFF
    nibbles = [(words >> (4 * i)) & 0xF for i in range(8)]
    vals = torch.stack(nibbles, -1).flatten(-2)
    return torch.where(vals >= 8, vals - 16, vals)


def assert_quant_close(q, ref, frac=0.02):
    """Integer codes within one step of the float64 reference, and nearly all equal."""
    diff = (q.double() - ref.double()).abs()
    assert diff.max() <= 1, diff.max()
    assert (diff != 0).double().mean() <= frac


def on_npu(*ts):
    return [None if t is None else t.npu() for t in ts]


# --- npu_add_rms_norm_quant -------------------------------------------------------------

@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("case", ["plain", "beta_two_scales", "mul_mode", "gamma_2d"])
def test_add_rms_norm_quant(dtype, case):
    shape, gshape = ((2, 3, 32), (32,)) if case != "gamma_2d" else ((2, 4, 16), (4, 16))
    x1, x2 = rnd(*shape, seed=1).to(dtype), rnd(*shape, seed=2).to(dtype)
    gamma = rnd(*gshape, seed=3).to(dtype)
    sdtype = torch.float32 if dtype == torch.float16 else torch.bfloat16
    scales1 = rnd(*gshape, seed=4, lo=0.01, hi=0.03).to(sdtype)
    zp1 = torch.randint(-5, 5, gshape, generator=torch.Generator().manual_seed(5)).to(
        torch.int32 if dtype == torch.float16 else torch.bfloat16)
    beta = scales2 = zp2 = None
    div_mode = case != "mul_mode"
    if case == "beta_two_scales":
        beta = rnd(*gshape, seed=6).to(dtype)
        scales2, zp2 = scales1 * 2, zp1 + 1
    if case == "mul_mode":
        scales1 = 1.0 / scales1
    args = (x1, x2, gamma, scales1, zp1, beta, scales2, zp2)
    y1, y2, x = NPU.npu_add_rms_norm_quant(*on_npu(*args), epsilon=1e-6, div_mode=div_mode)
    assert y1.device.type == "npu" and y1.dtype == torch.int8 and y2.dtype == torch.int8 and x.dtype == dtype
    assert y1.shape == y2.shape == x.shape == x1.shape
    xs = x1 + x2
    assert torch.equal(x.cpu(), xs)
    y, _ = rms_ref(xs, gamma, 1e-6, beta)
    v1 = y / scales1.double() if div_mode else y * scales1.double()
    assert_quant_close(y1.cpu(), int_quant_ref(v1 + zp1.double()))
    if scales2 is None:
        assert torch.count_nonzero(y2.cpu()) == 0
    else:
        assert_quant_close(y2.cpu(), int_quant_ref(y / scales2.double() + zp2.double()))
    cpu = NPU.npu_add_rms_norm_quant(*args, epsilon=1e-6, div_mode=div_mode)
    for a, b in zip(cpu, (y1, y2, x)):
        assert torch.equal(a, b.cpu())


def test_add_rms_norm_quant_float8_and_saturation():
    x1, x2 = rnd(4, 32, seed=1).to(torch.bfloat16), rnd(4, 32, seed=2).to(torch.bfloat16)
    gamma = rnd(32, seed=3).to(torch.bfloat16)
    tiny = torch.full((32,), 1e-3, dtype=torch.bfloat16)  # saturates int8
    y1, _, _ = NPU.npu_add_rms_norm_quant(x1, x2, gamma, tiny, None)
    y, _ = rms_ref(x1 + x2, gamma)
    assert torch.equal(y1, int_quant_ref(y / tiny.double()).to(torch.int8))
    assert (y1.abs() == 127).any() or (y1 == -128).any()
    f8, _, _ = NPU.npu_add_rms_norm_quant(x1, x2, gamma, tiny * 100, None, dst_type=torch.float8_e4m3fn)
    assert f8.dtype == torch.float8_e4m3fn
    assert_close(f8.double(), (y / (tiny * 100).double()).clamp(-448, 448).to(torch.float8_e4m3fn).double())


def test_add_rms_norm_quant_vllm_calls():
    """vllm-ascend's AddRMSNormQuant replacement: positional (x, residual, weight, scale, offset), epsilon= and
    beta= by keyword, outputs [0] and [2]; equals npu_add_rms_norm then npu_quantize(1 / scale, offset)."""
    x, res = rnd(2, 64, seed=1).to(torch.bfloat16).npu(), rnd(2, 64, seed=2).to(torch.bfloat16).npu()
    w, bias = rnd(64, seed=3).to(torch.bfloat16).npu(), rnd(64, seed=4).to(torch.bfloat16).npu()
    scale = torch.full((64,), 0.05, dtype=torch.bfloat16).npu()
    offset = torch.zeros(64, dtype=torch.bfloat16).npu()
    out = torch.ops.npu.npu_add_rms_norm_quant(x, res, w, scale, offset, epsilon=1e-6, beta=bias)
    y, _ = rms_ref((x + res).cpu(), w.cpu(), 1e-6, bias.cpu())
    assert_quant_close(out[0].cpu(), int_quant_ref(y / scale.cpu().double()))
    assert torch.equal(out[2].cpu(), (x + res).cpu())
    out = torch.ops.npu.npu_add_rms_norm_quant(x, res, w, scale, offset, epsilon=1e-6)
    normed, _, summed = torch.ops.npu.npu_add_rms_norm(x, res, w, 1e-6)
    unfused = torch_npu.npu_quantize(normed, 1.0 / scale, offset, torch.qint8, -1, False)
    assert_quant_close(out[0].cpu(), unfused.cpu())
    assert torch.equal(out[2].cpu(), summed.cpu())


# --- npu_add_rms_norm_dynamic_quant -----------------------------------------------------

def dyn_ref(y, smooth=None, qmax=127.0):
    v = y if smooth is None else y * smooth.double()
    scale = v.abs().amax(-1) / qmax
    return torch.round(v / scale.unsqueeze(-1)), scale


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("mask,smooth", [(None, 0), (None, 1), (None, 2), ([True, False], 0), ([False, True], 2),
                                         ([True, True], 0)])
def test_add_rms_norm_dynamic_quant(dtype, mask, smooth):
    x1, x2 = rnd(2, 3, 32, seed=1).to(dtype), rnd(2, 3, 32, seed=2).to(dtype)
    gamma, beta = rnd(32, seed=3).to(dtype), rnd(32, seed=4).to(dtype)
    s1 = rnd(32, seed=5, lo=0.5, hi=1.5).to(dtype) if smooth >= 1 else None
    s2 = rnd(32, seed=6, lo=0.5, hi=1.5).to(dtype) if smooth == 2 else None
    if mask == [False, True]:
        s1 = None
    kw = dict(smooth_scale1=s1, smooth_scale2=s2, beta=beta, epsilon=1e-6, output_mask=mask)
    npu_kw = {k: (v.npu() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    out = NPU.npu_add_rms_norm_dynamic_quant(x1.npu(), x2.npu(), gamma.npu(), **npu_kw)
    y1, y2, x, sc1, sc2 = [t.cpu() for t in out]
    want1 = mask[0] if mask else True
    want2 = mask[1] if mask else (s1 is not None and s2 is not None)
    xs = x1 + x2
    assert torch.equal(x, xs)
    y, _ = rms_ref(xs, gamma, 1e-6, beta)
    for want, q, sc, sm in ((want1, y1, sc1, s1), (want2, y2, sc2, s2)):
        if not want:
            assert q.shape == (0,) and sc.shape == (0,) and q.dtype == torch.int8 and sc.dtype == torch.float32
            continue
        ref_q, ref_s = dyn_ref(y, sm)
        assert q.dtype == torch.int8 and q.shape == x1.shape and sc.shape == x1.shape[:-1]
        assert_close(sc.double(), ref_s, rtol=1e-5, atol=1e-7)
        assert_quant_close(q, ref_q)
        assert q.abs().max() == 127
    cpu = NPU.npu_add_rms_norm_dynamic_quant(x1, x2, gamma, **kw)
    for a, b in zip(cpu, out):
        assert torch.equal(a, b.cpu())


def test_add_rms_norm_dynamic_quant_int4_and_float8():
    x1, x2 = rnd(3, 16, seed=1).to(torch.float16), rnd(3, 16, seed=2).to(torch.float16)
    gamma = rnd(16, seed=3).to(torch.float16)
    y, _ = rms_ref(x1 + x2, gamma)
    for y_dtype in (torch.quint4x2, torch_npu.int4):
        y1, y2, _, sc1, _ = NPU.npu_add_rms_norm_dynamic_quant(x1, x2, gamma, y_dtype=y_dtype)
        assert y1.dtype == torch.int32 and y1.shape == (3, 2) and y2.shape == (0,) and y2.dtype == torch.int32
        ref_q, ref_s = dyn_ref(y, qmax=7.0)
        assert_close(sc1.double(), ref_s, rtol=1e-5, atol=1e-7)
        assert_quant_close(unpack_int4(y1), ref_q, frac=0.05)
    y1, _, _, sc1, _ = NPU.npu_add_rms_norm_dynamic_quant(x1, x2, gamma, y_dtype=torch.float8_e4m3fn)
    assert y1.dtype == torch.float8_e4m3fn
    ref_s = y.abs().amax(-1) / 448.0
    assert_close(sc1.double(), ref_s, rtol=1e-5, atol=1e-7)
    assert_close(y1.double(), (y / ref_s.unsqueeze(-1)).to(torch.float8_e4m3fn).double(), rtol=0.07, atol=0)


def test_add_rms_norm_dynamic_quant_vllm_call():
    """vllm-ascend's AddRMSNormDynamicQuant replacement: output_mask=[True, False], outputs [0], [3], [2];
    equals npu_add_rms_norm followed by npu_dynamic_quant."""
    x, res, w = [rnd(*s, seed=i).to(torch.bfloat16).npu() for i, s in enumerate([(4, 64), (4, 64), (64,)])]
    out = torch.ops.npu.npu_add_rms_norm_dynamic_quant(x, res, w, epsilon=1e-6, output_mask=[True, False])
    normed, _, summed = torch.ops.npu.npu_add_rms_norm(x, res, w, 1e-6)
    q, scale = torch.ops.npu.npu_dynamic_quant(normed)
    assert_quant_close(out[0].cpu(), q.cpu(), frac=0.2)  # the unfused path rounds y to bfloat16 first
    assert_close(out[3].cpu(), scale.cpu(), rtol=1e-2, atol=1e-4)
    assert torch.equal(out[2].cpu(), summed.cpu())


# --- MX quantised norms -----------------------------------------------------------------

def mx_e4m3_ref(y):
    """OCP MX float8_e4m3fn along the last dimension, 32-blocks: (values, E8M0 bytes per block)."""
    blocks = y.double().unflatten(-1, (-1, 32))
    amax = blocks.abs().amax(-1)
    exp = torch.floor(torch.log2(amax)) - 8
    vals = (blocks / torch.pow(2.0, exp).unsqueeze(-1)).clamp(-448, 448).to(torch.float8_e4m3fn)
    return vals.flatten(-2), (exp + 127).to(torch.uint8)


@pytest.mark.parametrize("dtype", HALVES)
def test_add_rms_norm_dynamic_mx_quant_float8(dtype):
    x1, x2 = rnd(2, 3, 128, seed=1).to(dtype), rnd(2, 3, 128, seed=2).to(dtype)
    gamma, beta = rnd(128, seed=3).to(dtype), rnd(128, seed=4).to(dtype)
    out = NPU.npu_add_rms_norm_dynamic_mx_quant(x1.npu(), x2.npu(), gamma.npu(), beta=beta.npu(),
                                                dst_type=torch.float8_e4m3fn)
    q, x, scale, rstd = [t.cpu() for t in out]
    xs = x1 + x2
    y, ref_rstd = rms_ref(xs, gamma, 1e-6, beta)
    ref_q, ref_bytes = mx_e4m3_ref(y.to(dtype))
    assert torch.equal(x, xs)
    assert q.dtype == torch.float8_e4m3fn and q.shape == xs.shape
    assert scale.dtype == torch.uint8 and scale.shape == (2, 3, 2, 2)
    assert torch.equal(scale.flatten(-2), ref_bytes)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))
    assert rstd.dtype == torch.float32 and rstd.shape == (2, 3, 1)
    assert_close(rstd.double(), ref_rstd, rtol=1e-5, atol=0)
    cpu = NPU.npu_add_rms_norm_dynamic_mx_quant(x1, x2, gamma, beta=beta, dst_type=torch.float8_e4m3fn)
    for a, b in zip(cpu, out):
        assert torch.equal(a.view(torch.uint8) if a.dtype == torch.float8_e4m3fn else a,
                           (b.view(torch.uint8) if b.dtype == torch.float8_e4m3fn else b).cpu())


def test_rms_norm_dynamic_mx_quant_matches_unfused():
    """vllm-ascend's RMSNormDynamicMXQuant replacement (outputs [0], [1]) against npu_rms_norm then
    npu_dynamic_mx_quant; the default float4_e2m1 output packs two elements a byte."""
    x, w = rnd(2, 64, seed=1).to(torch.bfloat16).npu(), rnd(64, seed=2).to(torch.bfloat16).npu()
    fused = torch.ops.npu.npu_rms_norm_dynamic_mx_quant(x, w, epsilon=1e-6, dst_type=torch.float8_e4m3fn)
    normed, _ = torch.ops.npu.npu_rms_norm(x, w, 1e-6)
    q, s = torch.ops.npu.npu_dynamic_mx_quant(normed, dst_type=torch.float8_e4m3fn)
    assert torch.equal(fused[0].cpu().view(torch.uint8), q.cpu().view(torch.uint8))
    assert torch.equal(fused[1].cpu(), s.cpu())
    y, ref_rstd = rms_ref(x.cpu(), w.cpu())
    ref_q, ref_bytes = mx_e4m3_ref(y.to(torch.bfloat16))
    assert torch.equal(fused[1].cpu().flatten(-2), ref_bytes)
    assert_close(fused[2].cpu().double(), ref_rstd, rtol=1e-5, atol=0)
    fp4, scale4, rstd = torch.ops.npu.npu_rms_norm_dynamic_mx_quant(x, w, round_mode="floor")
    assert fp4.dtype == torch.uint8 and fp4.shape == (2, 32) and scale4.shape == (2, 1, 2) and rstd.shape == (2, 1)
    q4, s4 = torch.ops.npu.npu_dynamic_mx_quant(normed, round_mode="floor")
    assert torch.equal(fp4.cpu(), q4.cpu()) and torch.equal(scale4.cpu(), s4.cpu())
    # cuBLAS-style scales (scale_alg=1), the add-fused form.
    res = rnd(2, 64, seed=3).to(torch.bfloat16).npu()
    out = torch.ops.npu.npu_add_rms_norm_dynamic_mx_quant(x, res, w, scale_alg=1, dst_type=torch_npu.float8_e5m2)
    normed, _, _ = torch.ops.npu.npu_add_rms_norm(x, res, w)
    q, s = torch.ops.npu.npu_dynamic_mx_quant(normed, dst_type=torch.float8_e5m2, scale_alg=1)
    assert torch.equal(out[0].cpu().view(torch.uint8), q.cpu().view(torch.uint8)) and torch.equal(out[2].cpu(), s.cpu())


# --- cast / v2 / gemma -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_add_rms_norm_cast_and_v2(dtype):
    x1, x2, gamma = rnd(3, 2, 16, seed=1).to(dtype), rnd(3, 2, 16, seed=2).to(dtype), rnd(2, 16, seed=3).to(dtype)
    xs = x1 + x2
    y, rstd = rms_ref(xs, gamma)
    y32, yd, r, x = NPU.npu_add_rms_norm_cast(*on_npu(x1, x2, gamma))
    assert y32.dtype == torch.float32 and yd.dtype == dtype and r.shape == (3, 1, 1) and torch.equal(x.cpu(), xs)
    assert_close(y32.cpu().double(), y, rtol=1e-5, atol=1e-5)
    assert torch.equal(yd.cpu(), y32.cpu().to(dtype))
    assert_close(r.cpu().double(), rstd, rtol=1e-5, atol=0)
    r2, yf, xf = NPU.npu_add_rms_norm_v2_functional(*on_npu(x1, x2, gamma))
    assert torch.equal(r2.cpu(), r.cpu()) and torch.equal(yf.cpu(), yd.cpu()) and torch.equal(xf.cpu(), xs)
    a, b, g = on_npu(x1, x2, gamma)
    r3 = torch_npu.npu_add_rms_norm_v2(a, b, g)
    assert torch.equal(r3.cpu(), r.cpu()) and torch.equal(a.cpu(), yd.cpu()) and torch.equal(b.cpu(), xs)
    a, b = x1.clone(), x2.clone()
    torch_npu.npu_add_rms_norm_v2(a, b, gamma)
    assert torch.equal(a, yd.cpu()) and torch.equal(b, xs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_gemma_rms_norm(dtype):
    x, gamma = rnd(4, 32, seed=1).to(dtype), rnd(32, seed=2).to(dtype)
    y, rstd = NPU.npu_gemma_rms_norm(x.npu(), gamma.npu(), 1e-5)
    ref, ref_rstd = rms_ref(x, gamma.double() + 1, 1e-5)
    assert y.dtype == dtype and rstd.dtype == torch.float32 and rstd.shape == (4, 1)
    assert_close(y.cpu().double(), ref.to(dtype).double(), rtol=1e-2, atol=1e-2)
    assert_close(rstd.cpu().double(), ref_rstd, rtol=1e-5, atol=0)
    # Autograd flows through the composition.
    xg, gg = rnd(4, 32, seed=1).requires_grad_(), rnd(32, seed=2).requires_grad_()
    NPU.npu_gemma_rms_norm(xg, gg)[0].sum().backward()
    xr, gr = xg.detach().double().requires_grad_(), gg.detach().double().requires_grad_()
    (xr * torch.rsqrt((xr * xr).mean(-1, keepdim=True) + 1e-6) * (1 + gr)).sum().backward()
    assert_close(xg.grad.double(), xr.grad, rtol=1e-4, atol=1e-5)
    assert_close(gg.grad.double(), gr.grad, rtol=1e-4, atol=1e-5)


# --- npu_rms_norm_quant / _v2 -----------------------------------------------------------

@pytest.mark.parametrize("dtype", HALVES)
def test_rms_norm_quant(dtype):
    x, gamma, beta = rnd(3, 32, seed=1).to(dtype), rnd(1, 32, seed=2).to(dtype), rnd(32, seed=3).to(dtype)
    scale, offset = torch.tensor([0.02], dtype=dtype), torch.tensor([3], dtype=torch.int8)
    y = NPU.npu_rms_norm_quant(*on_npu(x, gamma, beta, scale, offset), 1e-6)
    ref, _ = rms_ref(x, gamma.reshape(-1), 1e-6, beta)
    assert y.dtype == torch.int8 and y.shape == x.shape
    assert_quant_close(y.cpu(), int_quant_ref(ref / scale.double() + 3))
    assert torch.equal(y.cpu(), NPU.npu_rms_norm_quant(x, gamma, beta, scale, offset, 1e-6))
    y4 = NPU.npu_rms_norm_quant(x, gamma, beta, scale * 20, offset, dst_dtype=torch.quint4x2)
    assert y4.dtype == torch.int32 and y4.shape == (3, 4)
    assert_quant_close(unpack_int4(y4), int_quant_ref(ref / (scale * 20).double() + 3, -8, 7), frac=0.05)
    y1d = NPU.npu_rms_norm_quant(x[0], gamma, beta, scale, offset)  # 1-D x, (1, n) gamma
    assert torch.equal(y1d, y[0].cpu())


@pytest.mark.parametrize("dtype", HALVES)
def test_rms_norm_quant_hifloat8(dtype):
    from torch_npu import _hifloat8 as codec
    x, gamma, beta = rnd(3, 32, seed=1).to(dtype), rnd(1, 32, seed=2).to(dtype), rnd(32, seed=3).to(dtype)
    scale, offset = torch.tensor([0.02], dtype=dtype), torch.tensor([3], dtype=torch.int8)
    y = NPU.npu_rms_norm_quant(*on_npu(x, gamma, beta, scale, offset), 1e-6, dst_dtype=torch_npu.hifloat8)
    assert y.dtype == torch.uint8 and y.shape == x.shape
    assert torch.equal(y.cpu(), NPU.npu_rms_norm_quant(x, gamma, beta, scale, offset, 1e-6,
                                                        dst_dtype=torch_npu.hifloat8))
    ref, _ = rms_ref(x, gamma.reshape(-1), 1e-6, beta)
    want = ref / scale.double() + 3  # the formula before rounding; HiFloat8 rounds it once
    got = codec.decode(y.cpu()).double()
    # the kernel works in float32 on a half input: within one HiFloat8 step (3 mantissa bits) of the float64
    # value, and bit-equal to its encoding nearly everywhere
    assert ((got - want).abs() <= want.abs() / 8 + 1e-6).all()
    assert (y.cpu() == codec.encode(want)).float().mean() >= 0.9
    # saturation at +-32768 (codes 0x6E / 0xEE)
    big = NPU.npu_rms_norm_quant(x, gamma, beta, torch.tensor([1e-6], dtype=dtype), offset,
                                 dst_dtype=torch_npu.hifloat8)
    assert set(codec.decode(big[(ref.abs() > 0.1)]).abs().tolist()) == {32768.0}


@pytest.mark.parametrize("div_mode", [True, False])
def test_rms_norm_quant_v2(div_mode):
    x, gamma = rnd(2, 3, 16, seed=1).to(torch.float16), rnd(16, seed=2).to(torch.float16)
    scale = rnd(16, seed=3, lo=0.01, hi=0.05).to(torch.float16)  # one per column
    offset = torch.randint(-3, 3, (16,), generator=torch.Generator().manual_seed(4)).to(torch.float16)
    y, rstd = NPU.npu_rms_norm_quant_v2(*on_npu(x, gamma, scale), offset=offset.npu(), div_mode=div_mode)
    ref, ref_rstd = rms_ref(x, gamma)
    v = ref / scale.double() if div_mode else ref * scale.double()
    assert_quant_close(y.cpu(), int_quant_ref(v + offset.double()))
    assert rstd.shape == (2, 3, 1) and rstd.dtype == torch.float32
    assert_close(rstd.cpu().double(), ref_rstd, rtol=1e-5, atol=0)
    # Per-tensor scale, no offset, beta, float8 output.
    y8, _ = NPU.npu_rms_norm_quant_v2(x, gamma, torch.tensor([0.01], dtype=torch.float16), beta=gamma,
                                      dst_dtype=torch_npu.float8_e5m2)
    ref8, _ = rms_ref(x, gamma, beta=gamma)
    assert y8.dtype == torch.float8_e5m2
    assert_close(y8.double(), (ref8 / torch.tensor(0.01, dtype=torch.float16).double()).to(torch.float8_e5m2).double(),
                 rtol=0.13, atol=0)


# --- _npu_rms_norm_backward_quant -------------------------------------------------------

@pytest.mark.parametrize("rstd_keepdim", [True, False])
def test_rms_norm_backward_quant_is_autograd_then_quantize(rstd_keepdim):
    dy, x, gamma = rnd(2, 4, 32, seed=1), rnd(2, 4, 32, seed=2), rnd(32, seed=3)
    dy, x, gamma = dy.to(torch.float16), x.to(torch.float16), gamma.to(torch.float16)
    # Reference gradient: autograd through the plain formula, float64.
    xr, gr = x.double().requires_grad_(), gamma.double().requires_grad_()
    rstd = torch.rsqrt((xr * xr).mean(-1, keepdim=True) + 1e-6)
    (xr * rstd * gr * dy.double()).sum().backward()
    saved = rstd.detach().float() if rstd_keepdim else rstd.detach().float().squeeze(-1)
    scale, offset = torch.tensor([0.05]), torch.tensor([2], dtype=torch.int32)
    dxq, dg = torch_npu._npu_rms_norm_backward_quant(*on_npu(dy, x, saved, gamma, scale), offset_x=offset.npu())
    assert dxq.dtype == torch.int8 and dxq.shape == dy.shape and dg.dtype == torch.float32 and dg.shape == (32,)
    assert_quant_close(dxq.cpu(), int_quant_ref(xr.grad / 0.05 + 2))
    assert_close(dg.cpu().double(), gr.grad, rtol=2e-3, atol=2e-3)
    dxm, _ = NPU._npu_rms_norm_backward_quant(dy, x, saved, gamma, scale, div_mode=False)
    assert_quant_close(dxm, int_quant_ref(xr.grad * 0.05))


# --- layer norm family ------------------------------------------------------------------

def ln_ref(x, gamma, beta, eps, nd):
    dims = tuple(range(x.dim() - nd, x.dim()))
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)
    rstd = 1.0 / torch.sqrt(var + eps)
    return (x - mean) * rstd * gamma + beta, mean, rstd


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_add_layer_norm(dtype):
    x1, x2 = rnd(2, 3, 4, 8, seed=1).to(dtype), rnd(2, 3, 4, 8, seed=2).to(dtype)
    gamma, beta = rnd(4, 8, seed=3).to(dtype), rnd(4, 8, seed=4).to(dtype)
    y, mean, rstd, x = NPU.npu_add_layer_norm(*on_npu(x1, x2, gamma, beta), 1e-5, True)
    ref, rmean, rrstd = ln_ref((x1 + x2).double(), gamma.double(), beta.double(), 1e-5, 2)
    assert y.dtype == dtype and mean.dtype == rstd.dtype == torch.float32 and mean.shape == rstd.shape == (2, 3, 1, 1)
    assert torch.equal(x.cpu(), x1 + x2)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype != torch.float32 else dict(rtol=1e-5, atol=1e-5)
    assert_close(y.cpu().double(), ref, **tol)
    assert_close(mean.cpu().double(), rmean, rtol=1e-5, atol=1e-6)
    assert_close(rstd.cpu().double(), rrstd, rtol=1e-4, atol=0)
    cpu = NPU.npu_add_layer_norm(x1, x2, gamma, beta, 1e-5, True)
    for a, b in zip(cpu, (y, mean, rstd, x)):
        assert torch.equal(a, b.cpu())
    # Mixed dtypes give float32 y and x, as op-plugin allocates them.
    y, _, _, x = NPU.npu_add_layer_norm(x1.float(), x2, gamma.float(), beta.float())
    assert y.dtype == x.dtype == torch.float32


@pytest.mark.parametrize("grads", ["both", "dy_only", "dsum_only"])
def test_add_layer_norm_backward_is_autograd(grads):
    x1, x2 = rnd(3, 5, 16, seed=1), rnd(3, 5, 16, seed=2)
    gamma, beta = rnd(16, seed=3), rnd(16, seed=4)
    dy = rnd(3, 5, 16, seed=5) if grads != "dsum_only" else None
    dsum = rnd(3, 5, 16, seed=6) if grads != "dy_only" else None
    leaves = [t.double().requires_grad_() for t in (x1, x2, gamma, beta)]
    a, b, g, be = leaves
    s = a + b
    ref, _, _ = ln_ref(s, g, be, 1e-5, 1)
    loss = 0
    if dy is not None:
        loss = loss + (ref * dy.double()).sum()
    if dsum is not None:
        loss = loss + (s * dsum.double()).sum()
    loss.backward()
    _, mean, rstd, _ = NPU.npu_add_layer_norm(x1, x2, gamma, beta)
    dx1, dx2, dg, db = NPU.npu_add_layer_norm_backward(*on_npu(dy, x1, x2, rstd, mean, gamma, dsum))
    assert dx1.dtype == torch.float32 and dg.dtype == db.dtype == torch.float32 and dg.shape == (16,)
    assert_close(dx1.cpu().double(), a.grad, rtol=1e-4, atol=1e-5)
    assert_close(dx2.cpu().double(), b.grad, rtol=1e-4, atol=1e-5)
    zero = torch.zeros(16, dtype=torch.float64)  # gamma / beta get no gradient from dsum alone
    assert_close(dg.cpu().double(), zero if g.grad is None else g.grad, rtol=1e-4, atol=1e-5)
    assert_close(db.cpu().double(), zero if be.grad is None else be.grad, rtol=1e-4, atol=1e-5)
    # Autograd through the forward op agrees too (float64, no rounding).
    ins = [t.double().requires_grad_() for t in (x1, x2, gamma, beta)]
    y, _, _, x = NPU.npu_add_layer_norm(*ins)
    loss = (y * dy.double()).sum() if dy is not None else 0
    if dsum is not None:
        loss = loss + (x * dsum.double()).sum()
    loss.backward()
    for t, ref_t in zip(ins, leaves):
        assert_close(t.grad, ref_t.grad)


def test_deep_norm_and_backward_are_autograd():
    x, gx = rnd(2, 3, 16, seed=1), rnd(2, 3, 16, seed=2)
    gamma, beta, dy = rnd(16, seed=3), rnd(16, seed=4), rnd(2, 3, 16, seed=5)
    mean, rstd, y = NPU.npu_deep_norm(*on_npu(x, gx, beta, gamma), 0.7, 1e-6)
    leaves = [t.double().requires_grad_() for t in (x, gx, gamma, beta)]
    a, b, g, be = leaves
    ref, rmean, rrstd = ln_ref(0.7 * a + b, g, be, 1e-6, 1)
    assert mean.shape == rstd.shape == (2, 3, 1) and mean.dtype == torch.float32 and y.dtype == torch.float32
    assert_close(y.cpu().double(), ref.detach(), rtol=1e-5, atol=1e-5)
    assert_close(mean.cpu().double(), rmean.detach(), rtol=1e-5, atol=1e-6)
    assert_close(rstd.cpu().double(), rrstd.detach(), rtol=1e-5, atol=0)
    (ref * dy.double()).sum().backward()
    dx, dgx, dbeta, dgamma = NPU.npu_deep_norm_backward(*on_npu(dy, x, gx, gamma, mean, rstd), 0.7)
    assert dbeta.dtype == dgamma.dtype == torch.float32 and dx.shape == x.shape
    for got, want in ((dx, a.grad), (dgx, b.grad), (dgamma, g.grad), (dbeta, be.grad)):
        assert_close(got.cpu().double(), want, rtol=1e-4, atol=1e-5)
    h = NPU.npu_deep_norm(x.half(), gx.half(), beta.half(), gamma.half())
    assert h[2].dtype == torch.float16 and h[0].dtype == torch.float32
    assert torch.equal(h[2], NPU.npu_deep_norm(*on_npu(x.half(), gx.half(), beta.half(), gamma.half()))[2].cpu())


# --- group norm family ------------------------------------------------------------------

def gn_ref(x, group, w, b, eps):
    n = x.shape[0]
    xg = x.reshape(n, group, -1)
    mean = xg.mean(-1, keepdim=True)
    rstd = 1.0 / torch.sqrt(((xg - mean) ** 2).mean(-1, keepdim=True) + eps)
    y = ((xg - mean) * rstd).reshape(x.shape)
    shape = (1, -1) + (1,) * (x.dim() - 2)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y, mean.reshape(n, group), rstd.reshape(n, group)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_silu(dtype, affine):
    x = rnd(2, 6, 3, 4, seed=1).to(dtype)
    w, b = (rnd(6, seed=2).to(dtype), rnd(6, seed=3).to(dtype)) if affine else (None, None)
    out, mean, rstd = NPU.npu_group_norm_silu(*on_npu(x, w, b), 3, 1e-5)
    y, rmean, rrstd = gn_ref(x.double(), 3, None if w is None else w.double(), None if b is None else b.double(), 1e-5)
    assert out.dtype == mean.dtype == rstd.dtype == dtype and mean.shape == (2, 3)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype != torch.float32 else dict(rtol=1e-5, atol=1e-5)
    assert_close(out.cpu().double(), y * torch.sigmoid(y), **tol)
    assert_close(mean.cpu().double(), rmean, **tol)
    assert_close(rstd.cpu().double(), rrstd, **tol)
    assert torch.equal(out.cpu(), NPU.npu_group_norm_silu(x, w, b, 3)[0])


def test_group_norm_swish_and_grad_are_autograd():
    x, w, b, dy = rnd(2, 8, 5, seed=1), rnd(8, seed=2), rnd(8, seed=3), rnd(2, 8, 5, seed=4)
    out, mean, rstd = NPU.npu_group_norm_swish(*on_npu(x), 4, *on_npu(w, b), eps=1e-5, swish_scale=1.7)
    leaves = [t.double().requires_grad_() for t in (x, w, b)]
    y, rmean, rrstd = gn_ref(leaves[0], 4, leaves[1], leaves[2], 1e-5)
    ref = y * torch.sigmoid(1.7 * y)
    assert out.shape == x.shape and mean.shape == rstd.shape == (2, 4)
    assert_close(out.cpu().double(), ref.detach(), rtol=1e-5, atol=1e-5)
    assert_close(rstd.cpu().double(), rrstd.detach(), rtol=1e-5, atol=0)
    (ref * dy.double()).sum().backward()
    dx, dw, db = NPU.npu_group_norm_swish_grad(*on_npu(dy, x), 4, *on_npu(w, b, mean, rstd), [True, True, True], 1.7)
    for got, want in ((dx, leaves[0].grad), (dw, leaves[1].grad), (db, leaves[2].grad)):
        assert_close(got.cpu().double(), want, rtol=1e-4, atol=1e-5)
    dx2, dw2, db2 = NPU.npu_group_norm_swish_grad(dy, x, 4, w, b, mean.cpu(), rstd.cpu(), [True, False, False], 1.7)
    assert torch.equal(dx2, dx.cpu()) and torch.count_nonzero(dw2) == 0 and torch.count_nonzero(db2) == 0
    # Autograd through the forward op (float64) equals the same reference.
    ins = [t.double().requires_grad_() for t in (x, w, b)]
    (NPU.npu_group_norm_swish(ins[0], 4, ins[1], ins[2], swish_scale=1.7)[0] * dy.double()).sum().backward()
    for t, ref_t in zip(ins, leaves):
        assert_close(t.grad, ref_t.grad)
    # The defaults (eps / swish_scale None -> 1e-5 / 1.0); mean, rstd in weight's dtype.
    o, m, _ = NPU.npu_group_norm_swish(x.half(), 2, w.half(), b.half(), eps=None, swish_scale=None)
    yh, _, _ = gn_ref(x.half().double(), 2, w.half().double(), b.half().double(), 1e-5)
    assert o.dtype == m.dtype == torch.float16
    assert_close(o.double(), yh * torch.sigmoid(yh), rtol=1e-2, atol=1e-2)


# --- argument errors --------------------------------------------------------------------

def test_bad_inputs():
    h = torch.float16
    x, g = rnd(2, 32).to(h), rnd(32).to(h)
    s = torch.ones(32)
    bad = [
        (lambda: NPU.npu_add_rms_norm_quant(x, x, g, s, None, axis=0), "axis only supports -1"),
        (lambda: NPU.npu_add_rms_norm_quant(x, x[:1], g, s, None), "same shape"),
        (lambda: NPU.npu_add_rms_norm_quant(x, x, g[:16], s, None), "gamma of shape"),
        (lambda: NPU.npu_add_rms_norm_quant(x, x, g, s[:4], None), "scales1 of shape"),
        (lambda: NPU.npu_add_rms_norm_quant(x, x, g, s, None, dst_type=torch_npu.hifloat8),
         "hifloat8 is not supported on vNPU: op-plugin documents hifloat8 output for npu_rms_norm_quant only"),
        (lambda: NPU.npu_rms_norm_quant_v2(x, g, s[:1], dst_dtype=torch_npu.hifloat8),
         "hifloat8 is not supported on vNPU"),
        (lambda: NPU.npu_add_rms_norm_quant(x, x, g, s, None, dst_type=torch.int32), "dst_type"),
        (lambda: NPU.npu_add_rms_norm_quant(x, x, g, s, None, zero_points2=s), "zero_points2 needs scales2"),
        (lambda: NPU.npu_add_rms_norm_dynamic_quant(x, x, g, output_mask=[False, False]), "at least one"),
        (lambda: NPU.npu_add_rms_norm_dynamic_quant(x, x, g, smooth_scale2=g), "smooth_scale2 needs"),
        (lambda: NPU.npu_add_rms_norm_dynamic_quant(x, x, g, smooth_scale1=g, output_mask=[False, True]),
         "output_mask\\[0\\]"),
        (lambda: NPU.npu_add_rms_norm_dynamic_quant(x[0], x[0], g), "2 to 8 dimensions"),
        (lambda: NPU.npu_add_rms_norm_dynamic_quant(x.float(), x.float(), g), "x1 should be"),
        (lambda: NPU.npu_add_rms_norm_dynamic_quant(x[:, :12], x[:, :12], g[:12], y_dtype=torch.quint4x2),
         "multiple of 8"),
        (lambda: NPU.npu_add_rms_norm_dynamic_mx_quant(x, x, g, scale_alg=2), "scale_alg"),
        (lambda: NPU.npu_add_rms_norm_dynamic_mx_quant(x, x, g, scale_alg=1), "float4"),
        (lambda: NPU.npu_add_rms_norm_dynamic_mx_quant(x, x, g, dst_type=torch.int8), "dst_type"),
        (lambda: NPU.npu_rms_norm_dynamic_mx_quant(x, g, dst_type=torch.float8_e4m3fn, round_mode="floor"), "rint"),
        (lambda: NPU.npu_rms_norm_dynamic_mx_quant(x, g.reshape(1, 32)), "1-D"),
        (lambda: NPU.npu_rms_norm_quant(x, g, g, torch.ones(2), torch.ones(2)), "scale should have shape"),
        (lambda: NPU.npu_rms_norm_quant(x, g[:8], g, s[:1], s[:1]), "gamma should have shape"),
        (lambda: NPU.npu_rms_norm_quant_v2(x, g, s[:1], offset=s), "offset of shape"),
        (lambda: NPU.npu_rms_norm_quant_v2(x[:, :12], g[:12], s[:1], dst_dtype=torch.quint4x2), "multiple of 8"),
        (lambda: NPU._npu_rms_norm_backward_quant(x, x, torch.ones(2), g, s[:1], quant_mode="dynamic"), "static"),
        (lambda: NPU._npu_rms_norm_backward_quant(x, x, torch.ones(3), g, s[:1]), "rstd of shape"),
        (lambda: NPU._npu_rms_norm_backward_quant(x, x, torch.ones(2), g, s[:1], dst_type=torch.float8_e4m3fn),
         "dst_type"),
        (lambda: NPU.npu_gemma_rms_norm(x, g[:4]), "gamma of shape"),
        (lambda: NPU.npu_add_layer_norm(x, x, g, g[:4]), "beta of shape"),
        (lambda: NPU.npu_add_layer_norm_backward(None, x, x, torch.ones(3), torch.ones(3), g, None), "mean of shape"),
        (lambda: NPU.npu_deep_norm(x, x[:1], g, g), "same shape"),
        (lambda: NPU.npu_group_norm_silu(rnd(2, 6, 4), None, None, 4), "divisible"),
        (lambda: NPU.npu_group_norm_silu(rnd(2, 6, 4), torch.ones(5), None, 3), "weight should be 1-D"),
        (lambda: NPU.npu_group_norm_swish(rnd(6), 3, torch.ones(6), torch.ones(6)), "2 to 8 dimensions"),
        (lambda: NPU.npu_group_norm_swish_grad(rnd(2, 6, 4), rnd(2, 6, 4), 3, torch.ones(6), torch.ones(6),
                                               torch.ones(5), torch.ones(6), [True, True, True]), "mean should"),
    ]
    for fn, match in bad:
        with pytest.raises(RuntimeError, match=match):
            fn()


# --- tracing ----------------------------------------------------------------------------

def test_fake_tensor_shapes_match_op_plugin_meta():
    with FakeTensorMode():
        x, g = torch.empty(2, 3, 64, dtype=torch.bfloat16), torch.empty(64, dtype=torch.bfloat16)
        y1, y2, xo = NPU.npu_add_rms_norm_quant(x, x, g, torch.empty(64), None)
        assert y1.shape == y2.shape == xo.shape == (2, 3, 64) and y1.dtype == torch.int8
        out = NPU.npu_add_rms_norm_dynamic_quant(x, x, g, y_dtype=torch.quint4x2)
        assert [tuple(t.shape) for t in out] == [(2, 3, 8), (0,), (2, 3, 64), (2, 3), (0,)]
        q, xo, scale, rstd = NPU.npu_add_rms_norm_dynamic_mx_quant(x, x, g)
        assert q.shape == (2, 3, 32) and q.dtype == torch.uint8 and scale.shape == (2, 3, 1, 2)
        assert rstd.shape == (2, 3, 1)
        q, scale, rstd = NPU.npu_rms_norm_dynamic_mx_quant(x, g, dst_type=torch_npu.float8_e4m3fn)
        assert q.dtype == torch.float8_e4m3fn and scale.shape == (2, 3, 1, 2)
        y, rstd = NPU.npu_rms_norm_quant_v2(x, g, torch.empty(1, dtype=torch.bfloat16), dst_dtype=torch.quint4x2)
        assert y.shape == (2, 3, 8) and y.dtype == torch.int32 and rstd.shape == (2, 3, 1)
        out = NPU.npu_add_rms_norm_cast(x, x, g)
        assert [t.dtype for t in out] == [torch.float32, torch.bfloat16, torch.float32, torch.bfloat16]
        y, mean, rstd, xo = NPU.npu_add_layer_norm(x, x, g, g)
        assert mean.shape == (2, 3, 1) and mean.dtype == torch.float32 and y.dtype == torch.bfloat16
        out = NPU.npu_group_norm_silu(torch.empty(2, 6, 4), None, None, 3)
        assert out[1].shape == (2, 3)


def test_compile_eager_backend():
    def f(x1, x2, g, s):
        y1, _, x = torch.ops.npu.npu_add_rms_norm_quant(x1, x2, g, s, None, epsilon=1e-6)
        q, _, _, scale, _ = torch.ops.npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, output_mask=[True, False])
        return y1, x, q, scale

    args = (rnd(4, 32, seed=1).half(), rnd(4, 32, seed=2).half(), rnd(32, seed=3).half(), torch.full((32,), 0.02))
    args = on_npu(*args)
    for a, b in zip(torch.compile(f, backend="eager")(*args), f(*args)):
        assert torch.equal(a.cpu(), b.cpu())
