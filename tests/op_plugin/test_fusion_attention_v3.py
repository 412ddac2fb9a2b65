"""torch_npu.op_plugin.fusion_attention_v3: npu_fusion_attention_v2 / _v3, their grads, .out
overloads and workspace / infer-output helpers -- against npu_fusion_attention for the
arguments they share, and against softmax attention written out on cpu for sink, pse_type,
pse gradients and query_rope / key_rope; grads against torch.autograd."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import rnd

COMPRESSED = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)
TOL = dict(atol=2e-5, rtol=2e-5)

SCHEMAS = [
    "npu_fusion_attention_v2(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? query_rope=None, Tensor? key_rope=None, float scale=1., float keep_prob=1., int pre_tokens=2147483647, int next_tokens=2147483647, int inner_precise=0, int[]? prefix=None, int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, int pse_type=1, int[]? q_start_idx=None, int[]? kv_start_idx=None, str softmax_layout=\"\", Tensor? sink=None, Tensor? dropout_mask=None, int seed=0, int offset=0) -> (Tensor, Tensor, Tensor, Tensor, int, int, int)",  # noqa: E501
    "npu_fusion_attention_grad_v2(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, Tensor? query_rope=None, Tensor? key_rope=None, float scale_value=1., float keep_prob=1., int pre_tokens=2147483647, int next_tokens=2147483647, int inner_precise=0, int seed=0, int offset=0, int numels=0, int[]? prefix=None, int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, int pse_type=1, int[]? q_start_idx=None, int[]? kv_start_idx=None, str softmax_layout=\"\", Tensor? sink=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",  # noqa: E501
    "npu_fusion_attention_v3(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, SymInt[]? prefix=None, Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",  # noqa: E501
    "npu_fusion_attention_v3.out(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, int[]? prefix=None, Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None, Tensor? workspace=None, *, Tensor(a!) attention_score, Tensor(b!) softmax_max, Tensor(c!) softmax_sum, Tensor(d!) softmax_out, Tensor(e!) seed, Tensor(f!) offset) -> (Tensor(a!), Tensor(b!), Tensor(c!), Tensor(d!), Tensor(e!), Tensor(f!))",  # noqa: E501
    "npu_fusion_attention_grad_v3(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, float scale_value=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, Tensor? seed=None, Tensor? offset=None, SymInt[]? prefix=None, Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",  # noqa: E501
    "npu_fusion_attention_grad_v3.out(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, float scale_value=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, Tensor? seed=None, Tensor? offset=None, int[]? prefix=None, Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None, Tensor? workspace=None, Tensor(a!) dq, Tensor(b!) dk, Tensor(c!) dv, Tensor(d!) dpse, Tensor(e!) dsink) -> (Tensor(a!), Tensor(b!), Tensor(c!), Tensor(d!), Tensor(e!))",  # noqa: E501
    "_npu_fusion_attention_v3_infer_output(Tensor query, Tensor key, Tensor value, int head_num, str input_layout) -> (Tensor, Tensor, Tensor)",  # noqa: E501
    "_npu_fusion_attention_grad_v3_infer_output(Tensor query, Tensor key, Tensor value, Tensor? pse=None, Tensor? sink=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",  # noqa: E501
    "_npu_fusion_attention_v3_get_max_workspace(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, int[]? prefix=None, Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None) -> Tensor",  # noqa: E501
    "_npu_fusion_attention_grad_v3_get_max_workspace(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, float scale_value=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, Tensor? seed=None, Tensor? offset=None, int[]? prefix=None, Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None) -> Tensor",  # noqa: E501
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[s.split("(", 1)[0] for s in SCHEMAS])
def test_schema_is_op_plugins(schema):
    name = schema.split("(", 1)[0]
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.npu, packet), overload or "default")
    assert op._schema == torch._C.parse_schema("npu::" + schema)


# ------------------------------------------------------------------ helpers


def to_layout(x, layout):  # x is BNSD
    b, n, s, d = x.shape
    return {"BNSD": x, "BSND": x.transpose(1, 2), "BSH": x.transpose(1, 2).reshape(b, s, n * d),
            "SBH": x.permute(2, 0, 1, 3).reshape(s, b, n * d)}[layout].contiguous()


def softmax_attention(q, k, v, scale, masked=None, pse=None, pse_after_scale=False, sink=None):
    """Plain softmax attention on BNSD (GQA by repetition); sink: one extra logit per head."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-1, -2)
    if pse is not None and not pse_after_scale:
        s = s + pse
    s = s * scale
    if pse is not None and pse_after_scale:
        s = s + pse
    if masked is not None:
        s = s.masked_fill(masked, float("-inf"))
    if sink is not None:
        extra = sink.view(1, -1, 1, 1).expand(*s.shape[:3], 1)
        return torch.softmax(torch.cat([s, extra], -1), -1)[..., :-1] @ v
    return torch.softmax(s, -1) @ v


