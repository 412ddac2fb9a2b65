"""torch_npu's remaining custom ops from real torch_npu's test/custom_ops:
npu_bert_apply_adam, npu_lstm_cell, the BERT fused attention forwards,
npu_scatter_nd_update and npu_quant_scatter. Each on npu against a
plain-PyTorch formula on cpu, gradients where the real operator has a
backward, and the argument checks."""

import pytest
import torch
import torch.nn.functional as F
import torch_npu
from torch.testing import assert_close


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=gen(seed)).to(dtype)


# --- npu_bert_apply_adam ----------------------------------------------------------------

def bert_adam_reference(var, m, v, grad, lr, b1, b2, eps, max_norm, global_norm, wd, step_size, mode):
    g = grad * (max_norm / global_norm) if max_norm > 0 and global_norm > max_norm else grad
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    update = m / (v.sqrt() + eps) if mode == 0 else m / (v + eps).sqrt()
    update = update + wd * var
    return var - (lr if step_size is None else step_size) * update, m, v


@pytest.mark.parametrize("mode,step_size,max_norm,global_norm", [(0, None, -1.0, 0.0), (1, 0.05, 1.0, 4.0),
                                                                 (0, 0.02, 5.0, 2.0)])
def test_bert_apply_adam_matches_formula(mode, step_size, max_norm, global_norm):
    var, m, v = randn(257, seed=1), randn(257, seed=2) * 0.1, randn(257, seed=3).abs() * 0.01
    grad = randn(257, seed=4) * 0.05
    args = dict(lr=0.1, b1=0.9, b2=0.99, eps=1e-6, max_norm=max_norm, global_norm=global_norm, wd=0.01,
                step_size=step_size, mode=mode)
    out = (var.npu(), m.npu(), v.npu())
    got = torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-6, grad.npu(), max_norm, global_norm, 0.01,
                                        step_size=step_size, adam_mode=mode, out=out)
    assert all(g is o for g, o in zip(got, out))  # updated in place and returned
    for g, r in zip(got, bert_adam_reference(var, m, v, grad, **args)):
        assert_close(g.cpu(), r)


class _BertAdam(torch.nn.Module):
    def forward(self, grad, var_in, m_in, v_in):
        return torch_npu.npu_bert_apply_adam(0., 0.9, 0.99, 1e-06, grad, -1., 0., 0., out=(var_in, m_in, v_in))


def test_bert_apply_adam_scripted_and_traced_like_real_test():
    """Real torch_npu's test_script/trace_npu_bert_apply_adam_out: lr = 0 leaves var, m = 0.1 g."""
    torch.manual_seed(3)
    var = torch.rand(321538).uniform_(-32., 21.)
    grad = torch.rand(321538).uniform_(-0.05, 0.03)
    zeros = torch.zeros(321538)
    module = _BertAdam()
    eager = module(grad.npu(), var.npu(), zeros.npu(), zeros.npu())
    traced = torch.jit.trace(module, (grad.npu(), var.npu(), zeros.npu(), zeros.npu()))
    for compiled in (torch.jit.script(module), traced):
        got = compiled(grad.npu(), var.npu(), zeros.npu(), zeros.npu())
        for g, e in zip(got, eager):
            assert_close(g.cpu(), e.cpu())
    assert_close(eager[0].cpu(), var)
    assert_close(eager[1].cpu(), 0.1 * grad)
    assert_close(eager[2].cpu(), 0.01 * grad * grad)


def test_bert_apply_adam_bad_input():
    grad = torch.zeros(4).npu()
    with pytest.raises(RuntimeError, match="not implemented for Tensor"):
        torch.ops.npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-6, grad, -1., 0., 0.)
    with pytest.raises(RuntimeError, match="adam_mode"):
        torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-6, grad, -1., 0., 0., adam_mode=2,
                                      out=(torch.zeros(4).npu(), torch.zeros(4).npu(), torch.zeros(4).npu()))
    with pytest.raises(RuntimeError, match="shape"):
        torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-6, grad, -1., 0., 0.,
                                      out=(torch.zeros(5).npu(), torch.zeros(4).npu(), torch.zeros(4).npu()))


# --- npu_lstm_cell ------------------------------------------------------------------------

