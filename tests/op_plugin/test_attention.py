"""torch_npu.op_plugin.attention: npu_fusion_attention (layouts, GQA, sparse modes, masks,
dropout, its grad, memory, FakeTensor tracing, bad input) and the inference attentions,
each against softmax attention on cpu."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import DEVICES, rnd


COMPRESSED = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)


def reference_attention(q, k, v, masked=None, scale=None, pse=None):
    """softmax(scale * (pse + q k^T), masked) v on BNSD tensors, GQA by repetition."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q.float() @ k.float().transpose(-1, -2)
    if pse is not None:
        s = s + pse.float()
    s = s * (scale if scale is not None else 1.0)
    if masked is not None:
        s = s.masked_fill(masked, float("-inf"))
    return (torch.softmax(s, -1) @ v.float()).to(q.dtype)


def to_layout(x, layout):  # x is BNSD
    b, n, s, d = x.shape
    return {"BNSD": x, "BSND": x.transpose(1, 2), "BSH": x.transpose(1, 2).reshape(b, s, n * d),
            "SBH": x.permute(2, 0, 1, 3).reshape(s, b, n * d)}[layout].contiguous()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["BSH", "SBH", "BSND", "BNSD"])
def test_fusion_attention_layouts_and_gqa(device, layout):
    b, n, nkv, s, d = 2, 4, 2, 24, 8
    q, k, v = rnd(b, n, s, d, seed=1), rnd(b, nkv, s, d, seed=2), rnd(b, nkv, s, d, seed=3)
    scale = 1 / math.sqrt(d)
    args = [to_layout(t, layout).to(device).requires_grad_() for t in (q, k, v)]
    out = torch_npu.npu_fusion_attention(*args, n, layout, scale=scale)
    assert len(out) == 7 and out[4:] == (0, 0, 0)
    assert out[1].shape == (b, n, s, 8) and out[1].dtype == torch.float32
    ref_in = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = to_layout(reference_attention(*ref_in, scale=scale), layout)
    assert out[0].device.type == device
    assert_close(out[0].cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    g = rnd(*ref.shape, seed=4)
    got = torch.autograd.grad(out[0], args, g.to(device))
    want = torch.autograd.grad(ref, ref_in, g)
    for a, w in zip(got, want):
        assert_close(a.cpu(), to_layout(w, layout), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("layout", ["BSH", "SBH", "BSND", "BNSD"])
@pytest.mark.parametrize("d_v", [6, 12])
def test_fusion_attention_value_head_dim_may_differ(layout, d_v):
    # MLA (DeepSeek, MindSpeed's ring attention): q/k heads of 192, v heads of 128.
    b, n, nkv, s, d = 2, 4, 2, 16, 8
    q, k, v = rnd(b, n, s, d, seed=5), rnd(b, nkv, s, d, seed=6), rnd(b, nkv, s, d_v, seed=7)
    scale = 1 / math.sqrt(d)
    args = [to_layout(t, layout).npu().requires_grad_() for t in (q, k, v)]
    out = torch_npu.npu_fusion_attention(*args, n, layout, atten_mask=COMPRESSED.npu(), sparse_mode=3,
                                         scale=scale)
    ref_in = [t.clone().requires_grad_() for t in (q, k, v)]
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)
    ref = to_layout(reference_attention(*ref_in, masked=causal, scale=scale), layout)
    assert out[0].shape == ref.shape
    assert_close(out[0].cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    g = rnd(*ref.shape, seed=8)
    want = torch.autograd.grad(ref, ref_in, g)
    got = torch.autograd.grad(out[0], args, g.npu())
    grad_op = torch_npu.npu_fusion_attention_grad(*args, g.npu(), n, layout, atten_mask=COMPRESSED.npu(),
                                                  sparse_mode=3, scale_value=scale)
    for a, c, w in zip(got, grad_op[:3], want):
        assert_close(a.cpu(), to_layout(w, layout), atol=1e-5, rtol=1e-4)
        assert_close(c.cpu(), to_layout(w, layout), atol=1e-5, rtol=1e-4)
    with pytest.raises(RuntimeError, match="dy of shape .* attention output's shape"):
        torch_npu.npu_fusion_attention_grad(*args, args[0], n, layout, scale_value=scale)
    if layout in ("BSH", "SBH"):
        bad_v = to_layout(rnd(b, 1, s, 3 * nkv, seed=9), layout)[..., :-1].contiguous().npu()
        with pytest.raises(RuntimeError, match="value is not a multiple of key's head count 2"):
            torch_npu.npu_fusion_attention(args[0], args[1], bad_v, n, layout, scale=scale)


@pytest.mark.parametrize("sparse_mode,sq,skv", [(2, 16, 16), (3, 16, 16), (2, 8, 16), (3, 8, 16), (4, 16, 16)])
def test_fusion_attention_sparse_modes(sparse_mode, sq, skv):
    q, k, v = rnd(1, 2, sq, 8, seed=5), rnd(1, 2, skv, 8, seed=6), rnd(1, 2, skv, 8, seed=7)
    i, j = torch.arange(sq).unsqueeze(1), torch.arange(skv).unsqueeze(0)
    pre, nxt = 3, 1
    masked = {2: j > i, 3: j > i + (skv - sq),
              4: (j - i - (skv - sq) > nxt) | (j - i - (skv - sq) < -pre)}[sparse_mode]
    out = torch_npu.npu_fusion_attention(*(t.npu() for t in (q, k, v)), 2, "BNSD", atten_mask=COMPRESSED.npu(),
                                         scale=0.5, sparse_mode=sparse_mode, pre_tockens=pre, next_tockens=nxt)[0]
    assert_close(out.cpu(), reference_attention(q, k, v, masked, 0.5), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mask_shape", [(16, 16), (1, 1, 16, 16), (2, 1, 16, 16), (2, 3, 16, 16)])
def test_fusion_attention_explicit_mask_true_is_masked(mask_shape):
    q, k, v = (rnd(2, 3, 16, 8, seed=s) for s in (8, 9, 10))
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(11)) > 0.7
    mask[..., 0] = False  # no fully masked row
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 3, "BNSD", atten_mask=mask.npu())[0]
    assert_close(out.cpu(), reference_attention(q, k, v, mask.expand(2, 3, 16, 16)), atol=1e-5, rtol=1e-5)


def test_fusion_attention_pse_is_added_before_scaling():
    q, k, v = (rnd(1, 2, 8, 4, seed=s) for s in (12, 13, 14))
    pse = rnd(1, 2, 8, 8, seed=15)
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "BNSD", pse=pse.npu(), scale=0.3)[0]
    assert_close(out.cpu(), reference_attention(q, k, v, None, 0.3, pse), atol=1e-5, rtol=1e-5)