def grads_of(out, inputs, g):
    return torch.autograd.grad(out, inputs, g)


def leaves(*ts):
    return [t.detach().clone().requires_grad_() for t in ts]


# ------------------------------------------------------------------ v2 / v3 == npu_fusion_attention


@pytest.mark.parametrize("device", ["cpu", "npu"])
@pytest.mark.parametrize("layout", ["BSH", "SBH", "BSND", "BNSD"])
def test_v2_v3_equal_v1_and_their_grads_equal_autograd(device, layout):
    b, n, nkv, s, d, scale = 2, 4, 2, 12, 8, 0.35
    q, k, v = (to_layout(rnd(b, h, s, d, seed=i), layout).to(device) for i, h in ((1, n), (2, nkv), (3, nkv)))
    kw = dict(atten_mask=COMPRESSED.to(device), sparse_mode=3)
    ref_in = leaves(q, k, v)
    v1 = torch_npu.npu_fusion_attention(*ref_in, n, layout, scale=scale, **kw)
    v2_in, v3_in = leaves(q, k, v), leaves(q, k, v)
    v2 = torch_npu.npu_fusion_attention_v2(*v2_in, n, layout, scale=scale, **kw)
    v3 = torch_npu.npu_fusion_attention_v3(*v3_in, n, layout, scale=scale, **kw)
    assert len(v2) == 7 and len(v3) == 6
    for out in (v2, v3):
        assert out[0].device.type == device
        for got, want in zip(out[:4], v1[:4]):
            assert got.shape == want.shape and got.dtype == want.dtype
            assert_close(got, want, atol=0, rtol=0)
    assert v2[4:] == (0, 0, b * n * s * s)  # numels whatever keep_prob, as the kernel counts it
    assert v3[4].device.type == "cpu" and v3[4].dtype == torch.int64 and v3[4].shape == (1,)
    g = rnd(*v1[0].shape, seed=4).to(device)
    want = grads_of(v1[0], ref_in, g)
    for got in (grads_of(v2[0], v2_in, g), grads_of(v3[0], v3_in, g)):
        for a, w in zip(got, want):
            assert_close(a, w, **TOL)
    g2 = torch_npu.npu_fusion_attention_grad_v2(q, k, v, g, n, layout, scale_value=scale, **kw)
    g3 = torch_npu.npu_fusion_attention_grad_v3(q, k, v, g, n, layout, scale_value=scale, **kw)
    assert len(g2) == 7 and g2[3] is None and g2[4] is None and g2[5] is None and g2[6].shape == (0,)
    assert len(g3) == 5 and g3[3] is None and g3[4].shape == (0,) and g3[4].dtype == torch.float32
    for a, w in zip(g2[:3] + g3[:3], want + want):
        assert_close(a, w, **TOL)