def test_lstm_cell_matches_torch_lstm_cell_with_gradients():
    """Real torch_npu's test_npu_lstm_cell: h and c as _VF.lstm_cell with the weights transposed."""
    from torch import _VF
    x, h, c = randn(3, 8, seed=1), randn(3, 7, seed=2), randn(3, 7, seed=3)
    w_ih, w_hh, b_ih, b_hh = randn(8, 28, seed=4), randn(7, 28, seed=5), randn(28, seed=6), randn(28, seed=7)
    cpu = [t.clone().requires_grad_() for t in (x, h, c, w_ih, w_hh, b_ih, b_hh)]
    npu = [t.npu().requires_grad_() for t in (x, h, c, w_ih, w_hh, b_ih, b_hh)]
    h_ref, c_ref = _VF.lstm_cell(cpu[0], (cpu[1], cpu[2]), cpu[3].t(), cpu[4].t(), cpu[5], cpu[6])
    y, h_out, c_out, i, j, f, o, tanhc = torch_npu.npu_lstm_cell(npu[0], npu[3], npu[4], npu[1], npu[2], npu[5],
                                                                 npu[6])
    assert_close(h_out.cpu(), h_ref)
    assert_close(y.cpu(), h_ref)
    assert_close(c_out.cpu(), c_ref)
    assert_close(tanhc.cpu(), torch.tanh(c_ref))
    assert_close((f * npu[2] + i * j).cpu(), c_ref)  # the gates are the ones c was made of
    assert_close((o * tanhc).cpu(), h_ref)
    (h_ref.sum() + 2 * c_ref.sum()).backward()
    (h_out.sum() + 2 * c_out.sum()).backward()
    for a, b in zip(cpu, npu):
        assert_close(b.grad.cpu(), a.grad)


def test_lstm_cell_without_bias_and_fp16():
    from torch import _VF
    x, h, c = randn(3, 8, seed=1), randn(3, 7, seed=2), randn(3, 7, seed=3)
    w_ih, w_hh = randn(8, 28, seed=4) * 0.3, randn(7, 28, seed=5) * 0.3
    h_ref, c_ref = _VF.lstm_cell(x, (h, c), w_ih.t(), w_hh.t())
    out = torch_npu.npu_lstm_cell(*(t.half().npu() for t in (x, w_ih, w_hh, h, c)))
    assert out[1].dtype == torch.float16
    assert_close(out[1].float().cpu(), h_ref, atol=3e-3, rtol=3e-3)
    assert_close(out[2].float().cpu(), c_ref, atol=3e-3, rtol=3e-3)


def test_lstm_cell_bad_input():
    x, h, c = torch.zeros(3, 8).npu(), torch.zeros(3, 7).npu(), torch.zeros(3, 7).npu()
    with pytest.raises(RuntimeError, match="w_ih"):
        torch_npu.npu_lstm_cell(x, torch.zeros(9, 28).npu(), torch.zeros(7, 28).npu(), h, c)
    with pytest.raises(RuntimeError, match="w_hh"):
        torch_npu.npu_lstm_cell(x, torch.zeros(8, 28).npu(), torch.zeros(7, 24).npu(), h, c)
    with pytest.raises(RuntimeError, match="c should be"):
        torch_npu.npu_lstm_cell(x, torch.zeros(8, 28).npu(), torch.zeros(7, 28).npu(), h, torch.zeros(2, 7).npu())


# --- the BERT fused attention forwards --------------------------------------------------------

def attention_score_reference(q, k, v, mask, scale):
    probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * scale + mask, dim=-1)
    b, n, s, d = q.shape
    return torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b * s, n * d), probs


def test_fused_attention_score_fwd_matches_real_test_formula():
    """Real torch_npu's test_npu_fused_attention_score_fwd (smaller): keep_prob = 1, all-ones drop mask."""
    q, k, v = (randn(2, 4, 32, 16, seed=s).uniform_(-3, 3, generator=gen(s)).half() for s in (1, 2, 3))
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
    q, k, v = (randn(2, 2, 8, 4, seed=s) for s in (1, 2, 3))
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
    x = randn(batch * seq, hidden, seed=1).uniform_(-6, 6, generator=gen(1))
    kernels = [randn(hidden, hidden, seed=s).uniform_(-0.1, 0.1, generator=gen(s)) for s in (2, 3, 4)]
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


# --- npu_scatter_nd_update, npu_quant_scatter ------------------------------------------------

def test_scatter_nd_update_matches_index_formula():
    var = randn(6, 5, 4, seed=1)
    indices = torch.tensor([[1, 0], [4, 3], [0, 4]], dtype=torch.int32)
    updates = randn(3, 4, seed=2)
    expected = var.clone()
    for row, upd in zip(indices.tolist(), updates):
        expected[tuple(row)] = upd
    assert_close(torch_npu.npu_scatter_nd_update(var.npu(), indices.npu(), updates.npu()).cpu(), expected)
    in_place = var.half().npu()
    result = torch_npu.npu_scatter_nd_update_(in_place, indices[:, :1].contiguous().npu(),
                                              randn(3, 5, 4, seed=3).half().npu())
    assert result is in_place
    ref = var.half().clone()
    ref[indices[:, 0].long()] = randn(3, 5, 4, seed=3).half()
    assert torch.equal(in_place.cpu(), ref)


