"""torch_npu.contrib.module.multihead_attention: MultiheadAttention against
multi_head_attention_forward."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


def test_multihead_attention_equals_formula():
    torch.manual_seed(0)
    bsz, tgt, src, embed, heads = 2, 5, 7, 16, 4
    model = cm.MultiheadAttention(embed, heads, dropout=0.1, encoder_decoder_attention=True).eval()
    q, k, v = rnd(bsz * tgt, embed, seed=211), rnd(bsz * src, embed, seed=212), rnd(bsz * src, embed, seed=213)
    mask = torch.where(rnd(bsz, heads, tgt, src, seed=214) > 1, -10000.0, 0.0)
    dev = model.to(NPU)
    out, weights = dev(q.to(NPU), k.to(NPU), v.to(NPU), bsz, tgt, src, mask.to(NPU))
    assert weights is None and out.shape == (bsz * tgt, embed)
    # the same attention through torch.nn.functional.multi_head_attention_forward (seq-first layout)
    cpu = model.cpu()
    in_w = torch.cat([cpu.q_proj.weight, cpu.k_proj.weight, cpu.v_proj.weight])
    in_b = torch.cat([cpu.q_proj.bias, cpu.k_proj.bias, cpu.v_proj.bias])
    ref, _ = F.multi_head_attention_forward(
        q.view(bsz, tgt, embed).transpose(0, 1), k.view(bsz, src, embed).transpose(0, 1),
        v.view(bsz, src, embed).transpose(0, 1), embed, heads, in_w, in_b, None, None, False, 0.0,
        cpu.out_proj.weight, cpu.out_proj.bias, training=False, need_weights=False,
        attn_mask=mask.reshape(bsz * heads, tgt, src))
    assert_close(out.detach().cpu(), ref.transpose(0, 1).reshape(bsz * tgt, embed).detach(), atol=1e-5, rtol=1e-4)
    out.sum().backward()
    assert dev.q_proj.weight.grad is not None
    biased = cm.MultiheadAttention(embed, heads, add_bias_kv=True)  # fairseq's parameters exist ...
    assert biased.bias_k.shape == (1, 1, embed) and biased.bias_v.shape == (1, 1, embed)
    with pytest.raises(RuntimeError, match="not supported on vNPU"):  # ... the fused kernel cannot take them
        biased(q, k, v, bsz, tgt, src)
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        dev(q.to(NPU), k.to(NPU), v.to(NPU), bsz, tgt, src, attn_mask=mask.to(NPU))
    with pytest.raises(ValueError, match="divisible"):
        cm.MultiheadAttention(10, 3)


def test_quant_noise_and_npu_linear():
    from torch_npu.contrib.module.multihead_attention import _MHAConfig, _NpuLinear, _quant_noise
    from torch_npu.contrib.module.multihead_attention import MHAConfig
    assert _MHAConfig is MHAConfig
    torch.manual_seed(0)
    for module, block in [(nn.Linear(8, 4), 4), (nn.Conv2d(8, 4, 1), 2), (nn.Conv2d(3, 4, (2, 2)), 2),
                          (nn.Embedding(5, 8), 4)]:
        original = module.weight.detach().clone()
        noisy = _quant_noise(module, 0.5, block)
        noisy.train()
        x = torch.randint(0, 5, (3,)) if isinstance(module, nn.Embedding) else \
            torch.randn(2, *(original.shape[1:2] if original.dim() == 2 else (original.shape[1], 4, 4)))
        noisy(x)
        w = module.weight.detach()
        dropped = w == 0
        assert dropped.any() and (~dropped).any()
        torch.testing.assert_close(w[~dropped], original[~dropped] * 2)  # 1 / (1 - p)
    with pytest.raises(ValueError, match="multiple of block sizes"):
        _quant_noise(nn.Linear(10, 4), 0.1, 3)
    with pytest.raises(ValueError, match="Kernel size must be a multiple"):
        _quant_noise(nn.Conv2d(3, 4, (3, 3)), 0.1, 5)
    with pytest.raises(TypeError, match="Expected isinstance"):
        _quant_noise(nn.LSTM(4, 4), 0.1, 2)
    lin = _NpuLinear(10, 20)
    x = torch.randn(2, 3, 10)
    torch.testing.assert_close(lin(x), F.linear(x, lin.weight, lin.bias))
    with pytest.raises(RuntimeError, match="2-D or 3-D"):
        lin(torch.randn(1, 2, 3, 10))
