"""torch_npu's fused operators (torch.ops.npu.*): each against its plain-PyTorch
formula, on cpu and npu, with gradients, FakeTensor tracing and bad input."""

import math

import pytest
import torch
import torch.nn.functional as F
import torch_npu
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

DEVICES = ["cpu", "npu"]
COMPRESSED = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)


def rnd(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


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


# --- npu_fusion_attention --------------------------------------------------------

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
    (dict(atten_mask=torch.zeros(5, 7, dtype=torch.bool)), "atten_mask of shape"),
    (dict(atten_mask=torch.zeros(16, 16)), "atten_mask should be bool or uint8"),
    (dict(sparse_mode=6), "sparse_mode 6 is not supported"),
    (dict(sparse_mode=3, atten_mask=torch.zeros(16, 16, dtype=torch.bool)), "compressed atten_mask"),
    (dict(keep_prob=0.0), "keep_prob should be in"),
    (dict(input_layout="BSND"), "query should be 4-dimensional"),
    (dict(input_layout="TND", head_num=16), "needs actual_seq_qlen"),
])
def test_fusion_attention_bad_input(kwargs, match):
    q = torch.randn(2, 16, 16, device="npu")  # BSH with 2 heads of 8
    args = dict(head_num=2, input_layout="BSH")
    args.update(kwargs)
    if isinstance(args.get("atten_mask"), torch.Tensor):
        args["atten_mask"] = args["atten_mask"].npu()
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


# --- inference attention -----------------------------------------------------------

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


# --- norms, rotary, activations ------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_and_backward(device, dtype):
    x = rnd(3, 5, 16, seed=40, dtype=dtype).to(device).requires_grad_()
    gamma = rnd(16, seed=41, dtype=dtype).to(device).requires_grad_()
    y, rstd = torch_npu.npu_rms_norm(x, gamma, epsilon=1e-5)
    assert rstd.dtype == torch.float32 and rstd.shape == (3, 5, 1) and y.dtype == dtype
    xf = x.detach().float().cpu()
    want = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * gamma.detach().float().cpu()
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    assert_close(y.float().cpu(), want, **tol)
    g = torch.randn_like(y)
    dx, dgamma = torch.autograd.grad(y, (x, gamma), g)
    ex_dx, ex_dgamma = torch_npu.npu_rms_norm_backward(g, x, gamma, rstd)
    assert_close(ex_dx.float(), dx.float(), **tol)
    assert_close(ex_dgamma.float(), dgamma.float(), **tol)
    if device == "npu":
        y2, r2, s = torch_npu.npu_add_rms_norm(x, x, gamma)
        assert_close(s, 2 * x)
        assert_close(y2, torch_npu.npu_rms_norm(2 * x, gamma)[0])