def test_tnd_v3_lengths_tensors_and_softmax_layout():
    cum = [5, 8, 14]
    q, k, v = (rnd(14, 2, 8, seed=s) for s in (10, 11, 12))
    v1 = torch_npu.npu_fusion_attention(q, k, v, 2, "TND", atten_mask=COMPRESSED, sparse_mode=3, scale=0.3,
                                        actual_seq_qlen=cum, actual_seq_kvlen=cum)
    lens = torch.tensor(cum)
    tnd = torch_npu.npu_fusion_attention_v3(q, k, v, 2, "TND", atten_mask=COMPRESSED, sparse_mode=3, scale=0.3,
                                            actual_seq_qlen=lens, actual_seq_kvlen=lens, softmax_layout="TND")
    v1_tnd = torch_npu.npu_fusion_attention(q, k, v, 2, "TND", atten_mask=COMPRESSED, sparse_mode=3, scale=0.3,
                                            actual_seq_qlen=cum, actual_seq_kvlen=cum, softmax_layout="TND")
    assert_close(tnd[0], v1[0], atol=0, rtol=0)
    assert_close(tnd[1], v1_tnd[1], atol=0, rtol=0)  # (T, N, 8) stored TND
    ntd = torch_npu.npu_fusion_attention_v3(q, k, v, 2, "TND", atten_mask=COMPRESSED, sparse_mode=3, scale=0.3,
                                            actual_seq_qlen=lens, actual_seq_kvlen=lens)
    # the kernel's default, v1's too: an (N, T, 8) buffer seen as (T, N, 8)
    assert ntd[1].shape == (14, 2, 8) and torch.equal(ntd[1], v1[1])
    assert torch.equal(ntd[1].reshape(2, 14, 8), v1_tnd[1].transpose(0, 1))
    v2 = torch_npu.npu_fusion_attention_v2(q, k, v, 2, "TND", atten_mask=COMPRESSED, sparse_mode=3, scale=0.3,
                                           actual_seq_qlen=cum, actual_seq_kvlen=cum, softmax_layout="TND")
    assert_close(v2[0], v1[0], atol=0, rtol=0)
    assert v2[6] == 2 * (5 * 5 + 3 * 3 + 6 * 6)
    g = rnd(14, 2, 8, seed=13)
    ref_in = leaves(q, k, v)
    out = torch_npu.npu_fusion_attention(*ref_in, 2, "TND", atten_mask=COMPRESSED, sparse_mode=3, scale=0.3,
                                         actual_seq_qlen=cum, actual_seq_kvlen=cum)[0]
    want = grads_of(out, ref_in, g)
    got = torch_npu.npu_fusion_attention_grad_v3(q, k, v, g, 2, "TND", atten_mask=COMPRESSED, sparse_mode=3,
                                                 scale_value=0.3, actual_seq_qlen=lens, actual_seq_kvlen=lens)
    for a, w in zip(got[:3], want):
        assert_close(a, w, **TOL)


def test_dropout_seed_tensor_reproduces_the_mask():
    q, k, v = leaves(*(rnd(1, 2, 16, 8, seed=s) for s in (20, 21, 22)))
    out = torch_npu.npu_fusion_attention_v3(q, k, v, 2, "BNSD", keep_prob=0.6, scale=0.4)
    no_drop = torch_npu.npu_fusion_attention_v3(q, k, v, 2, "BNSD", scale=0.4)[0]
    assert not torch.allclose(out[0], no_drop)
    g = rnd(1, 2, 16, 8, seed=23)
    want = grads_of(out[0], (q, k, v), g)
    got = torch_npu.npu_fusion_attention_grad_v3(q.detach(), k.detach(), v.detach(), g, 2, "BNSD", keep_prob=0.6,
                                                 scale_value=0.4, seed=out[4], offset=out[5])
    for a, w in zip(got[:3], want):
        assert_close(a, w, **TOL)
    v2 = torch_npu.npu_fusion_attention_v2(q, k, v, 2, "BNSD", keep_prob=0.6, scale=0.4)
    got = torch_npu.npu_fusion_attention_grad_v2(q.detach(), k.detach(), v.detach(), g, 2, "BNSD", keep_prob=0.6,
                                                 scale_value=0.4, seed=v2[4], offset=v2[5], numels=v2[6])
    want = grads_of(v2[0], (q, k, v), g)
    for a, w in zip(got[:3], want):
        assert_close(a, w, **TOL)


# ------------------------------------------------------------------ sink, pse, rope


