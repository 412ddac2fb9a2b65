"""torch_npu.op_plugin.bert_attention: the BERT fused attention forwards against real
torch_npu's test formulas, dropout, gradients and bad input."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen, rnd


def attention_score_reference(q, k, v, mask, scale):
    probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * scale + mask, dim=-1)
    b, n, s, d = q.shape
    return torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b * s, n * d), probs


def test_fused_attention_score_fwd_matches_real_test_formula():
    """Real torch_npu's test_npu_fused_attention_score_fwd (smaller): keep_prob = 1, all-ones drop mask."""
    q, k, v = (rnd(2, 4, 32, 16, seed=s).uniform_(-3, 3, generator=gen(s)).half() for s in (1, 2, 3))
    mask = torch.ones(32) * -10000.
    mask[:6] = -0.
    mask = mask.expand(2, 1, 32, 32).half()
    ctx, probs, drop_mask = torch_npu.npu_fused_attention_score_fwd(q.npu(), k.npu(), v.npu(), mask.npu(), 0.125, 1)
    ctx_ref, probs_ref = attention_score_reference(q.float(), k.float(), v.float(), mask.float(), 0.125)
    assert ctx.dtype == torch.float16 and ctx.shape == (64, 64)
    assert_close(ctx.float().cpu(), ctx_ref, atol=2e-2, rtol=6e-3)
    assert_close(probs.float().cpu(), probs_ref, atol=2e-3, rtol=2e-3)
    assert drop_mask.dtype == torch.uint8 and torch.equal(drop_mask.cpu(), torch.ones(2 * 4 * 32 * 32,
                                                                                       dtype=torch.uint8))


def test_fused_attention_score_dropout_uses_its_mask_and_has_gradients():
    q, k, v = (rnd(2, 2, 8, 4, seed=s) for s in (1, 2, 3))
    mask = torch.zeros(2, 1, 8, 8)
    torch.manual_seed(0)
    ctx, probs, drop_mask = torch_npu.npu_fused_attention_score_fwd(q.npu(), k.npu(), v.npu(), mask.npu(), 0.5, 0.6)
    keep = drop_mask.cpu().view(2, 2, 8, 8).float()
    assert 0 < keep.mean() < 1
    _, probs_ref = attention_score_reference(q, k, v, mask, 0.5)
    assert_close(probs.cpu(), probs_ref)
    assert_close(ctx.cpu(), torch.matmul(probs_ref * keep / 0.6, v).permute(0, 2, 1, 3).reshape(16, 8))
    # npu_fused_attention_score: the context alone, differentiable (real torch_npu has its backward)
    cpu = [t.clone().requires_grad_() for t in (q, k, v)]
    npu = [t.npu().requires_grad_() for t in (q, k, v)]
    ref, _ = attention_score_reference(*cpu, mask, 0.5)
    got = torch_npu.npu_fused_attention_score(*npu, mask.npu(), 0.5, 1.0)
    assert_close(got.cpu(), ref)
    ref.square().sum().backward()
    got.square().sum().backward()
    for a, b in zip(cpu, npu):
        assert_close(b.grad.cpu(), a.grad)


def test_fused_attention_score_bad_input():
    q = torch.zeros(1, 2, 4, 4).npu()
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        torch_npu.npu_fused_attention_score_fwd(q, q, q, q, 1.0, 1.0, query_transpose=True)
    with pytest.raises(RuntimeError, match="same shape|one shape"):
        torch_npu.npu_fused_attention_score_fwd(q, torch.zeros(1, 2, 5, 4).npu(), q, q, 1.0, 1.0)


def test_fused_attention_layernorm_qkv_fwd_matches_real_test_formula():
    """Real torch_npu's test (smaller): LayerNorm, then norm @ kernel + bias as (B, N, S, D)."""
    batch, seq, heads, hidden = 3, 16, 4, 64
    x = rnd(batch * seq, hidden, seed=1).uniform_(-6, 6, generator=gen(1))
    kernels = [rnd(hidden, hidden, seed=s).uniform_(-0.1, 0.1, generator=gen(s)) for s in (2, 3, 4)]
    biases = [torch.rand(hidden, generator=gen(s)) for s in (5, 6, 7)]
    gamma, beta = torch.rand(hidden, generator=gen(8)), torch.rand(hidden, generator=gen(9))
    out = torch_npu.npu_fused_attention_layernorm_qkv_fwd(x.npu(), *(t.npu() for t in kernels), gamma.npu(),
                                                          beta.npu(), *(t.npu() for t in biases), seq, heads)
    norm, q, k, v, mean, variance = (t.cpu() for t in out)
    norm_ref, mean_ref, _ = torch.native_layer_norm(x, (hidden,), gamma, beta, 1e-5)
    assert_close(norm, norm_ref)
    assert_close(mean, mean_ref)  # (B * S, 1), as the real test compares it
    assert_close(variance, x.var(-1, unbiased=False))
    for got, kernel, bias in zip((q, k, v), kernels, biases):
        ref = F.linear(norm_ref, kernel.t(), bias).view(batch, seq, heads, -1).permute(0, 2, 1, 3)
        assert_close(got, ref)


def test_fused_attention_layernorm_qkv_fwd_bad_input():
    x = torch.zeros(30, 64).npu()
    kernel, vec = torch.zeros(64, 64).npu(), torch.ones(64).npu()
    with pytest.raises(RuntimeError, match="divisible by seq_len"):
        torch_npu.npu_fused_attention_layernorm_qkv_fwd(x, kernel, kernel, kernel, vec, vec, seq_len=16, num_heads=4)
    with pytest.raises(RuntimeError, match="kernel_key"):
        torch_npu.npu_fused_attention_layernorm_qkv_fwd(x, kernel, torch.zeros(32, 64).npu(), kernel, vec, vec,
                                                        seq_len=10, num_heads=4)