def test_fusion_attention_tnd_equals_each_sequence():
    lengths = [5, 3, 8]
    cum = [5, 8, 16]
    q, k, v = (rnd(16, 2, 8, seed=s) for s in (16, 17, 18))
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "TND", atten_mask=COMPRESSED.npu(),
                                         sparse_mode=3, actual_seq_qlen=cum, actual_seq_kvlen=cum, scale=0.25)
    assert out[1].shape == (16, 2, 8)
    start = 0
    for n in lengths:
        qs, ks, vs = (t[start:start + n].transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        causal = torch.ones(n, n, dtype=torch.bool).triu(1)
        want = reference_attention(qs, ks, vs, causal, 0.25)[0].transpose(0, 1)
        assert_close(out[0][start:start + n].cpu(), want, atol=1e-5, rtol=1e-5)
        start += n


def test_fusion_attention_tnd_mask_is_each_sequence_s_corner():
    # sparse_mode 0 with input_layout TND: atten_mask is [maxSq, maxSkv], and each sequence takes its
    # top-left [Sq, Skv] corner (it was ignored before).
    cum = [5, 8]
    q, k, v = (rnd(8, 2, 4, seed=s) for s in (31, 32, 33))
    mask = torch.rand(5, 5, generator=torch.Generator().manual_seed(0)) > 0.6
    mask[:, 0] = False
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "TND", atten_mask=mask.npu(), scale=0.5,
                                         actual_seq_qlen=cum, actual_seq_kvlen=cum)[0]
    for lo, hi in ((0, 5), (5, 8)):
        qs, ks, vs = (t[lo:hi].transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        want = reference_attention(qs, ks, vs, mask[:hi - lo, :hi - lo], 0.5)[0].transpose(0, 1)
        assert_close(out[lo:hi].cpu(), want, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="smaller than a sequence's"):
        torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "TND", atten_mask=mask[:4].npu(),
                                       actual_seq_qlen=cum, actual_seq_kvlen=cum)