@pytest.mark.parametrize("layout", ["BNSD", "BSH"])
def test_sink_joins_each_softmax_row(layout):
    b, n, s, d, scale = 2, 2, 10, 4, 0.5
    q, k, v = (rnd(b, n, s, d, seed=i) for i in (30, 31, 32))
    sink = rnd(n, seed=33)
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)
    rq, rk, rv, rs = leaves(q, k, v, sink)
    want = softmax_attention(rq, rk, rv, scale, causal, sink=rs)
    g = rnd(*want.shape, seed=34)
    want_grads = grads_of(want, (rq, rk, rv, rs), g)
    args = leaves(*(to_layout(t, layout) for t in (q, k, v))) + leaves(sink)
    out = torch_npu.npu_fusion_attention_v3(*args[:3], n, layout, scale=scale, atten_mask=COMPRESSED, sparse_mode=2,
                                            sink=args[3])
    assert_close(out[0], to_layout(want, layout).detach(), **TOL)
    # softmax_max: the row log-sum-exp with the sink logit
    lse = torch.logsumexp(torch.cat([(q @ k.transpose(-1, -2) * scale).masked_fill(causal, float("-inf")),
                                     sink.view(1, n, 1, 1).expand(b, n, s, 1)], -1), -1)
    assert_close(out[1][..., 0], lse, **TOL)
    got = grads_of(out[0], args, to_layout(g, layout))
    for a, w in zip(got, want_grads):
        assert_close(a, to_layout(w, layout) if w.dim() == 4 else w, **TOL)
    explicit = torch_npu.npu_fusion_attention_grad_v3(*(t.detach() for t in args[:3]), to_layout(g, layout), n, layout,
                                                      scale_value=scale, atten_mask=COMPRESSED, sparse_mode=2,
                                                      sink=sink)
    assert explicit[4].dtype == torch.float32
    for a, w in zip(explicit[:3] + (explicit[4],), got):
        assert_close(a, w, **TOL)


def test_sink_with_tnd_sequences():
    cum = [4, 10]
    q, k, v = (rnd(10, 2, 4, seed=s) for s in (40, 41, 42))
    sink = rnd(2, seed=43)
    lens = torch.tensor(cum)
    args = leaves(q, k, v, sink)
    out = torch_npu.npu_fusion_attention_v3(*args[:3], 2, "TND", scale=0.6, actual_seq_qlen=lens,
                                            actual_seq_kvlen=lens, sink=args[3], softmax_layout="TND")[0]
    g = rnd(10, 2, 4, seed=44)
    got = grads_of(out, args, g)
    want_out, want_grads = [], [torch.zeros_like(t) for t in args]
    for a, b in ((0, 4), (4, 10)):
        rq, rk, rv, rs = leaves(*(t[a:b].transpose(0, 1).unsqueeze(0) for t in (q, k, v)), sink)
        o = softmax_attention(rq, rk, rv, 0.6, sink=rs)
        want_out.append(o[0].transpose(0, 1))
        for i, gr in enumerate(grads_of(o, (rq, rk, rv, rs), g[a:b].transpose(0, 1).unsqueeze(0))):
            if i < 3:
                want_grads[i][a:b] += gr[0].transpose(0, 1)
            else:
                want_grads[3] += gr
    assert_close(out, torch.cat(want_out).detach(), **TOL)
    for a, w in zip(got, want_grads):
        assert_close(a, w, **TOL)


