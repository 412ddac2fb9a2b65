"""torch_npu.op_plugin.infer_ops: npu_mrope (plain and multimodal RoPE from a cos/sin cache),
npu_clipped_swiglu and npu_transpose_batchmatmul on npu, each against a formula written here
on cpu; their argument errors; FakeTensor and torch.compile tracing."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen, rnd

FLOATS = [torch.float16, torch.bfloat16, torch.float32]
TOL = {torch.float16: dict(atol=4e-3, rtol=4e-3), torch.bfloat16: dict(atol=3e-2, rtol=3e-2),
       torch.float32: dict(atol=1e-5, rtol=1e-5)}


# --- npu_mrope -----------------------------------------------------------------

def rotate_reference(x, angles_cos, angles_sin, head_size, rotary_dim, neox):
    """Each rotated pair (a, b) as the complex number a + ib times cos + i sin, token by token."""
    t = x.shape[0]
    out = x.double().view(t, -1, head_size).clone()
    half = rotary_dim // 2
    if neox:
        first, second = list(range(half)), list(range(half, rotary_dim))
    else:
        first, second = list(range(0, rotary_dim, 2)), list(range(1, rotary_dim, 2))
    for tok in range(t):
        for j in range(half):
            z = torch.complex(out[tok, :, first[j]], out[tok, :, second[j]])
            z = z * complex(float(angles_cos[tok][j]), float(angles_sin[tok][j]))
            out[tok, :, first[j]], out[tok, :, second[j]] = z.real, z.imag
    return out.view(x.shape)


def mrope_angles(positions, cache, section, cache_mode):
    """cos / sin per token and frequency, choosing the position row frequency by frequency."""
    half = cache.shape[1] // 2
    cache = cache.double()
    if section is None:
        rows = [0] * half
        positions = positions.unsqueeze(0)
    elif cache_mode == "default":
        rows = [next(r for r in range(len(section)) if j < sum(section[:r + 1])) for j in range(half)]
    else:  # t h w t h w ... for the first 3 * section[1] frequencies
        rows = [(j % 3) if j < 3 * section[1] else 0 for j in range(half)]
    cos = [[cache[positions[rows[j], tok], j] for j in range(half)] for tok in range(positions.shape[1])]
    sin = [[cache[positions[rows[j], tok], half + j] for j in range(half)] for tok in range(positions.shape[1])]
    return cos, sin


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("rotary_mode", ["half", "interleave"])
def test_mrope_plain_rope_partial_rotary(dtype, rotary_mode):
    tokens, head_size, rotary_dim = 5, 32, 16  # the last 16 features of each head pass through
    q = rnd(tokens, 3 * head_size, seed=1).to(dtype)
    k = rnd(tokens, 1 * head_size, seed=2).to(dtype)
    cache = rnd(10, rotary_dim, seed=3).to(dtype)
    positions = torch.tensor([7, 0, 3, 3, 9], dtype=torch.int32)
    qo, ko = torch_npu.npu_mrope(positions.npu(), q.npu(), k.npu(), cache.npu(), head_size,
                                 mrope_section=[0, 0, 0], rotary_mode=rotary_mode)
    assert qo.device.type == "npu" and qo.dtype == dtype and qo.shape == q.shape and ko.shape == k.shape
    cos, sin = mrope_angles(positions, cache, None, "default")
    neox = rotary_mode == "half"
    assert_close(qo.cpu().double(), rotate_reference(q, cos, sin, head_size, rotary_dim, neox), **TOL[dtype])
    assert_close(ko.cpu().double(), rotate_reference(k, cos, sin, head_size, rotary_dim, neox), **TOL[dtype])
    assert torch.equal(qo.cpu().view(tokens, 3, head_size)[..., rotary_dim:],
                       q.view(tokens, 3, head_size)[..., rotary_dim:])


@pytest.mark.parametrize("section,cache_mode,rotary_mode,dtype", [
    ([4, 6, 6], "default", "half", torch.float32),
    ([4, 6, 6], "interleave", "half", torch.bfloat16),
    ([8, 4, 4], "interleave", "interleave", torch.float16),  # 3 * 4 < 16: the tail stays on row t
    ([4, 4, 4, 4], "default", "interleave", torch.float32),
])
def test_mrope_multimodal_sections(section, cache_mode, rotary_mode, dtype):
    tokens, head_size = 4, 32
    rows = len(section)
    q = rnd(tokens, 2 * head_size, seed=4).to(dtype)
    k = rnd(tokens, 2 * head_size, seed=5).to(dtype)
    cache = rnd(12, 32, seed=6).to(dtype)
    positions = torch.randint(0, 12, (rows, tokens), generator=gen(7))
    qo, ko = torch_npu.npu_mrope(positions.npu(), q.npu(), k.npu(), cache.npu(), head_size,
                                 mrope_section=section, rotary_mode=rotary_mode, cache_mode=cache_mode)
    cos, sin = mrope_angles(positions, cache, section, cache_mode)
    neox = rotary_mode == "half"
    assert_close(qo.cpu().double(), rotate_reference(q, cos, sin, head_size, 32, neox), **TOL[dtype])
    assert_close(ko.cpu().double(), rotate_reference(k, cos, sin, head_size, 32, neox), **TOL[dtype])


def test_mrope_sections_select_different_rows():
    # A guard against a reference that ignores the rows: t, h and w positions differ here,
    # so the multimodal result differs from plain RoPE at the t positions.
    q, k, cache = rnd(3, 32, seed=8), rnd(3, 32, seed=9), rnd(8, 32, seed=10)
    positions = torch.tensor([[0, 1, 2], [5, 6, 7], [3, 3, 3]])
    mm = torch_npu.npu_mrope(positions.npu(), q.npu(), k.npu(), cache.npu(), 32, mrope_section=[4, 6, 6])[0]
    plain = torch_npu.npu_mrope(positions[0].npu(), q.npu(), k.npu(), cache.npu(), 32)[0]
    assert not torch.allclose(mm.cpu(), plain.cpu())


@pytest.mark.parametrize("kwargs,match", [
    (dict(rotary_mode="interleaved"), "rotary_mode should be 'half' or 'interleave'"),
    (dict(cache_mode="interleave"), "cache_mode 'interleave' needs multimodal positions"),
    (dict(cache_mode="blocked"), "cache_mode should be 'default' or 'interleave'"),
    (dict(mrope_section=[4, 6, 6]), r"positions should be \(3, num_tokens\)"),
    (dict(positions=torch.zeros(3, 4, dtype=torch.long), mrope_section=[4, 4, 4]), "should add up to rotary_dim"),
    (dict(positions=torch.zeros(3, 4, dtype=torch.long), mrope_section=[4, 8, 4], cache_mode="interleave"),
     "cache_mode='interleave' with mrope_section=\\[4, 8, 4\\] is not supported on vNPU"),
    (dict(positions=torch.zeros(3, 4, dtype=torch.long)), "positions should be 1-D"),
    (dict(positions=torch.zeros(4, dtype=torch.float32)), "positions should be int32 or int64"),
    (dict(query=torch.zeros(4, 2, 32)), "query and key should be 2-D"),
    (dict(key=torch.zeros(4, 32, dtype=torch.float16)), "key and cos_sin_cache should have query's dtype"),
    (dict(head_size=48), r"the last dimension of query \(64\) is not a multiple of head_size 48"),
    (dict(cos_sin_cache=torch.zeros(8, 64)), r"rotary_dim = 64\) should be even and in \(0, head_size = 32\]"),
    (dict(positions=torch.zeros(5, dtype=torch.long)), "same number of tokens"),
])
def test_mrope_bad_input(kwargs, match):
    args = dict(positions=torch.zeros(4, dtype=torch.long), query=torch.zeros(4, 64), key=torch.zeros(4, 32),
                cos_sin_cache=torch.zeros(8, 32), head_size=32)
    args.update(kwargs)
    args = {n: (v.npu() if isinstance(v, torch.Tensor) else v) for n, v in args.items()}
    with pytest.raises(RuntimeError, match=match):
        torch_npu.npu_mrope(args.pop("positions"), args.pop("query"), args.pop("key"), args.pop("cos_sin_cache"),
                            args.pop("head_size"), **args)


# --- npu_clipped_swiglu --------------------------------------------------------

def clipped_swiglu_reference(x, dim, alpha, limit, bias, interleaved, valid_rows=None):
    """On the original shape: gate A and linear B along dim (halves), or neighbouring
    elements of the flattened tail dims (interleaved); rows = the dims before dim."""
    d = dim % x.dim()
    xd = x.double()
    if interleaved:
        tail = xd.reshape(*x.shape[:d], -1, 2)
        a, b = tail[..., 0], tail[..., 1]
    else:
        a, b = torch.split(xd, x.shape[d] // 2, dim=d)
    a = torch.minimum(a, torch.tensor(limit, dtype=torch.float64))
    b = torch.maximum(torch.minimum(b, torch.tensor(limit, dtype=torch.float64)),
                      torch.tensor(-limit, dtype=torch.float64))
    y = a / (1 + torch.exp(-alpha * a)) * (b + bias)
    shape = list(x.shape)
    shape[d] //= 2
    y = y.reshape(shape)
    if valid_rows is not None:  # rows: the product of the dims before dim
        rows = 1
        for size in x.shape[:d]:
            rows *= size
        y.view(rows, -1)[valid_rows:] = 0
    return y


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("dim", [-1, 1])
def test_clipped_swiglu(dtype, interleaved, dim):
    x = (rnd(5, 6, 4, seed=11) * 6).to(dtype)  # beyond limit on both sides
    y = torch_npu.npu_clipped_swiglu(x.npu(), dim=dim, alpha=1.3, limit=4.0, bias=0.5, interleaved=interleaved)
    assert y.device.type == "npu" and y.dtype == dtype
    want = clipped_swiglu_reference(x, dim, 1.3, 4.0, 0.5, interleaved)
    assert y.shape == want.shape
    assert_close(y.cpu().double(), want, **TOL[dtype])


def test_clipped_swiglu_defaults_and_group_index():
    x = rnd(7, 8, seed=12) * 10
    groups = torch.tensor([2, 3])  # 5 of the 7 rows are computed
    y = torch_npu.npu_clipped_swiglu(x.npu(), group_index=groups.npu())
    want = clipped_swiglu_reference(x, -1, 1.702, 7.0, 1.0, True, valid_rows=5)
    assert_close(y.cpu().double(), want, atol=1e-5, rtol=1e-5)
    assert torch.count_nonzero(y.cpu()[5:]) == 0 and torch.count_nonzero(y.cpu()[:5]) > 0
    y3 = torch_npu.npu_clipped_swiglu(rnd(2, 3, 4, seed=13).npu(), group_index=torch.tensor([1]).npu(), dim=-1)
    assert torch.count_nonzero(y3.cpu()[1]) == 0 and torch.count_nonzero(y3.cpu()[0]) > 0


@pytest.mark.parametrize("x,kwargs,match", [
    (torch.zeros(4, 5), {}, r"dimension -1 of x \(5\) should be even"),
    (torch.zeros(8), {}, "x should have more than 1 dimension"),
    (torch.zeros(4, 8), dict(dim=2), "dim 2 is out of range"),
    (torch.zeros(4, 8, dtype=torch.int32), {}, "x should be float16, bfloat16 or float32"),
    (torch.zeros(4, 8), dict(group_index=torch.tensor([1, 2], dtype=torch.int32)),
     "group_index should be a 1-D int64 tensor"),
])
def test_clipped_swiglu_bad_input(x, kwargs, match):
    kwargs = {n: (v.npu() if isinstance(v, torch.Tensor) else v) for n, v in kwargs.items()}
    with pytest.raises(RuntimeError, match=match):
        torch_npu.npu_clipped_swiglu(x.npu(), **kwargs)


# --- npu_transpose_batchmatmul ---------------------------------------------------

def tbmm_reference(x1, x2, perm_x1, perm_x2):
    """Sum over k of x1[b, m, k] x2[b, k, n] as (M, B, N), with the stored layouts spelled out."""
    a = "bmk" if perm_x1 == [0, 1, 2] else "mbk"
    w = "bkn" if perm_x2 == [0, 1, 2] else "bnk"
    return torch.einsum(f"{a},{w}->mbn", x1.double(), x2.double())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("perm_x1,perm_x2", [([0, 1, 2], [0, 1, 2]), ([1, 0, 2], [0, 1, 2]),
                                             ([1, 0, 2], [0, 2, 1])])
def test_transpose_batchmatmul(dtype, perm_x1, perm_x2):
    b, m, k, n = 3, 4, 16, 8
    x1 = rnd(*((b, m, k) if perm_x1 == [0, 1, 2] else (m, b, k)), seed=14).to(dtype)
    x2 = rnd(*((b, k, n) if perm_x2 == [0, 1, 2] else (b, n, k)), seed=15).to(dtype)
    y = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), perm_x1=perm_x1, perm_x2=perm_x2,
                                            perm_y=[1, 0, 2])
    assert y.device.type == "npu" and y.dtype == dtype and y.shape == (m, b, n)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=0.1, rtol=2e-2)
    assert_close(y.cpu().double(), tbmm_reference(x1, x2, perm_x1, perm_x2), **tol)


def test_transpose_batchmatmul_split_and_quantised():
    b, m, k, n = 4, 3, 16, 8
    x1, x2 = rnd(m, b, k, seed=16).half(), rnd(b, k, n, seed=17).half()
    full = tbmm_reference(x1, x2, [1, 0, 2], [0, 1, 2]).reshape(m, b * n)
    y = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), perm_x1=[1, 0, 2], batch_split_factor=2)
    assert y.shape == (2, m, b * n // 2)
    for f in range(2):  # slice f holds columns [f * B * N / 2, (f + 1) * B * N / 2) of the (M, B * N) result
        assert_close(y[f].cpu().double(), full[:, f * 16:(f + 1) * 16], atol=0.05, rtol=1e-2)
    scales = rnd(b * n, seed=18, lo=0.5, hi=2.0)
    packed = torch_npu.npu_trans_quant_param(scales.npu())  # int64, the scale's top 19 bits
    q = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), scale=packed, perm_x1=[1, 0, 2])
    assert q.dtype == torch.int8 and q.shape == (m, 1, b * n)
    fp19 = (scales.view(torch.int32) & ~0x1FFF).view(torch.float32).double()
    want = (full * fp19).round().clamp(-128, 127)
    assert (q.cpu().double().view(m, b * n) - want).abs().max() <= 1  # fp16 products may cross a .5


@pytest.mark.parametrize("kwargs,match", [
    (dict(perm_x1=[0, 2, 1]), r"perm_x1 should be \[0, 1, 2\] or \[1, 0, 2\]"),
    (dict(perm_x2=[1, 0, 2]), r"perm_x2 should be \[0, 1, 2\] or \[0, 2, 1\]"),
    (dict(perm_y=[0, 1, 2]), r"perm_y should be \[1, 0, 2\]"),
    (dict(bias=torch.zeros(8)), "bias is not supported"),
    (dict(weight=torch.zeros(2, 8, 8)), "with the same B and K"),
    (dict(weight=torch.zeros(2, 16, 8, dtype=torch.float16)), "weight dtype torch.float16 should be input's dtype"),
    (dict(input=torch.zeros(2, 3, 16, dtype=torch.int8), weight=torch.zeros(2, 16, 8, dtype=torch.int8)),
     "input should be float16, bfloat16 or float32"),
    (dict(input=torch.zeros(6, 16)), "input and weight should be 3-D"),
    (dict(batch_split_factor=3), "batch_split_factor should be a positive divisor of B \\* N = 16"),
    (dict(scale=torch.zeros(16, dtype=torch.int64), batch_split_factor=2), "batch_split_factor should be 1 with"),
    (dict(scale=torch.zeros(15, dtype=torch.int64)), "scale should have B \\* N = 16 elements"),
    (dict(scale=torch.zeros(16)), "scale should be int64 or uint64"),
])
def test_transpose_batchmatmul_bad_input(kwargs, match):
    args = dict(input=torch.zeros(2, 3, 16), weight=torch.zeros(2, 16, 8))
    args.update(kwargs)
    args = {n: (v.npu() if isinstance(v, torch.Tensor) else v) for n, v in args.items()}
    with pytest.raises(RuntimeError, match=match):
        torch_npu.npu_transpose_batchmatmul(args.pop("input"), args.pop("weight"), **args)


# --- tracing ---------------------------------------------------------------------

def test_fake_tensor_shapes():
    with FakeTensorMode():
        qo, ko = torch.ops.npu.npu_mrope(torch.empty(3, 6, dtype=torch.long), torch.empty(6, 128),
                                         torch.empty(6, 64), torch.empty(16, 64), 64, mrope_section=[8, 12, 12])
        assert qo.shape == (6, 128) and ko.shape == (6, 64)
        y = torch.ops.npu.npu_clipped_swiglu(torch.empty(6, 10, dtype=torch.bfloat16),
                                             group_index=torch.empty(2, dtype=torch.long))
        assert y.shape == (6, 5) and y.dtype == torch.bfloat16
        z = torch.ops.npu.npu_transpose_batchmatmul(torch.empty(4, 8, 32), torch.empty(8, 32, 16),
                                                    perm_x1=[1, 0, 2], perm_y=[1, 0, 2])
        assert z.shape == (4, 8, 16)


def test_compile_backend_npu_equals_eager():
    def f(x, groups, w):
        y = torch_npu.npu_clipped_swiglu(x, group_index=groups, interleaved=False)
        return torch_npu.npu_transpose_batchmatmul(y.view(3, 2, 4), w, perm_x1=[1, 0, 2])

    x, groups, w = rnd(3, 16, seed=19).npu(), torch.tensor([2, 1]).npu(), rnd(2, 4, 8, seed=20).npu()
    assert_close(torch.compile(f, backend="npu")(x, groups, w).cpu(), f(x, groups, w).cpu())