@pytest.mark.parametrize("sparse_mode", [0, 2, 3, 4])
def test_fusion_attention_without_mask_attends_every_key(sparse_mode):
    # torch_npu: without atten_mask, sparse_mode and pre/next_tockens do not apply. MindSpeed's ring
    # attention passes pre = next = Skv for its unmasked 2s x s blocks, which as a band would mask the
    # lower rows' first keys.
    q, k, v = rnd(1, 2, 8, 4, seed=41), rnd(1, 2, 4, 4, seed=42), rnd(1, 2, 4, 4, seed=43)
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "BNSD", scale=0.5, pre_tockens=4,
                                         next_tockens=4, sparse_mode=sparse_mode)[0]
    assert_close(out.cpu(), reference_attention(q, k, v, None, 0.5), atol=1e-5, rtol=1e-5)


def test_fusion_attention_dropout_reproducible_from_seed():
    q, k, v = (rnd(1, 2, 32, 8, seed=s).npu().requires_grad_() for s in (19, 20, 21))
    out = torch_npu.npu_fusion_attention(q, k, v, 2, "BNSD", keep_prob=0.7, scale=0.3)
    y, seed, offset, numels = out[0], out[4], out[5], out[6]
    assert numels == 2 * 32 * 32
    no_drop = torch_npu.npu_fusion_attention(q, k, v, 2, "BNSD", scale=0.3)[0]
    assert not torch.allclose(y, no_drop)
    g = torch.randn_like(y)
    autograd = torch.autograd.grad(y, (q, k, v), g)
    explicit = torch_npu.npu_fusion_attention_grad(q, k, v, g, 2, "BNSD", keep_prob=0.7, scale_value=0.3,
                                                   seed=seed, offset=offset, numels=numels,
                                                   softmax_max=out[1], softmax_sum=out[2], attention_in=y)
    for a, b in zip(autograd, explicit[:3]):
        assert_close(a.cpu(), b.cpu(), atol=1e-5, rtol=1e-5)


def test_fusion_attention_softmax_layout_and_seed():
    cum = [5, 8]
    q, k, v = (rnd(8, 2, 4, seed=s).npu() for s in (40, 41, 42))
    args = dict(atten_mask=COMPRESSED.npu(), sparse_mode=3, actual_seq_qlen=cum, actual_seq_kvlen=cum)
    default = torch_npu.npu_fusion_attention(q, k, v, 2, "TND", **args)
    tnd = torch_npu.npu_fusion_attention(q, k, v, 2, "TND", softmax_layout="TND", **args)
    # both (T, N, 8); the default holds the kernel's N-major order, "TND" the token-major one
    assert default[1].shape == tnd[1].shape == (8, 2, 8)
    assert torch.equal(default[1].reshape(2, 8, 8), tnd[1].transpose(0, 1))
    assert torch.equal(default[0], tnd[0])
    # a given seed (and offset) chooses the dropout mask
    q, k, v = (rnd(1, 2, 16, 8, seed=s).npu() for s in (43, 44, 45))
    a, b, c = (torch_npu.npu_fusion_attention(q, k, v, 2, "BNSD", keep_prob=0.6, seed=7, offset=o)[0]
               for o in (0, 0, 16))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_fusion_attention_sparse_mode_1_without_mask_masks_nothing():
    q, k, v = (rnd(1, 2, 8, 4, seed=s) for s in (46, 47, 48))
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "BNSD", sparse_mode=1, scale=0.5)[0]
    assert_close(out.cpu(), reference_attention(q, k, v, None, 0.5), atol=1e-5, rtol=1e-5)