@pytest.mark.parametrize("pse_type", [0, 1])
def test_pse_type_and_pse_gradient(pse_type):
    b, n, s, d, scale = 1, 2, 8, 4, 0.4
    q, k, v = (rnd(b, n, s, d, seed=i) for i in (50, 51, 52))
    pse = rnd(b, n, s, s, seed=53)
    rq, rk, rv, rp = leaves(q, k, v, pse)
    want = softmax_attention(rq, rk, rv, scale, pse=rp, pse_after_scale=pse_type == 0)
    g = rnd(b, n, s, d, seed=54)
    want_grads = grads_of(want, (rq, rk, rv, rp), g)
    args = leaves(q, k, v, pse)
    out = torch_npu.npu_fusion_attention_v2(*args[:3], n, "BNSD", pse=args[3], scale=scale, pse_type=pse_type)[0]
    assert_close(out, want.detach(), **TOL)
    for a, w in zip(grads_of(out, args, g), want_grads):
        assert_close(a, w, **TOL)
    explicit = torch_npu.npu_fusion_attention_grad_v2(q, k, v, g, n, "BNSD", pse=pse, scale_value=scale,
                                                      pse_type=pse_type)
    for a, w in zip(explicit[:4], want_grads):
        assert_close(a, w, **TOL)
    # given the forward's statistics and output, the grad takes them (as a ring attention passes them)
    fwd = torch_npu.npu_fusion_attention_v2(q, k, v, n, "BNSD", pse=pse, scale=scale, pse_type=pse_type)
    stats = dict(softmax_max=fwd[1], softmax_sum=fwd[2], attention_in=fwd[0])
    from_stats = torch_npu.npu_fusion_attention_grad_v2(q, k, v, g, n, "BNSD", pse=pse, scale_value=scale,
                                                        pse_type=pse_type, **stats)
    assert len(from_stats) == 7 and from_stats[4] is None and from_stats[6].shape == (0,)
    for a, w in zip(from_stats[:4], want_grads):
        assert_close(a, w, **TOL)
    if pse_type == 1:
        v3 = torch_npu.npu_fusion_attention_grad_v3(q, k, v, g, n, "BNSD", pse=pse, scale_value=scale, **stats)
        for a, w in zip(v3[:4], want_grads):
            assert_close(a, w, **TOL)


@pytest.mark.parametrize("pse_type", [2, 3])
@pytest.mark.parametrize("slopes_shape", [(2,), (2, 2)])
def test_alibi_generated_from_slopes(pse_type, slopes_shape):
    # MindSpeed's --alibi-fusion-attn-type 2 / 3 (and its ring attention, which passes each block's start):
    # -slope * |(j + kv_start) - (i + q_start)| (its square root for 3), added after scaling.
    b, n, sq, skv, d, scale = 2, 2, 5, 7, 4, 0.5
    q, k, v = rnd(b, n, sq, d, seed=70), rnd(b, n, skv, d, seed=71), rnd(b, n, skv, d, seed=72)
    slopes = torch.tensor([0.5, 0.125]).expand(slopes_shape[:-1] + (2,)).contiguous() if len(slopes_shape) == 2 \
        else torch.tensor([0.5, 0.125])
    q_start, kv_start = 3, 1
    distance = ((torch.arange(skv) + kv_start).view(1, -1) - (torch.arange(sq) + q_start).view(-1, 1)).abs().float()
    if pse_type == 3:
        distance = distance.sqrt()
    rq, rk, rv, rs = leaves(q, k, v, slopes)
    want = softmax_attention(rq, rk, rv, scale, pse=-rs.reshape(-1, n, 1, 1) * distance, pse_after_scale=True)
    args = leaves(q, k, v, slopes)
    out = torch_npu.npu_fusion_attention_v2(*args[:3], n, "BNSD", pse=args[3], scale=scale, pse_type=pse_type,
                                            q_start_idx=[q_start], kv_start_idx=[kv_start])[0]
    assert_close(out, want.detach(), **TOL)
    g = rnd(b, n, sq, d, seed=73)
    for a, w in zip(grads_of(out, args, g), grads_of(want, (rq, rk, rv, rs), g)):
        assert_close(a, w, **TOL)


