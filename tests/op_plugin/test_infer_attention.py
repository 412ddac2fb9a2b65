"""torch_npu.op_plugin.infer_attention: npu_attention_update against attention computed whole,
and npu_fused_infer_attention_score_v2 (layouts, GQA, TND varlen, paged caches, MLA rope,
sparse modes, sinks, the .out / workspace / infer_output overloads) against softmax attention
written head by head on cpu; argument errors; FakeTensor tracing."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen, rnd

COMPRESSED = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)
TOL = {torch.float16: dict(atol=3e-3, rtol=3e-3), torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
       torch.float32: dict(atol=1e-5, rtol=1e-5)}
LSE_TOL = dict(atol=1e-3, rtol=1e-3)


def reference(q, k, v, scale, masked=None, qr=None, kr=None, sink=None):
    """One sequence, head by head in float64: q (N, Sq, D), k (KV_N, Skv, D), v (KV_N, Skv, Dv),
    masked (Sq, Skv) with True = masked out. Returns out (N, Sq, Dv) and lse (N, Sq); a row
    with no key gives out 0 and lse -inf."""
    n, sq, kv_heads = q.shape[0], q.shape[1], k.shape[0]
    out = torch.zeros(n, sq, v.shape[-1], dtype=torch.float64)
    lse = torch.full((n, sq), float("-inf"), dtype=torch.float64)
    for h in range(n):
        g = h // (n // kv_heads)
        scores = q[h].double() @ k[g].double().T
        if qr is not None:
            scores = scores + qr[h].double() @ kr[g].double().T
        scores = scores * scale
        if masked is not None:
            scores = scores.masked_fill(masked, float("-inf"))
        for i in range(sq):
            row = scores[i]
            logits = row if sink is None else torch.cat([row, sink[h].double().view(1)])
            if torch.isinf(logits).all():
                continue
            top = logits.max()
            lse[h, i] = top + torch.log(torch.exp(logits - top).sum())
            out[h, i] = torch.exp(row - lse[h, i]) @ v[g].double()
    return out, lse


def bnsd_to(x, layout):
    """(B, N, S, D) as the layout stores it."""
    b, n, s, d = x.shape
    return {"BNSD": x, "BSND": x.transpose(1, 2), "BSH": x.transpose(1, 2).reshape(b, s, n * d),
            "NBSD": x.transpose(0, 1)}[layout].contiguous()


def qkv(b, n, kv_heads, sq, skv, d, dv, dtype, seed):
    return (rnd(b, n, sq, d, seed=seed).to(dtype), rnd(b, kv_heads, skv, d, seed=seed + 1).to(dtype),
            rnd(b, kv_heads, skv, dv, seed=seed + 2).to(dtype))


FIA = torch_npu.npu_fused_infer_attention_score_v2


# --- npu_attention_update --------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("sp", [1, 3])
@pytest.mark.parametrize("update_type", [0, 1])
def test_attention_update_equals_attention_over_all_keys(dtype, sp, update_type):
    # Attention of 6 query rows over 12 keys, computed whole, and in sp chunks of keys
    # whose (out, lse) are merged by the operator.
    q, k, v = rnd(6, 16, seed=1), rnd(12, 16, seed=2), rnd(12, 16, seed=3)
    whole, whole_lse = reference(q[None], k[None], v[None], 0.25)
    outs, lses = [], []
    for chunk_k, chunk_v in zip(k.chunk(sp), v.chunk(sp)):
        o, l = reference(q[None], chunk_k[None], chunk_v[None], 0.25)
        outs.append(o[0].to(dtype).npu())
        lses.append(l[0].float().npu())
    out, lse_out = torch_npu.npu_attention_update(lses, outs, update_type)
    assert out.dtype == dtype and out.shape == (6, 16) and out.device.type == "npu"
    assert_close(out.cpu().double(), whole[0], **TOL[dtype])
    if update_type == 1:
        assert lse_out.dtype == torch.float32 and lse_out.shape == (6,)
        assert_close(lse_out.cpu().double(), whole_lse[0], atol=1e-5, rtol=1e-5)
    else:
        assert lse_out is None


def test_attention_update_large_lse_stays_finite():
    lse = [torch.tensor([1000.0, -1000.0]).npu(), torch.tensor([1000.0, -999.0]).npu()]
    outs = [torch.ones(2, 8).npu(), torch.full((2, 8), 3.0).npu()]
    out, merged = torch_npu.npu_attention_update(lse, outs, 1)
    w = 1 / (1 + torch.exp(torch.tensor(1.0)))  # the first rank's weight in row 1
    want = torch.stack([torch.full((8,), 2.0), torch.full((8,), float(w + 3 * (1 - w)))])
    assert_close(out.cpu(), want, atol=5e-4, rtol=0)  # float32 differences of lse ~ 1000 keep ~1e-4
    assert torch.isfinite(merged.cpu()).all()


@pytest.mark.parametrize("lse,outs,update_type,match", [
    ([torch.zeros(4)], [torch.zeros(4, 8), torch.zeros(4, 8)], 0, "should have the same length"),
    ([torch.zeros(4)], [torch.zeros(4, 8)], 2, "update_type should be 0"),
    ([torch.zeros(4, dtype=torch.float16)], [torch.zeros(4, 8)], 0, r"lse\[0\] should be float32"),
    ([torch.zeros(5)], [torch.zeros(4, 8)], 0, r"lse\[0\] should have shape \[4\]"),
    ([torch.zeros(4)], [torch.zeros(4, 12)], 0, "head_dim .* should be a multiple of 8"),
    ([torch.zeros(4)], [torch.zeros(4, 2, 8)], 0, r"local_out\[0\] should be 2-D"),
    ([torch.zeros(4)] * 2, [torch.zeros(4, 8), torch.zeros(4, 8).half()], 0, r"local_out\[1\] should be"),
    ([torch.zeros(4)] * 17, [torch.zeros(4, 8)] * 17, 0, r"SP degree .* should be in \[1, 16\]"),
])
def test_attention_update_bad_input(lse, outs, update_type, match):
    with pytest.raises(RuntimeError, match=match):
        torch_npu.npu_attention_update([t.npu() for t in lse], [t.npu() for t in outs], update_type)


# --- npu_fused_infer_attention_score_v2: batched layouts --------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["BSH", "BSND", "BNSD", "BNSD_BSND", "BSH_BNSD", "BSND_BNSD", "BSH_NBSD",
                                    "BSND_NBSD", "BNSD_NBSD"])
def test_fia_v2_layouts_gqa_and_lse(dtype, layout):
    b, n, kv_heads, sq, skv, d = 2, 4, 2, 5, 7, 16
    q, k, v = qkv(b, n, kv_heads, sq, skv, d, d, dtype, seed=10)
    in_layout, _, out_layout = layout.partition("_")
    out_layout = out_layout or in_layout
    out, lse = FIA(*(bnsd_to(t, in_layout).npu() for t in (q, k, v)), num_query_heads=n,
                   num_key_value_heads=kv_heads, softmax_scale=0.3, input_layout=layout, return_softmax_lse=True)
    want = [reference(q[i], k[i], v[i], 0.3) for i in range(b)]
    want_out = torch.stack([w[0] for w in want])
    assert out.dtype == dtype and out.device.type == "npu"
    assert_close(out.cpu().double(), bnsd_to(want_out, out_layout), **TOL[dtype])
    assert lse.shape == (b, n, sq, 1) and lse.dtype == torch.float32
    assert_close(lse.cpu().double()[..., 0], torch.stack([w[1] for w in want]), **LSE_TOL)
    shapes = torch_npu._npu_fused_infer_attention_score_v2_infer_output(
        bnsd_to(q, in_layout).npu(), bnsd_to(v, in_layout).npu(), input_layout=layout, num_query_heads=n,
        num_key_value_heads=kv_heads, return_softmax_lse=True)
    assert shapes[0].shape == out.shape and shapes[0].dtype == dtype and shapes[1].shape == lse.shape


def test_fia_v2_nsd_and_value_head_dim():
    q, k, v = qkv(1, 2, 2, 3, 6, 16, 8, torch.float16, seed=20)  # value's head dim differs from key's
    out, lse = FIA(q[0].npu(), k[0].npu(), v[0].npu(), num_query_heads=2, softmax_scale=0.5, input_layout="NSD")
    assert out.shape == (2, 3, 8) and lse.shape == (0,) and lse.dtype == torch.float32
    assert_close(out.cpu().double(), reference(q[0], k[0], v[0], 0.5)[0], **TOL[torch.float16])


# --- sparse modes, masks, actual lengths --------------------------------------------

def band(sq, skv, shift, pre, nxt):
    """True where key j is outside [i + shift - pre, i + shift + nxt]."""
    return torch.tensor([[not (i + shift - pre <= j <= i + shift + nxt) for j in range(skv)] for i in range(sq)])


@pytest.mark.parametrize("case", ["mode0_mask_and_band", "mode1_3d_mask", "mode2", "mode3", "mode4",
                                  "mode0_without_mask_ignores_band", "fully_masked_row"])
def test_fia_v2_sparse_modes(case):
    b, n, sq, skv = 2, 2, 6, 9
    q, k, v = qkv(b, n, n, sq, skv, 16, 16, torch.float16, seed=30)
    user = torch.rand(b, 1, sq, skv, generator=gen(31)) > 0.7
    user[..., 0] = False
    kwargs, masked = {}, [None] * b
    if case == "mode0_mask_and_band":
        kwargs = dict(sparse_mode=0, atten_mask=user.npu(), pre_tokens=2, next_tokens=1)
        masked = [user[i, 0] | band(sq, skv, 0, 2, 1) for i in range(b)]
    elif case == "mode1_3d_mask":
        kwargs = dict(sparse_mode=1, atten_mask=user[:1, 0].to(torch.uint8).npu(), pre_tokens=0, next_tokens=0)
        masked = [user[0, 0]] * b  # pre/next_tokens ignored
    elif case == "mode2":
        kwargs = dict(sparse_mode=2, atten_mask=COMPRESSED.npu())
        masked = [band(sq, skv, 0, 10**9, 0)] * b
    elif case == "mode3":
        kwargs = dict(sparse_mode=3, atten_mask=COMPRESSED[None, None].npu())
        masked = [band(sq, skv, skv - sq, 10**9, 0)] * b
    elif case == "mode4":
        kwargs = dict(sparse_mode=4, atten_mask=COMPRESSED.npu(), pre_tokens=2, next_tokens=1)
        masked = [band(sq, skv, skv - sq, 2, 1)] * b
    elif case == "mode0_without_mask_ignores_band":
        kwargs = dict(sparse_mode=0, pre_tokens=0, next_tokens=0)
    elif case == "fully_masked_row":
        full = user.clone()
        full[1, 0, 2] = True  # batch 1, query row 2 sees no key
        kwargs = dict(sparse_mode=0, atten_mask=full.npu())
        masked = [full[i, 0] for i in range(b)]
    out, lse = FIA(q.npu(), k.npu(), v.npu(), num_query_heads=n, softmax_scale=0.25, input_layout="BNSD",
                   return_softmax_lse=True, **kwargs)
    for i in range(b):
        want_out, want_lse = reference(q[i], k[i], v[i], 0.25, masked[i])
        assert_close(out[i].cpu().double(), want_out, **TOL[torch.float16])
        assert_close(lse[i, ..., 0].cpu().double(), want_lse, **LSE_TOL)
    if case == "fully_masked_row":
        assert torch.count_nonzero(out[1, :, 2].cpu()) == 0 and torch.isneginf(lse[1, :, 2].cpu()).all()


def test_fia_v2_actual_lengths_and_one_query_token():
    b, n, s, d = 2, 2, 6, 16
    q, k, v = qkv(b, n, n, s, s, d, d, torch.bfloat16, seed=40)
    out = FIA(bnsd_to(q, "BSH").npu(), bnsd_to(k, "BSH").npu(), bnsd_to(v, "BSH").npu(), num_query_heads=n,
              softmax_scale=0.3, actual_seq_qlen=[6, 3], actual_seq_kvlen=[4, 6])[0]
    got = out.cpu().view(b, s, n, d).transpose(1, 2).double()
    assert_close(got[0], reference(q[0], k[0, :, :4], v[0, :, :4], 0.3)[0], **TOL[torch.bfloat16])
    assert_close(got[1, :, :3], reference(q[1, :, :3], k[1], v[1], 0.3)[0], **TOL[torch.bfloat16])
    assert torch.count_nonzero(got[1, :, 3:]) == 0  # rows past actual_seq_qlen
    # One query token: a (B, KV_S) mask applies; sparse_mode and pre/next_tokens do not.
    q1 = q[:, :, :1]
    mask = torch.tensor([[0, 1, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0]], dtype=torch.int8)
    out1 = FIA(q1.npu(), k.npu(), v.npu(), num_query_heads=n, softmax_scale=0.3, input_layout="BNSD",
               atten_mask=mask.npu(), actual_seq_kvlen=[5], pre_tokens=0, next_tokens=0)[0]
    for i in range(b):
        want = reference(q1[i], k[i, :, :5], v[i, :, :5], 0.3, mask[i:i + 1, :5].bool())[0]
        assert_close(out1[i].cpu().double(), want, **TOL[torch.bfloat16])
    causal = FIA(q1.npu(), k.npu(), v.npu(), num_query_heads=n, input_layout="BNSD", sparse_mode=2,
                 atten_mask=COMPRESSED.npu())[0]
    plain = FIA(q1.npu(), k.npu(), v.npu(), num_query_heads=n, input_layout="BNSD")[0]
    assert torch.equal(causal.cpu(), plain.cpu())


# --- TND varlen, paged caches, sinks, MLA ----------------------------------------------

def tnd_case(q_lens, kv_lens, n, kv_heads, d, dtype, seed):
    qs = [rnd(n, s, d, seed=seed + 3 * i).to(dtype) for i, s in enumerate(q_lens)]
    ks = [rnd(kv_heads, s, d, seed=seed + 3 * i + 1).to(dtype) for i, s in enumerate(kv_lens)]
    vs = [rnd(kv_heads, s, d, seed=seed + 3 * i + 2).to(dtype) for i, s in enumerate(kv_lens)]
    return qs, ks, vs


def cumsum(lengths):
    total, out = 0, []
    for x in lengths:
        total += x
        out.append(total)
    return out


@pytest.mark.parametrize("layout", ["TND", "TND_NTD", "NTD_TND", "NTD"])
def test_fia_v2_tnd_varlen_right_down_causal(layout):
    q_lens, kv_lens, n, kv_heads, d = [3, 1, 4], [5, 2, 4], 4, 2, 16
    qs, ks, vs = tnd_case(q_lens, kv_lens, n, kv_heads, d, torch.float16, seed=50)
    in_layout, _, out_layout = layout.partition("_")
    out_layout = out_layout or in_layout

    def flat(parts):
        t = torch.cat([p.transpose(0, 1) for p in parts])  # TND
        return (t if in_layout == "TND" else t.transpose(0, 1).contiguous()).npu()

    out, lse = FIA(flat(qs), flat(ks), flat(vs), num_query_heads=n, num_key_value_heads=kv_heads,
                   softmax_scale=0.3, input_layout=layout, sparse_mode=3, atten_mask=COMPRESSED.npu(),
                   actual_seq_qlen=cumsum(q_lens), actual_seq_kvlen=cumsum(kv_lens), return_softmax_lse=True)
    want = [reference(qs[i], ks[i], vs[i], 0.3, band(q_lens[i], kv_lens[i], kv_lens[i] - q_lens[i], 10**9, 0))
            for i in range(3)]
    want_out = torch.cat([w[0].transpose(0, 1) for w in want])  # TND
    got = out.cpu().double() if out_layout == "TND" else out.cpu().double().transpose(0, 1)
    assert got.shape == (8, n, d)
    assert_close(got, want_out, **TOL[torch.float16])
    assert lse.shape == (8, n, 1)
    assert_close(lse.cpu().double()[..., 0], torch.cat([w[1].transpose(0, 1) for w in want]), **LSE_TOL)


def paged(seqs, block_size, blocks, order, four_d):
    """Sequences (KV_N, S, D) scattered into a cache of `blocks` blocks; sequence b's j-th
    block is cache block order[b][j]. Returns (cache, block_table)."""
    kv_heads, d = seqs[0].shape[0], seqs[0].shape[2]
    cache = torch.zeros(blocks, kv_heads, block_size, d, dtype=seqs[0].dtype)
    for s, blk in zip(seqs, order):
        for j, c in enumerate(blk):
            part = s[:, j * block_size:(j + 1) * block_size]
            cache[c, :, :part.shape[1]] = part
    width = max(len(o) for o in order)
    table = torch.tensor([o + [0] * (width - len(o)) for o in order], dtype=torch.int32)
    if not four_d:
        cache = cache.transpose(1, 2).reshape(blocks, block_size, kv_heads * d)
    return cache, table


@pytest.mark.parametrize("sinks", [False, True])
def test_fia_v2_tnd_paged_sliding_window(sinks):
    # vllm-ascend's GQA path: TND query, (blocks, block_size, H) cache, per-sequence kv lengths,
    # sparse_mode 4 with pre_tokens = the window, next_tokens 0, gpt-oss's learnable sinks.
    q_lens, kv_lens, n, kv_heads, d, bs, window = [3, 1], [7, 10], 4, 2, 16, 4, 3
    qs, ks, vs = tnd_case(q_lens, kv_lens, n, kv_heads, d, torch.bfloat16, seed=60)
    order = [[5, 1], [0, 3, 4]]
    kc, table = paged(ks, bs, 6, order, four_d=False)
    vc, _ = paged(vs, bs, 6, order, four_d=False)
    sink = rnd(n, seed=65).bfloat16() if sinks else None
    out, lse = FIA(torch.cat([t.transpose(0, 1) for t in qs]).npu(), kc.npu(), vc.npu(),
                   block_table=table.npu(), block_size=bs, num_query_heads=n, num_key_value_heads=kv_heads,
                   input_layout="TND", sparse_mode=4, atten_mask=COMPRESSED.npu(), pre_tokens=window,
                   next_tokens=0, softmax_scale=0.3, actual_seq_qlen=cumsum(q_lens), actual_seq_kvlen=kv_lens,
                   learnable_sink=None if sink is None else sink.npu(), return_softmax_lse=True)
    start = 0
    for i in range(2):
        masked = band(q_lens[i], kv_lens[i], kv_lens[i] - q_lens[i], window, 0)
        want_out, want_lse = reference(qs[i], ks[i], vs[i], 0.3, masked, sink=sink)
        got = out[start:start + q_lens[i]].cpu().double().transpose(0, 1)
        assert_close(got, want_out, **TOL[torch.bfloat16])
        assert_close(lse[start:start + q_lens[i], :, 0].cpu().double().T, want_lse, **LSE_TOL)
        start += q_lens[i]
    if sinks:  # the sink takes probability mass: the output differs from the sink-less one
        plain = FIA(torch.cat([t.transpose(0, 1) for t in qs]).npu(), kc.npu(), vc.npu(),
                    block_table=table.npu(), block_size=bs, num_query_heads=n, num_key_value_heads=kv_heads,
                    input_layout="TND", sparse_mode=4, atten_mask=COMPRESSED.npu(), pre_tokens=window,
                    next_tokens=0, softmax_scale=0.3, actual_seq_qlen=cumsum(q_lens), actual_seq_kvlen=kv_lens)[0]
        assert not torch.allclose(plain.cpu().float(), out.cpu().float(), atol=1e-2)


def test_fia_v2_bnsd_prefill_on_head_major_paged_cache():
    # (blocks, KV_N, block_size, D) cache with two key/value heads, query BNSD with Q_S > 1.
    kv_lens, n, kv_heads, d, bs = [5, 8], 4, 2, 16, 4
    q = rnd(2, n, 3, d, seed=90).half()
    ks = [rnd(kv_heads, s, d, seed=91 + i).half() for i, s in enumerate(kv_lens)]
    vs = [rnd(kv_heads, s, d, seed=93 + i).half() for i, s in enumerate(kv_lens)]
    order = [[3, 1], [0, 2]]
    kc, table = paged(ks, bs, 4, order, four_d=True)
    vc, _ = paged(vs, bs, 4, order, four_d=True)
    out, _ = FIA(q.npu(), kc.npu(), vc.npu(), block_table=table.npu(), block_size=bs, num_query_heads=n,
                 num_key_value_heads=kv_heads, input_layout="BNSD", softmax_scale=0.3, actual_seq_kvlen=kv_lens,
                 sparse_mode=3, atten_mask=COMPRESSED.npu())
    for i in range(2):
        masked = band(3, kv_lens[i], kv_lens[i] - 3, 10**9, 0)
        assert_close(out[i].cpu().double(), reference(q[i], ks[i], vs[i], 0.3, masked)[0], **TOL[torch.float16])


def test_fia_v2_mla_decode_paged_rope():
    # vllm-ascend's MLA decode: q_nope (T, N, 1, L) in BNSD_NBSD, the latent cache as both key
    # and value (blocks, 1, block_size, L), rope parts added to the scores.
    tokens, n, latent, rope, bs = 3, 4, 32, 8, 4
    kv_lens = [6, 3, 9]
    q = rnd(tokens, n, 1, latent, seed=70).half()
    qr = rnd(tokens, n, 1, rope, seed=71).half()
    lat = [rnd(1, s, latent, seed=72 + i).half() for i, s in enumerate(kv_lens)]
    pe = [rnd(1, s, rope, seed=76 + i).half() for i, s in enumerate(kv_lens)]
    order = [[2, 0], [4], [1, 3, 5]]
    kc, table = paged(lat, bs, 6, order, four_d=True)
    kr, _ = paged(pe, bs, 6, order, four_d=True)
    out, _ = FIA(q.npu(), kc.npu(), kc.npu(), query_rope=qr.npu(), key_rope=kr.npu(), block_table=table.npu(),
                 block_size=bs, num_query_heads=n, num_key_value_heads=1, input_layout="BNSD_NBSD",
                 softmax_scale=0.2, actual_seq_kvlen=kv_lens)
    assert out.shape == (n, tokens, 1, latent)
    for i in range(tokens):
        want = reference(q[i], lat[i], lat[i], 0.2, qr=qr[i], kr=pe[i])[0]
        assert_close(out[:, i].cpu().double(), want, **TOL[torch.float16])
    no_rope, _ = reference(q[0], lat[0], lat[0], 0.2)
    assert not torch.allclose(out[:, 0].cpu().double(), no_rope, atol=1e-2)


# --- .out, workspace, infer_output ---------------------------------------------------------

def test_fia_v2_out_overload_and_workspace():
    q, k, v = (bnsd_to(t, "BSH").npu() for t in qkv(2, 4, 4, 3, 5, 16, 16, torch.bfloat16, seed=80))
    kwargs = dict(num_query_heads=4, softmax_scale=0.25, input_layout="BSH")
    want, _ = FIA(q, k, v, **kwargs)
    workspace = torch_npu._npu_fused_infer_attention_score_v2_get_max_workspace(q, k, v, **kwargs)
    assert workspace.device == q.device and workspace.dtype == q.dtype
    attention_out = torch.empty_like(want)
    placeholder = torch.full((1,), 7.0, dtype=q.dtype, device="npu")  # vllm-ascend's softmax_lse stand-in
    got = FIA.out(q, k, v, workspace=workspace, attention_out=attention_out, softmax_lse=placeholder, **kwargs)
    assert got[0] is attention_out and got[1] is placeholder
    assert torch.equal(attention_out.cpu(), want.cpu()) and placeholder.item() == 7.0
    lse = torch.empty(0, device="npu")
    FIA.out(q, k, v, attention_out=attention_out, softmax_lse=lse, return_softmax_lse=True, **kwargs)
    assert lse.shape == (2, 4, 3, 1)
    assert_close(lse.cpu(), FIA(q, k, v, return_softmax_lse=True, **kwargs)[1].cpu())
    with pytest.raises(RuntimeError, match="attention_out should have dtype torch.bfloat16"):
        FIA.out(q, k, v, attention_out=torch.empty_like(want, dtype=torch.float16), softmax_lse=lse, **kwargs)
    with pytest.raises(RuntimeError, match=r"attention_out should have shape \[2, 3, 64\]"):
        FIA.out(q, k, v, attention_out=torch.empty(2, 3, 32, dtype=q.dtype, device="npu"), softmax_lse=lse,
                **kwargs)
    with pytest.raises(RuntimeError, match="pse_shift is not supported on vNPU"):
        torch_npu._npu_fused_infer_attention_score_v2_get_max_workspace(q, k, v, pse_shift=q, **kwargs)


def test_fia_v2_infer_output_tnd_and_paged():
    q = torch.empty(7, 4, 32, dtype=torch.float16, device="npu")
    cache = torch.empty(5, 16, 2 * 16, dtype=torch.float16, device="npu")
    out, lse = torch_npu._npu_fused_infer_attention_score_v2_infer_output(
        q, cache, input_layout="TND_NTD", block_table=torch.zeros(2, 3, dtype=torch.int32, device="npu"),
        num_query_heads=4, num_key_value_heads=2, return_softmax_lse=True)
    assert out.shape == (4, 7, 16) and lse.shape == (7, 4, 1) and lse.dtype == torch.float32
    out, lse = torch_npu._npu_fused_infer_attention_score_v2_infer_output(q, q, input_layout="TND",
                                                                           num_query_heads=4)
    assert out.shape == (7, 4, 32) and lse.shape == (0,)


# --- argument errors ---------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    (dict(input_layout="SBH"), "input_layout should be one of"),
    (dict(query=torch.zeros(2, 3, 64)), "query should be float16 or bfloat16, but got torch.float32"),
    (dict(key=torch.zeros(2, 5, 64, dtype=torch.int8)), "key dtype torch.int8 should be query's dtype"),
    (dict(dequant_scale_key=torch.zeros(1)), r"\['dequant_scale_key'\] \(quantised attention\) is not supported"),
    (dict(quant_scale_out=torch.zeros(1)), "quant_scale_out.*is not supported on vNPU"),
    (dict(out_dtype=1), r"\['out_dtype'\] is not supported on vNPU"),
    (dict(key_quant_mode=1), "quant_mode .* which is not supported on vNPU"),
    (dict(pse_shift=torch.zeros(1, 4, 3, 5)), "pse_shift is not supported on vNPU"),
    (dict(sparse_mode=9), "sparse_mode=9 is not supported on vNPU"),
    (dict(sparse_mode=5), "sparse_mode should be one of 0, 1, 2, 3, 4, 9"),
    (dict(sparse_mode=3), "sparse_mode 3 needs the compressed atten_mask"),
    (dict(sparse_mode=1), "sparse_mode 1 \\(allMask\\) needs atten_mask"),
    (dict(atten_mask=torch.zeros(3, 5)), "atten_mask should be bool, int8 or uint8"),
    (dict(atten_mask=torch.zeros(2, 2, 3, 5, dtype=torch.bool)), r"4-D atten_mask should be \(B or 1, 1, Q_S"),
    (dict(atten_mask=torch.zeros(3, 4, dtype=torch.bool)), "smaller than the attention"),
    (dict(inner_precise=4), "inner_precise should be 0, 1, 2 or 3"),
    (dict(num_query_heads=5), "hidden size 64 of query is not a multiple of its head count 5"),
    (dict(num_query_heads=4, num_key_value_heads=3), "hidden size 64 of key is not a multiple of its head count 3"),
    (dict(query_rope=torch.zeros(2, 3, 16, dtype=torch.float16)), "query_rope and key_rope should be given together"),
    (dict(learnable_sink=torch.zeros(4)), "learnable_sink needs input_layout 'TND' or 'NTD_TND'"),
    (dict(actual_seq_kvlen=[5, 6]), r"actual_seq_kvlen \[5, 6\] should be in \[0, 5\]"),
    (dict(actual_seq_qlen=[9]), r"actual_seq_qlen \[9, 9\] should be in \[0, 3\]"),
    (dict(block_table=torch.zeros(2, 2, dtype=torch.int32)), r"block_size 0 should be the cache's block size 5"),
    (dict(key=torch.zeros(3, 2, 5, 64, dtype=torch.float16), value=torch.zeros(3, 2, 5, 64, dtype=torch.float16),
          block_table=torch.zeros(2, 2, dtype=torch.int32), block_size=5, actual_seq_kvlen=[5]),
     r"with input_layout 'BSH' the paged cache should be \(blocks, block_size, H\)"),
    (dict(block_table=torch.zeros(2, 2, dtype=torch.int32), block_size=5), "a paged cache .* needs actual_seq_kvlen"),
])
def test_fia_v2_bad_input(kwargs, match):
    args = dict(query=torch.zeros(2, 3, 64, dtype=torch.float16), key=torch.zeros(2, 5, 64, dtype=torch.float16),
                value=torch.zeros(2, 5, 64, dtype=torch.float16), num_query_heads=4)
    args.update(kwargs)
    args = {n: (v.npu() if isinstance(v, torch.Tensor) else v) for n, v in args.items()}
    with pytest.raises(RuntimeError, match=match):
        FIA(args.pop("query"), args.pop("key"), args.pop("value"), **args)


def test_fia_v2_tnd_bad_input():
    q = torch.zeros(6, 4, 16, dtype=torch.float16, device="npu")
    with pytest.raises(RuntimeError, match="input_layout TND / NTD needs actual_seq_qlen"):
        FIA(q, q, q, num_query_heads=4, input_layout="TND")
    with pytest.raises(RuntimeError, match="non-decreasing cumulative lengths ending at most at 6"):
        FIA(q, q, q, num_query_heads=4, input_layout="TND", actual_seq_qlen=[4, 2], actual_seq_kvlen=[4, 6])
    with pytest.raises(RuntimeError, match="actual_seq_kvlen has 1 entries but actual_seq_qlen has 2"):
        FIA(q, q, q, num_query_heads=4, input_layout="TND", actual_seq_qlen=[2, 6], actual_seq_kvlen=[6])
    with pytest.raises(RuntimeError, match="explicit atten_mask with sparse_mode 0 is not supported for TND"):
        FIA(q, q, q, num_query_heads=4, input_layout="TND", actual_seq_qlen=[6], actual_seq_kvlen=[6],
            atten_mask=torch.zeros(6, 6, dtype=torch.bool, device="npu"))
    with pytest.raises(RuntimeError, match=r"num_query_heads 2 does not match query's head count 4"):
        FIA(q, q, q, num_query_heads=2, input_layout="TND", actual_seq_qlen=[6], actual_seq_kvlen=[6])
    with pytest.raises(RuntimeError, match=r"learnable_sink should be a floating tensor of shape \[4\]"):
        FIA(q, q, q, num_query_heads=4, input_layout="TND", actual_seq_qlen=[6], actual_seq_kvlen=[6],
            learnable_sink=torch.zeros(2, device="npu"))


# --- tracing -------------------------------------------------------------------------------

def test_fia_v2_and_update_trace_under_fake_tensors():
    with FakeTensorMode():
        q = torch.empty(5, 8, 64, dtype=torch.bfloat16)
        cache = torch.empty(10, 16, 2 * 64, dtype=torch.bfloat16)
        table = torch.zeros(2, 4, dtype=torch.int32)
        out, lse = torch.ops.npu.npu_fused_infer_attention_score_v2(
            q, cache, cache, block_table=table, block_size=16, num_query_heads=8, num_key_value_heads=2,
            input_layout="TND", sparse_mode=3, atten_mask=torch.empty(2048, 2048, dtype=torch.bool),
            actual_seq_qlen=[2, 5], actual_seq_kvlen=[20, 33], softmax_scale=0.125, return_softmax_lse=True)
        assert out.shape == (5, 8, 64) and out.dtype == torch.bfloat16 and lse.shape == (5, 8, 1)
        merged, merged_lse = torch.ops.npu.npu_attention_update([torch.empty(40)] * 2,
                                                                [torch.empty(40, 64, dtype=torch.float16)] * 2, 1)
        assert merged.shape == (40, 64) and merged.dtype == torch.float16 and merged_lse.shape == (40,)