def test_scatter_nd_update_bad_input():
    var = torch.zeros(6, 4).npu()
    with pytest.raises(RuntimeError, match="updates should have shape"):
        torch_npu.npu_scatter_nd_update(var, torch.zeros(2, 1, dtype=torch.int32).npu(), torch.zeros(2, 5).npu())
    with pytest.raises(RuntimeError, match="integer"):
        torch_npu.npu_scatter_nd_update(var, torch.zeros(2, 1).npu(), torch.zeros(2, 4).npu())


def quant_scatter_reference(x, batch, start, updates, scales, zero_points):
    q = torch.round(updates.float() / scales.float() + (0 if zero_points is None else zero_points.float()))
    q = q.clamp(-128, 127).to(torch.int8)
    out = x.clone()
    for m, (b, s) in enumerate(zip(batch, start)):
        out[b, s:s + updates.shape[1]] = q[m]
    return out


@pytest.mark.parametrize("two_d", [False, True])
def test_quant_scatter_matches_quantise_then_update(two_d):
    x = torch.randint(-128, 128, (3, 10, 32), generator=gen(1), dtype=torch.int8)
    updates = (randn(2, 3, 32, seed=2) * 40).to(torch.bfloat16)
    scales = (torch.rand(1, 1, 32, generator=gen(3)) + 0.5).to(torch.bfloat16)
    zero_points = (randn(1, 1, 32, seed=4) * 3).to(torch.bfloat16)
    if two_d:
        indices, batch, start = torch.tensor([[2, 1], [0, 7]], dtype=torch.int32), [2, 0], [1, 7]
    else:
        indices, batch, start = torch.tensor([4, 0], dtype=torch.int32), [0, 1], [4, 0]
    expected = quant_scatter_reference(x, batch, start, updates, scales, zero_points)
    got = torch_npu.npu_quant_scatter(x.npu(), indices.npu(), updates.npu(), scales.npu(), zero_points.npu(),
                                      axis=-2, quant_axis=-1)
    assert torch.equal(got.cpu(), expected)
    in_place = x.npu()
    assert torch_npu.npu_quant_scatter_(in_place, indices.npu(), updates.npu(), scales.npu(), zero_points.npu(),
                                        -2, -1, "update") is in_place
    assert torch.equal(in_place.cpu(), expected)
    no_offset = torch.ops.npu.npu_quant_scatter(x.npu(), indices.npu(), updates.npu(), scales.npu(), None, -2, -1)
    assert torch.equal(no_offset.cpu(), quant_scatter_reference(x, batch, start, updates, scales, None))


def test_quant_scatter_bad_input():
    x, indices = torch.zeros(2, 8, 32, dtype=torch.int8).npu(), torch.zeros(2, dtype=torch.int32).npu()
    updates, scales = torch.zeros(2, 1, 32).npu(), torch.ones(32).npu()
    with pytest.raises(RuntimeError, match="reduce only supports 'update'"):
        torch_npu.npu_quant_scatter(x, indices, updates, scales, None, -2, -1, "add")
    with pytest.raises(RuntimeError, match="quant_axis should be the last"):
        torch_npu.npu_quant_scatter(x, indices, updates, scales, None, -2, 1)
    with pytest.raises(RuntimeError, match="axis cannot be"):
        torch_npu.npu_quant_scatter(x, indices, updates, scales, None, 0, -1)
    with pytest.raises(RuntimeError, match="quant_scales should have 32"):
        torch_npu.npu_quant_scatter(x, indices, updates, torch.ones(16).npu(), None, -2, -1)
    with pytest.raises(RuntimeError, match="self should be int8"):
        torch_npu.npu_quant_scatter(x.float(), indices, updates, scales, None, -2, -1)


def test_in_place_scatters_functionalize_and_compile():
    """Real torch_npu's test_functionalization: the in-place form becomes its functional form + copy_."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def nd(var, indices, updates):
        return torch_npu.npu_scatter_nd_update_(var, indices, updates)

    def quant(var, indices, updates, scales):
        return torch.ops.npu.npu_quant_scatter_(var, indices, updates, scales, None, -2, -1, "update")

    cases = [(nd, (randn(24, 16, seed=1), torch.tensor([[3], [7], [20]], dtype=torch.int32), randn(3, 16, seed=2))),
             (quant, (torch.zeros(2, 4, 32, dtype=torch.int8), torch.tensor([1, 2], dtype=torch.int32),
                      randn(2, 1, 32, seed=3) * 20, torch.rand(32, generator=gen(4)) + 0.5))]
    for fn, cpu_args in cases:
        expected = cpu_args[0].clone()
        fn(expected, *cpu_args[1:])
        args = [t.npu() for t in cpu_args]
        code = make_fx(torch.func.functionalize(fn))(args[0].clone(), *args[1:]).code
        assert "aten.copy_" in code and "npu_scatter_nd_update_" not in code and "npu_quant_scatter_" not in code
        for run in (torch.func.functionalize(fn), torch.compile(fn, backend="aot_eager")):
            var = args[0].clone()
            run(var, *args[1:])
            assert torch.equal(var.cpu(), expected)
