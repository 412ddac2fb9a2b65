"""torch_npu.op_plugin.multi_head_attention: npu_multi_head_attention against torch's
multi_head_attention_forward, its dropout mask and gradients, fp16 and bad input."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen


def mha_inputs(batch=2, heads=4, dim=8, tgt=5, src=6, seed=80):
    g = gen(seed)
    e = heads * dim
    t = lambda *s: torch.randn(*s, generator=g) * 0.5
    return dict(query=t(batch * tgt, e), key=t(batch * src, e), value=t(batch * src, e),
                query_weight=t(e, e), key_weight=t(e, e), value_weight=t(e, e),
                attn_mask=t(batch, heads, tgt, src), out_proj_weight=t(e, e), query_bias=t(e), key_bias=t(e),
                value_bias=t(e), out_proj_bias=t(e)), (batch, heads, dim, tgt, src)


def call_mha(ins, dims, device, dropout_mask=None, p=0.0, softmax_use_float=True):
    batch, heads, dim, tgt, src = dims
    a = {k: v.to(device) for k, v in ins.items()}
    return torch_npu.npu_multi_head_attention(
        a["query"], a["key"], a["value"], a["query_weight"], a["key_weight"], a["value_weight"], a["attn_mask"],
        a["out_proj_weight"], a["query_bias"], a["key_bias"], a["value_bias"], a["out_proj_bias"],
        None if dropout_mask is None else dropout_mask.to(device), heads, dim, src, tgt, p, softmax_use_float)


def test_multi_head_attention_matches_torch_mha():
    ins, dims = mha_inputs()
    batch, heads, dim, tgt, src = dims
    y, mask, q, k, v, scores, probs, context = call_mha(ins, dims, "npu")
    # torch's own multi-head attention (sequence-first layout, per-head additive mask).
    seq = lambda x, n: x.view(batch, n, -1).transpose(0, 1)
    ref, ref_weights = F.multi_head_attention_forward(
        seq(ins["query"], tgt), seq(ins["key"], src), seq(ins["value"], src), heads * dim, heads, None,
        torch.cat([ins["query_bias"], ins["key_bias"], ins["value_bias"]]), None, None, False, 0.0,
        ins["out_proj_weight"], ins["out_proj_bias"], training=False,
        attn_mask=ins["attn_mask"].reshape(batch * heads, tgt, src), use_separate_proj_weight=True,
        q_proj_weight=ins["query_weight"], k_proj_weight=ins["key_weight"], v_proj_weight=ins["value_weight"],
        average_attn_weights=False, need_weights=True)
    assert_close(y.cpu(), ref.transpose(0, 1).reshape(batch * tgt, -1), atol=1e-5, rtol=1e-4)
    assert_close(scores.cpu(), ref_weights, atol=1e-6, rtol=1e-4)
    assert scores.dtype == torch.float32 and mask.dtype == torch.uint8 and bool((mask.cpu() == 1).all())
    assert q.shape == (batch, heads, tgt, dim) and k.shape == (batch, heads, src, dim) and context.shape == y.shape
    assert_close(probs.cpu(), scores.cpu())


def test_multi_head_attention_dropout_mask_and_gradients():
    ins, dims = mha_inputs(seed=81)
    batch, heads, dim, tgt, src = dims
    keep = (torch.rand(batch, heads, tgt, src, generator=gen(82)) > 0.3).to(torch.uint8)
    npu_in = {k: v.npu().requires_grad_() for k, v in ins.items()}
    cpu_in = {k: v.clone().requires_grad_() for k, v in ins.items()}
    outs = [call_mha(a, dims, dev, dropout_mask=keep, p=0.3) for a, dev in ((npu_in, "npu"), (cpu_in, "cpu"))]
    y_npu, y_cpu = outs[0][0], outs[1][0]
    assert_close(y_npu.cpu(), y_cpu.detach(), atol=1e-5, rtol=1e-4)
    assert_close(outs[0][6].cpu(), outs[0][5].cpu() * keep / 0.7)
    g = torch.randn(y_cpu.shape, generator=gen(83))
    y_npu.backward(g.npu())
    y_cpu.backward(g)
    for name in ("query", "key", "value", "query_weight", "attn_mask", "out_proj_bias"):
        assert_close(npu_in[name].grad.cpu(), cpu_in[name].grad, atol=1e-5, rtol=1e-4)
    # The same mask packed one bit per score, as _npu_dropout returns them, gives the same result.
    bits = keep.reshape(-1, 8) * torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)
    packed = bits.sum(1, dtype=torch.uint8)
    y_packed, mask_back, *_ = call_mha({k: v.detach() for k, v in npu_in.items()}, dims, "npu", dropout_mask=packed,
                                       p=0.3)
    assert_close(y_packed.cpu(), y_cpu.detach(), atol=1e-5, rtol=1e-4)
    assert torch.equal(mask_back.cpu(), keep)
    # A drawn mask: the kept fraction is near 1 - p and probs follow it.
    _, drawn, *_, scores, probs, _ = call_mha(ins, dims, "npu", p=0.5)
    assert 0.3 < drawn.float().mean().item() < 0.7
    assert_close(probs.cpu(), scores.cpu() * drawn.cpu() / 0.5)


def test_multi_head_attention_half_and_bad_input():
    ins, dims = mha_inputs(seed=84)
    half = {k: v.half() for k, v in ins.items()}
    y16 = call_mha(half, dims, "npu", softmax_use_float=True)[0]
    y32 = call_mha({k: v.float() for k, v in half.items()}, dims, "cpu")[0]
    assert y16.dtype == torch.float16
    assert_close(y16.cpu().float(), y32, atol=2e-2, rtol=2e-2)
    batch, heads, dim, tgt, src = dims
    with pytest.raises(RuntimeError, match="not a multiple of tgt_len"):
        call_mha(ins, (batch, heads, dim, tgt + 2, src), "npu")
    with pytest.raises(RuntimeError, match="one keep flag per score"):
        call_mha(ins, dims, "npu", dropout_mask=torch.ones(7, dtype=torch.uint8), p=0.1)