@pytest.mark.parametrize("layout", ["BNSD", "BSH", "BSND"])
def test_rope_parts_join_query_and_key_heads(layout):
    b, n, s, d, dr, scale = 1, 2, 6, 8, 4, 0.3
    q, k, v = (rnd(b, n, s, d, seed=i) for i in (60, 61, 62))
    qr, kr = rnd(b, n, s, dr, seed=63), rnd(b, n, s, dr, seed=64)
    ref = leaves(q, k, v, qr, kr)
    want = softmax_attention(torch.cat([ref[0], ref[3]], -1), torch.cat([ref[1], ref[4]], -1), ref[2], scale)
    g = rnd(b, n, s, d, seed=65)
    want_grads = grads_of(want, ref, g)
    ins = [to_layout(t, layout) for t in (q, k, v, qr, kr)]
    out = torch_npu.npu_fusion_attention_v2(*ins[:3], n, layout, query_rope=ins[3], key_rope=ins[4], scale=scale)
    assert_close(out[0], to_layout(want, layout).detach(), **TOL)
    got = torch_npu.npu_fusion_attention_grad_v2(*ins[:3], to_layout(g, layout), n, layout, query_rope=ins[3],
                                                 key_rope=ins[4], scale_value=scale)
    dq, dk, dv, dpse, dq_rope, dk_rope, dsink = got
    assert dpse is None and dsink.shape == (0,)
    for a, w in zip((dq, dk, dv, dq_rope, dk_rope), want_grads):
        assert_close(a, to_layout(w, layout), **TOL)


# ------------------------------------------------------------------ .out, workspace, infer output


def test_out_overloads_write_the_results():
    cum = torch.tensor([3, 7])
    q, k, v = (rnd(7, 2, 4, seed=s) for s in (70, 71, 72))
    kw = dict(actual_seq_qlen=cum, actual_seq_kvlen=cum, scale=0.5)
    ws = torch.ops.npu._npu_fusion_attention_v3_get_max_workspace(q, k, v, 2, "TND", **kw)
    assert ws.dtype == torch.uint8
    want = torch_npu.npu_fusion_attention_v3(q, k, v, 2, "TND", **kw)
    outs = [torch.empty(0), torch.empty(0), torch.empty(0), torch.empty(0), torch.empty(0, dtype=torch.int64),
            torch.empty(0, dtype=torch.int64)]
    got = torch.ops.npu.npu_fusion_attention_v3.out(q, k, v, 2, "TND", workspace=ws, **kw, attention_score=outs[0],
                                                    softmax_max=outs[1], softmax_sum=outs[2], softmax_out=outs[3],
                                                    seed=outs[4], offset=outs[5])
    for a, t, w in zip(got, outs, want):
        assert a is t and torch.equal(a, w)
    g = rnd(7, 2, 4, seed=73)
    want = torch_npu.npu_fusion_attention_grad_v3(q, k, v, g, 2, "TND", scale_value=0.5, actual_seq_qlen=cum,
                                                  actual_seq_kvlen=cum)
    ws = torch.ops.npu._npu_fusion_attention_grad_v3_get_max_workspace(q, k, v, g, 2, "TND", scale_value=0.5,
                                                                       actual_seq_qlen=cum, actual_seq_kvlen=cum)
    outs = torch.ops.npu._npu_fusion_attention_grad_v3_infer_output(q, k, v)
    got = torch.ops.npu.npu_fusion_attention_grad_v3.out(q, k, v, g, 2, "TND", scale_value=0.5, actual_seq_qlen=cum,
                                                         actual_seq_kvlen=cum, workspace=ws, dq=outs[0], dk=outs[1],
                                                         dv=outs[2], dpse=outs[3], dsink=outs[4])
    for a, t, w in zip(got[:3], outs, want):
        assert a is t and torch.equal(a, w)