def test_fusion_attention_grad_matches_autograd():
    q, k, v = (rnd(2, 12, 16, seed=s).npu().requires_grad_() for s in (22, 23, 24))  # BSH, 2 heads of 8
    out = torch_npu.npu_fusion_attention(q, k, v, 2, "BSH", atten_mask=COMPRESSED.npu(), sparse_mode=2, scale=0.35)
    g = torch.randn_like(out[0])
    want = torch.autograd.grad(out[0], (q, k, v), g)
    got = torch_npu.npu_fusion_attention_grad(q, k, v, g, 2, "BSH", atten_mask=COMPRESSED.npu(), sparse_mode=2,
                                              scale_value=0.35, softmax_max=out[1], softmax_sum=out[2],
                                              attention_in=out[0])
    assert got[3].numel() == 0
    for a, b in zip(got[:3], want):
        assert_close(a.cpu(), b.cpu(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", ["BSH", "TND"])
def test_fusion_attention_grad_takes_the_given_statistics(layout):
    # Ring attention: each key block's gradient is taken with the whole row's statistics and output (the
    # merged ones), so the blocks' dq add up to the whole attention's and their dk / dv are its slices.
    n, s, d = 2, 8, 4
    if layout == "BSH":
        q, k, v = (rnd(2, s, n * d, seed=sd).npu() for sd in (51, 52, 53))
        kw = {}
        blocks = [(slice(None), slice(0, 3)), (slice(None), slice(3, s))]  # along S
        cut = lambda t, blk: t[blk].contiguous()
    else:
        q, k, v = (rnd(s, n, d, seed=sd).npu() for sd in (51, 52, 53))
        kw = dict(actual_seq_qlen=[s], actual_seq_kvlen=[s])
        blocks = [slice(0, 3), slice(3, s)]
        cut = lambda t, blk: t[blk].contiguous()
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = torch_npu.npu_fusion_attention(*leaves, n, layout, scale=0.5, **kw)
    dy = torch.randn_like(out[0])
    out[0].backward(dy)
    dq = torch.zeros_like(q)
    for blk in blocks:
        kv_kw = dict(kw, actual_seq_kvlen=[cut(k, blk).shape[0]]) if layout == "TND" else kw
        got = torch_npu.npu_fusion_attention_grad(q, cut(k, blk), cut(v, blk), dy, n, layout, scale_value=0.5,
                                                  softmax_max=out[1], softmax_sum=out[2], attention_in=out[0],
                                                  **kv_kw)
        dq += got[0]
        assert_close(got[1].cpu(), cut(leaves[1].grad, blk).cpu(), atol=1e-5, rtol=1e-4)
        assert_close(got[2].cpu(), cut(leaves[2].grad, blk).cpu(), atol=1e-5, rtol=1e-4)
    assert_close(dq.cpu(), leaves[0].grad.cpu(), atol=1e-5, rtol=1e-4)


def test_fusion_attention_grad_from_statistics_with_pse_and_dropout():
    q, k, v = (rnd(1, 6, 8, seed=sd).npu() for sd in (61, 62, 63))  # BSH, 2 heads of 4
    pse = rnd(1, 2, 6, 6, seed=64).npu()
    leaves = [t.clone().requires_grad_() for t in (q, k, v, pse)]
    out = torch_npu.npu_fusion_attention(*leaves[:3], 2, "BSH", pse=leaves[3], scale=0.5, keep_prob=0.7)
    dy = torch.randn_like(out[0])
    out[0].backward(dy)
    got = torch_npu.npu_fusion_attention_grad(q, k, v, dy, 2, "BSH", pse=pse, scale_value=0.5, keep_prob=0.7,
                                              seed=out[4], softmax_max=out[1], softmax_sum=out[2],
                                              attention_in=out[0])
    for g, leaf in zip(got, leaves):
        assert_close(g.cpu(), leaf.grad.cpu(), atol=1e-5, rtol=1e-4)


def test_fusion_attention_stats_give_the_log_sum_exp():
    q, k, v = (rnd(1, 2, 8, 4, seed=s) for s in (25, 26, 27))
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "BNSD", scale=0.5)
    lse = out[1][..., 0] + out[2][..., 0].log()
    assert_close(lse.cpu(), torch.logsumexp((q @ k.transpose(-1, -2)) * 0.5, -1), atol=1e-5, rtol=1e-5)


def test_fusion_attention_long_sequence_memory_is_linear():
    # S = 8192 causal: a materialised S x S float score matrix would be 256 MB per head.
    s, d = 8192, 16
    q = torch.randn(1, 1, s, d, device="npu", dtype=torch.bfloat16)
    torch.npu.synchronize()
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    out = torch_npu.npu_fusion_attention(q, q, q, 1, "BNSD", atten_mask=COMPRESSED.npu(), sparse_mode=2,
                                         scale=0.25)[0]
    torch.npu.synchronize()
    assert torch.isfinite(out.float()).all()
    assert torch.npu.max_memory_allocated() - base < 16 * 2**20


@pytest.mark.parametrize("kwargs,match", [
    (dict(input_layout="BHS"), "input_layout should be one of"),
    (dict(head_num=3), "not divisible by head_num"),
    (dict(input_layout="SBH", head_num=16, query=torch.randn(1, 2, 16, 16)),
     r"query should be 3-dimensional for input_layout 'SBH', but got shape \[1, 2, 16, 16\]"),
    (dict(atten_mask=torch.zeros(5, 7, dtype=torch.bool)), "atten_mask of shape"),
    (dict(atten_mask=torch.zeros(16, 16)), "atten_mask should be bool or uint8"),
    (dict(sparse_mode=6), "sparse_mode 6 is not supported"),
    (dict(sparse_mode=3, atten_mask=torch.zeros(16, 16, dtype=torch.bool)), "compressed atten_mask"),
    (dict(keep_prob=0.0), "keep_prob should be in"),
    (dict(input_layout="BSND"), "query should be 4-dimensional"),
    (dict(input_layout="TND", head_num=16), "needs actual_seq_qlen"),
    (dict(softmax_layout="NTD"), "softmax_layout should be '' or 'TND'"),
    (dict(softmax_layout="TND"), "only supported with input_layout 'TND'"),
    (dict(sink=torch.zeros(2)), "sink .* is not supported on vNPU"),
    (dict(dropout_mask=torch.zeros(8, dtype=torch.uint8)), "external dropout_mask is not supported"),
])
def test_fusion_attention_bad_input(kwargs, match):
    q = torch.randn(2, 16, 16, device="npu")  # BSH with 2 heads of 8
    args = dict(head_num=2, input_layout="BSH")
    args.update(kwargs)
    if "query" in args:
        q = args.pop("query").npu()
    for name in ("atten_mask", "sink", "dropout_mask"):
        if isinstance(args.get(name), torch.Tensor):
            args[name] = args[name].npu()
    with pytest.raises(RuntimeError, match=match):
        torch_npu.npu_fusion_attention(q, q, q, args.pop("head_num"), args.pop("input_layout"), **args)


def test_fusion_attention_mismatched_dtype_and_device():
    q = torch.randn(1, 4, 8, device="npu")
    with pytest.raises(RuntimeError, match="key dtype"):
        torch_npu.npu_fusion_attention(q, q.half(), q, 1, "BSH")
    with pytest.raises(RuntimeError, match="same device"):
        torch_npu.npu_fusion_attention(q, q.cpu(), q, 1, "BSH")
    with pytest.raises(RuntimeError, match="multiple of the key/value head count"):
        torch_npu.npu_fusion_attention(torch.randn(1, 3, 4, 8, device="npu"), torch.randn(1, 2, 4, 8, device="npu"),
                                       torch.randn(1, 2, 4, 8, device="npu"), 3, "BNSD")


def test_fusion_attention_traces_under_fake_tensors():
    with FakeTensorMode():
        q = torch.empty(2, 16, 4, 8, dtype=torch.bfloat16)
        out = torch.ops.npu.npu_fusion_attention(q, q, q, 4, "BSND", atten_mask=torch.empty(2048, 2048,
                                                                                            dtype=torch.bool),
                                                 sparse_mode=3)
        assert out[0].shape == (2, 16, 4, 8) and out[0].dtype == torch.bfloat16
        assert out[1].shape == (2, 4, 16, 8)


def test_prompt_and_incremental_attention():
    q, k, v = (rnd(2, 6, 16, seed=s) for s in (30, 31, 32))  # BSH, 2 heads
    bnsd = [t.view(2, 6, 2, 8).transpose(1, 2) for t in (q, k, v)]
    got = torch_npu.npu_prompt_flash_attention(q.npu(), k.npu(), v.npu(), num_heads=2, scale_value=0.3,
                                               input_layout="BSH", next_tokens=0, pre_tokens=65535)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)
    want = reference_attention(*bnsd, causal, 0.3).transpose(1, 2).reshape(2, 6, 16)
    assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)
    # One new token against the cache, with per-batch valid lengths.
    q1 = rnd(2, 1, 16, seed=33)
    got = torch_npu.npu_incre_flash_attention(q1.npu(), k.npu(), v.npu(), num_heads=2, scale_value=0.3,
                                              input_layout="BSH", actual_seq_lengths=[6, 4])
    beyond = torch.arange(6).view(1, 1, 1, 6) >= torch.tensor([6, 4]).view(2, 1, 1, 1)
    want = reference_attention(q1.view(2, 1, 2, 8).transpose(1, 2), *bnsd[1:], beyond, 0.3)
    assert_close(got.cpu(), want.transpose(1, 2).reshape(2, 1, 16), atol=1e-5, rtol=1e-5)
    out, lse = torch_npu.npu_fused_infer_attention_score(q1.npu(), k.npu(), v.npu(), num_heads=2, scale=0.3,
                                                         input_layout="BSH", actual_seq_lengths_kv=[6, 4],
                                                         softmax_lse_flag=True)
    assert_close(out.cpu(), want.transpose(1, 2).reshape(2, 1, 16), atol=1e-5, rtol=1e-5)
    assert lse.shape == (2, 2, 1, 1)