def test_rms_norm_bad_gamma():
    with pytest.raises(RuntimeError, match="gamma of shape"):
        torch_npu.npu_rms_norm(torch.randn(4, 8, device="npu"), torch.ones(7, device="npu"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["half", "interleave"])
def test_rotary_mul_and_grad(device, mode):
    x = rnd(2, 4, 3, 8, seed=42).to(device).requires_grad_()
    r1 = rnd(1, 4, 1, 8, seed=43).to(device).requires_grad_()
    r2 = rnd(1, 4, 1, 8, seed=44).to(device).requires_grad_()
    out = torch_npu.npu_rotary_mul(x, r1, r2, rotary_mode=mode)
    xc = x.detach().cpu()
    if mode == "half":
        rot = torch.cat((-xc[..., 4:], xc[..., :4]), -1)
    else:
        rot = torch.stack((-xc[..., 1::2], xc[..., 0::2]), -1).flatten(-2)
    assert_close(out.detach().cpu(), xc * r1.detach().cpu() + rot * r2.detach().cpu())
    g = torch.randn_like(out)
    want = torch.autograd.grad(out, (x, r1, r2), g)
    got = torch_npu.npu_rotary_mul_backward(g, x, r1, r2, mode)
    for a, b in zip(got, want):
        assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_apply_rotary_pos_emb_in_place():
    q, k = rnd(1, 4, 2, 8, seed=45).npu(), rnd(1, 4, 2, 8, seed=46).npu()
    cos, sin = rnd(1, 4, 1, 8, seed=47).npu(), rnd(1, 4, 1, 8, seed=48).npu()
    want_q, want_k = torch_npu.npu_rotary_mul(q, cos, sin), torch_npu.npu_rotary_mul(k, cos, sin)
    rq, rk = torch_npu.npu_apply_rotary_pos_emb(q, k, cos, sin)
    assert rq is q and rk is k
    assert_close(q.cpu(), want_q.cpu())
    assert_close(k.cpu(), want_k.cpu())


@pytest.mark.parametrize("device", DEVICES)
def test_activations(device):
    x = rnd(4, 10, seed=50).to(device).requires_grad_()
    a, b = x.detach().cpu().chunk(2, -1)
    assert_close(torch_npu.npu_swiglu(x).detach().cpu(), F.silu(a) * b)
    g = torch.randn(4, 5, device=device)
    (dx,) = torch.autograd.grad(torch_npu.npu_swiglu(x), x, g)
    assert_close(torch_npu.npu_swiglu_backward(g, x), dx, atol=1e-6, rtol=1e-5)
    y, gelu = torch_npu.npu_geglu(x.detach(), dim=-1, approximate=1)
    assert_close(gelu.cpu(), F.gelu(b, approximate="tanh"))
    assert_close(y.cpu(), a * F.gelu(b, approximate="tanh"))
    y, _ = torch_npu.npu_geglu(x.detach(), approximate=0, activate_left=True)
    assert_close(y.cpu(), b * F.gelu(a))
    xc = x.detach().cpu()
    assert_close(torch_npu.npu_fast_gelu(x).detach().cpu(), xc / (1 + torch.exp(-1.702 * xc.abs()))
                 * torch.exp(0.851 * (xc - xc.abs())))
    assert_close(torch_npu.npu_gelu(x, approximate="tanh").detach().cpu(), F.gelu(xc, approximate="tanh"))
    with pytest.raises(RuntimeError, match="should be even"):
        torch_npu.npu_swiglu(torch.randn(3, 5, device=device))


def test_confusion_transpose_and_masked_softmax():
    x = rnd(2, 3, 4, seed=51).npu()
    assert_close(torch_npu.npu_confusion_transpose(x, [1, 0, 2], [3, 8], True).cpu(),
                 x.cpu().permute(1, 0, 2).reshape(3, 8))
    assert_close(torch_npu.npu_confusion_transpose(x, [1, 0], [6, 4], False).cpu(), x.cpu().reshape(6, 4).t())
    s = rnd(2, 2, 4, 4, seed=52).npu()
    mask = torch.zeros(2, 2, 4, 4, dtype=torch.bool)
    mask[..., -1] = True
    got = torch_npu.npu_scaled_masked_softmax(s, mask.npu(), 0.5)
    want = torch.softmax((s.cpu() * 0.5).masked_fill(mask, float("-inf")), -1)
    assert_close(got.cpu(), want, atol=1e-6, rtol=1e-5)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        torch_npu.npu_scaled_masked_softmax(s, torch.zeros(3, 4, 4, dtype=torch.bool, device="npu"))


# --- optimizer, grouped matmul, MoE -----------------------------------------------------

@pytest.mark.parametrize("amsgrad", [False, True])
def test_apply_adam_w_matches_torch_adamw(amsgrad):
    p_ref = torch.nn.Parameter(rnd(10, seed=60))
    opt = torch.optim.AdamW([p_ref], lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, amsgrad=amsgrad)
    var, m, v = p_ref.detach().clone().npu(), torch.zeros(10, device="npu"), torch.zeros(10, device="npu")
    vmax = torch.zeros(10, device="npu")
    for step in range(1, 4):
        grad = rnd(10, seed=60 + step)
        p_ref.grad = grad
        opt.step()
        torch_npu.npu_apply_adam_w(0.9 ** step, 0.99 ** step, 0.01, 0.1, 0.9, 0.99, 1e-8, grad.npu(), vmax,
                                   amsgrad, False, out=(var, m, v))
    assert_close(var.cpu(), p_ref.detach(), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("group_list_type", [0, 1])
def test_grouped_matmul(group_list_type):
    x = rnd(7, 4, seed=61).npu()
    ws = [rnd(4, 3, seed=62 + i).npu() for i in range(3)]
    sizes = [2, 0, 5]
    group_list = sizes if group_list_type == 1 else [2, 2, 7]
    ys = torch_npu.npu_grouped_matmul([x], ws, group_list=group_list, group_list_type=group_list_type,
                                      group_type=0)
    parts = x.cpu().split(sizes)
    for y, p, w in zip(ys, parts, ws):
        assert_close(y.cpu(), p @ w.cpu())
    (cat,) = torch_npu.npu_grouped_matmul([x], ws, group_list=group_list, group_list_type=group_list_type,
                                          group_type=0, split_item=3)
    assert_close(cat.cpu(), torch.cat([p @ w.cpu() for p, w in zip(parts, ws)]))
    with pytest.raises(RuntimeError, match="does not split"):
        torch_npu.npu_grouped_matmul([x], ws, group_list=[2, 2, 9], group_type=0)


def test_moe_routing_round_trip():
    tokens, experts, k, h = 6, 4, 2, 8
    logits = rnd(tokens, experts, seed=70).npu()
    y, expert_idx, row_idx = torch_npu.npu_moe_gating_top_k_softmax(logits, k=k)
    want_y, want_idx = torch.softmax(logits.cpu(), -1).topk(k)
    assert_close(y.cpu(), want_y)
    assert torch.equal(expert_idx.cpu().long(), want_idx)
    assert torch.equal(row_idx.cpu(), torch.arange(tokens * k, dtype=torch.int32).view(k, tokens).t())
    x = rnd(tokens, h, seed=71).npu().requires_grad_()
    permuted, sorted_indices = torch_npu.npu_moe_token_permute(x, expert_idx.long())
    # grouped by expert, stable
    assert torch.equal(expert_idx.cpu().reshape(-1)[sorted_indices.cpu().long()].sort().values,
                       expert_idx.cpu().reshape(-1)[sorted_indices.cpu().long()])
    out = torch_npu.npu_moe_token_unpermute(permuted, sorted_indices, y)
    assert_close(out.detach().cpu(), x.detach().cpu() * y.cpu().sum(-1, keepdim=True), atol=1e-6, rtol=1e-5)
    out.sum().backward()
    assert_close(x.grad.cpu(), y.cpu().sum(-1, keepdim=True).expand(tokens, h))
    expanded_x, expanded_row_idx, expanded_expert = torch_npu.npu_moe_init_routing(x.detach(), row_idx,
                                                                                    expert_idx, tokens)
    assert torch.equal(expanded_expert.cpu(), expert_idx.cpu().t().reshape(-1).sort(stable=True).values)
    # each choice's k-major row r = j * tokens + i lands at expanded_row_idx[r], holding token i
    for r in range(tokens * k):
        assert torch.equal(expanded_x[expanded_row_idx[r]].cpu(), x.detach()[r % tokens].cpu())


def test_fused_optimizers_match_torch_optim():
    for fused, plain, kwargs in [(torch_npu.optim.NpuFusedAdamW, torch.optim.AdamW, dict(lr=0.01)),
                                 (torch_npu.optim.NpuFusedAdam, torch.optim.Adam, dict(lr=0.01)),
                                 (torch_npu.optim.NpuFusedSGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9))]:
        a = torch.nn.Parameter(rnd(5, seed=80).npu())
        b = torch.nn.Parameter(rnd(5, seed=80))
        oa, ob = fused([a], **kwargs), plain([b], **kwargs)
        for step in range(3):
            g = rnd(5, seed=81 + step)
            a.grad, b.grad = g.npu(), g
            oa.step()
            ob.step()
        assert_close(a.detach().cpu(), b.detach(), atol=1e-6, rtol=1e-5)


def test_every_exported_op_is_in_torch_ops_npu():
    for name in ["npu_fusion_attention", "npu_rms_norm", "npu_rotary_mul", "npu_swiglu", "npu_geglu",
                 "npu_moe_gating_top_k_softmax", "npu_grouped_matmul", "npu_apply_adam_w"]:
        assert hasattr(torch.ops.npu, name)
        assert callable(getattr(torch_npu, name))