@pytest.mark.parametrize("layout,shapes", [
    ("BSH", ((2, 5, 16), (2, 7, 8), (2, 7, 12), [2, 5, 24], [2, 4, 5, 8])),
    ("SBH", ((5, 2, 16), (7, 2, 8), (7, 2, 8), [5, 2, 16], [2, 4, 5, 8])),
    ("BNSD", ((2, 4, 5, 4), (2, 2, 7, 4), (2, 2, 7, 3), [2, 4, 5, 3], [2, 4, 5, 8])),
    ("BSND", ((2, 5, 4, 4), (2, 7, 2, 4), (2, 7, 2, 4), [2, 5, 4, 4], [2, 4, 5, 8])),
    ("TND", ((9, 4, 4), (9, 2, 4), (9, 2, 2), [9, 4, 2], [9, 4, 8])),
])
def test_infer_output_shapes(layout, shapes):
    q, k, v = (torch.empty(s_) for s_ in shapes[:3])
    out, smax, ssum = torch.ops.npu._npu_fusion_attention_v3_infer_output(q, k, v, 4, layout)
    assert list(out.shape) == shapes[3] and list(smax.shape) == shapes[4] == list(ssum.shape)
    assert smax.dtype == torch.float32
    pse, sink = torch.empty(2, 4, 5, 7), torch.empty(4)
    dq, dk, dv, dpse, dsink = torch.ops.npu._npu_fusion_attention_grad_v3_infer_output(q, k, v, pse, sink)
    assert (dq.shape, dk.shape, dv.shape, dpse.shape, dsink.shape) == (q.shape, k.shape, v.shape, pse.shape, (4,))


# ------------------------------------------------------------------ tracing


def test_shapes_under_fake_tensors_and_compile():
    with FakeTensorMode():
        q = torch.empty(2, 4, 16, 8, dtype=torch.bfloat16)
        kv = torch.empty(2, 2, 16, 8, dtype=torch.bfloat16)
        out = torch.ops.npu.npu_fusion_attention_v3(q, kv, kv, 4, "BNSD", scale=0.1)
        assert out[0].shape == q.shape and out[1].shape == (2, 4, 16, 8) and out[1].dtype == torch.float32
        assert out[4].shape == (1,) and out[4].dtype == torch.int64
        grads = torch.ops.npu.npu_fusion_attention_grad_v3(q, kv, kv, q, 4, "BNSD", scale_value=0.1)
        assert grads[0].shape == q.shape and grads[1].shape == kv.shape and grads[4].shape == (0,)
        out = torch.ops.npu.npu_fusion_attention_v2(q, kv, kv, 4, "BNSD", scale=0.1, sink=torch.empty(4))
        assert out[0].shape == q.shape and out[6] == 2 * 4 * 16 * 16
    q, k, v = (rnd(1, 2, 8, 4, seed=s).npu() for s in (80, 81, 82))

    def attend(q, k, v):
        return torch_npu.npu_fusion_attention_v3(q, k, v, 2, "BNSD", scale=0.5, atten_mask=COMPRESSED.npu(),
                                                 sparse_mode=2)[0] * 2

    assert_close(torch.compile(attend, backend="eager")(q, k, v), attend(q, k, v), atol=0, rtol=0)


# ------------------------------------------------------------------ bad input


def _qkv():
    return rnd(1, 2, 4, 4, seed=90), rnd(1, 2, 4, 4, seed=91), rnd(1, 2, 4, 4, seed=92)