def test_paged_incremental_attention_equals_contiguous_cache():
    k, v = rnd(2, 8, 16, seed=34), rnd(2, 8, 16, seed=35)  # two sequences of 8 tokens
    blocks_k = torch.zeros(5, 4, 16)
    blocks_v = torch.zeros(5, 4, 16)
    table = torch.tensor([[3, 0], [1, 4]])  # sequence b's token t lives in block table[b, t // 4]
    for b in range(2):
        for j in range(2):
            blocks_k[table[b, j]] = k[b, 4 * j:4 * j + 4]
            blocks_v[table[b, j]] = v[b, 4 * j:4 * j + 4]
    q = rnd(2, 1, 16, seed=36)
    paged = torch_npu.npu_incre_flash_attention(q.npu(), blocks_k.npu(), blocks_v.npu(), num_heads=2,
                                                input_layout="BSH", block_table=table.int().npu(), block_size=4)
    flat = torch_npu.npu_incre_flash_attention(q.npu(), k.npu(), v.npu(), num_heads=2, input_layout="BSH")
    assert_close(paged.cpu(), flat.cpu())


def test_fused_infer_attention_score_out_and_workspace_query():
    # vllm-ascend's graph path: ask for the workspace, then call .out into
    # preallocated tensors; the results equal the functional overload's.
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, s, 64).half().npu() for s in (4, 6, 6))
    kwargs = dict(num_heads=4, scale=0.25, softmax_lse_flag=True)
    out, lse = torch_npu.npu_fused_infer_attention_score(q, k, v, **kwargs)
    workspace = torch_npu._npu_fused_infer_attention_score_get_max_workspace(q, k, v, **kwargs)
    assert workspace.device == q.device and workspace.dtype == torch.uint8
    attention_out, softmax_lse = torch.empty_like(out), torch.empty(0, device="npu")
    got = torch_npu.npu_fused_infer_attention_score.out(q, k, v, workspace=workspace, attention_out=attention_out,
                                                       softmax_lse=softmax_lse, **kwargs)
    assert got[0] is attention_out and got[1] is softmax_lse
    assert torch.equal(attention_out.cpu(), out.cpu()) and torch.equal(softmax_lse.cpu(), lse.cpu())
    with pytest.raises(RuntimeError, match="attention_out should have dtype torch.float16"):
        torch_npu.npu_fused_infer_attention_score.out(q, k, v, attention_out=torch.empty(0, device="npu"),
                                                      softmax_lse=softmax_lse, **kwargs)
    with pytest.raises(RuntimeError, match="query_rope / key_rope"):
        torch_npu.npu_fused_infer_attention_score(q, k, v, query_rope=q, key_rope=k, **kwargs)