BAD = [
    (lambda: torch_npu.npu_fusion_attention_v2(*_qkv(), 2, "BNSD", pse=rnd(1, 2, 4, 4), pse_type=2),
     r"pse holds the ALiBi slopes, float32 of shape \[N\] or \[B, N\]"),
    (lambda: torch_npu.npu_fusion_attention_v2(*_qkv(), 2, "BNSD", pse_type=3), "pse_type 3 needs pse"),
    (lambda: torch_npu.npu_fusion_attention_v2(*_qkv(), 2, "BNSD", pse=torch.ones(2), pse_type=2, keep_prob=0.5),
     "pse_type 2 with dropout, sink or rope parts is not supported on vNPU"),
    (lambda: torch_npu.npu_fusion_attention_v2(*_qkv(), 2, "BNSD", pse_type=5), "pse_type should be 0, 1, 2 or 3"),
    (lambda: torch_npu.npu_fusion_attention_v2(*_qkv(), 2, "BNSD", keep_prob=0.5,
                                               dropout_mask=torch.zeros(16, dtype=torch.uint8)),
     "dropout_mask is not supported on vNPU"),
    (lambda: torch_npu.npu_fusion_attention_v3(*_qkv(), 2, "BNSD", softmax_layout="TND"),
     "softmax_layout='TND' is only supported with input_layout 'TND'"),
    (lambda: torch_npu.npu_fusion_attention_v3(*_qkv(), 2, "BNSD", softmax_layout="NTD"), "softmax_layout should be"),
    (lambda: torch_npu.npu_fusion_attention_v3(*_qkv(), 2, "BNSD", sink=torch.zeros(3)),
     r"sink should be a float32 tensor of shape \[2\]"),
    (lambda: torch_npu.npu_fusion_attention_v3(*_qkv(), 2, "BNSD", sink=torch.zeros(2, dtype=torch.float16)),
     "sink should be a float32 tensor"),
    (lambda: torch_npu.npu_fusion_attention_v2(*_qkv(), 2, "BNSD", query_rope=rnd(1, 2, 4, 2)),
     "query_rope and key_rope should be given together"),
    (lambda: torch_npu.npu_fusion_attention_v2(*_qkv(), 2, "BNSD", query_rope=rnd(1, 2, 3, 2),
                                               key_rope=rnd(1, 2, 4, 2)), "query_rope of shape"),
    (lambda: torch_npu.npu_fusion_attention_v3(*_qkv(), 2, "XYZ"), "input_layout should be one of"),
    (lambda: torch_npu.npu_fusion_attention_v3(*_qkv(), 2, "TND", actual_seq_qlen=torch.tensor([4.0]),
                                               actual_seq_kvlen=torch.tensor([4])),
     "actual_seq_qlen should be a 1-dimensional int64 tensor"),
    (lambda: torch_npu.npu_fusion_attention_v3(*_qkv(), 2, "TND", actual_seq_qlen=[4], actual_seq_kvlen=[4]),
     "Expected a value of type 'Optional\\[Tensor\\]' for argument 'actual_seq_qlen'"),
    (lambda: torch_npu.npu_fusion_attention_grad_v3(*_qkv(), rnd(1, 2, 4, 4), 2, "BNSD", keep_prob=0.5),
     "seed is required with keep_prob < 1"),
    (lambda: torch_npu.npu_fusion_attention_grad_v3(*_qkv(), rnd(1, 2, 4, 3), 2, "BNSD"),
     "dy of shape"),
    (lambda: torch.ops.npu._npu_fusion_attention_v3_get_max_workspace(*_qkv(), 2, "BNSD"),
     "only supports input_layout 'TND'"),
    (lambda: torch.ops.npu._npu_fusion_attention_v3_get_max_workspace(rnd(4, 2, 4), rnd(4, 2, 4), rnd(4, 2, 4), 2,
                                                                      "TND"),
     "requires actual_seq_qlen and actual_seq_kvlen"),
    (lambda: torch.ops.npu.npu_fusion_attention_v3.out(
        *_qkv(), 2, "BNSD", attention_score=torch.empty(0), softmax_max=torch.empty(0), softmax_sum=torch.empty(0),
        softmax_out=torch.empty(0), seed=torch.empty(0, dtype=torch.int64), offset=torch.empty(0, dtype=torch.int64)),
     "only supports input_layout 'TND'"),
]


@pytest.mark.parametrize("call, message", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_arguments(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_rope_with_tnd_sequences():
    cum = [4, 9]
    q, k, v = (rnd(9, 2, 8, seed=s) for s in (66, 67, 68))
    qr, kr = rnd(9, 2, 4, seed=69), rnd(9, 2, 4, seed=70)
    out = torch_npu.npu_fusion_attention_v2(q, k, v, 2, "TND", query_rope=qr, key_rope=kr, scale=0.3,
                                            actual_seq_qlen=cum, actual_seq_kvlen=cum)[0]
    assert out.shape == (9, 2, 8)
    for a, b in ((0, 4), (4, 9)):
        qs, ks = (torch.cat([t[a:b], r[a:b]], -1).transpose(0, 1).unsqueeze(0) for t, r in ((q, qr), (k, kr)))
        want = softmax_attention(qs, ks, v[a:b].transpose(0, 1).unsqueeze(0), 0.3)[0].transpose(0, 1)
        assert_close(out[a:b], want, **TOL)
