"""FlexAttention on npu (torch_npu/_flex_attention.py): eager against cpu and
SDPA, autocast, compiled inference, and compiled calls Inductor's C++ template
cannot lower (training, the logsumexp), which take the eager path."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import torch_npu  # noqa: F401  (registers npu)

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _qkv(seed=0, shape=(2, 4, 128, 64)):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g) for _ in range(3)]


def _relative_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.01


def test_eager_equals_cpu_with_score_mod_and_block_mask():
    q, k, v = _qkv()
    cpu_mask = create_block_mask(_causal, 1, 1, 128, 128, device="cpu")
    npu_mask = create_block_mask(_causal, 1, 1, 128, 128, device="npu")
    expected = flex_attention(q, k, v, score_mod=_relative_bias, block_mask=cpu_mask)
    actual = flex_attention(q.npu(), k.npu(), v.npu(), score_mod=_relative_bias, block_mask=npu_mask)
    assert actual.device.type == "npu"
    torch.testing.assert_close(actual.cpu(), expected)


def test_eager_backward_equals_sdpa():
    # CPU's FlexAttention has no backward; SDPA with is_causal is the same function.
    q, k, v = _qkv(1)
    npu_mask = create_block_mask(_causal, 1, 1, 128, 128, device="npu")
    leaves = [t.npu().requires_grad_() for t in (q, k, v)]
    flex_attention(*leaves, block_mask=npu_mask).square().sum().backward()
    refs = [t.clone().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*refs, is_causal=True).square().sum().backward()
    for got, want in zip(leaves, refs):
        torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-5)


def test_autocast_runs_in_the_autocast_dtype():
    q, k, v = (t.npu() for t in _qkv(2, (2, 4, 16, 32)))
    expected = flex_attention(q, k, v)
    with torch.autocast(device_type="npu", dtype=torch.bfloat16):
        actual = flex_attention(q, k, v)
    assert actual.dtype == torch.bfloat16
    torch.testing.assert_close(actual.float(), expected, rtol=2e-2, atol=2e-2)


def test_other_devices_keep_torchs_checks():
    # The npu patch leaves cpu's rule alone: no backward there.
    q, k, v = _qkv(3, (1, 1, 16, 16))
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        flex_attention(q.requires_grad_(), k, v)


def test_compiled_inference_equals_eager():
    # Inductor's C++ FlexAttention template sizes per-thread scratch by the
    # thread count it was generated for; on the stream worker it used to run
    # with every core and write past it (Note [A compiled kernel's OpenMP team]).
    torch._dynamo.reset()
    q, k, v = _qkv(4)
    npu_mask = create_block_mask(_causal, 1, 1, 128, 128, device="npu")
    compiled = torch.compile(flex_attention)
    actual = compiled(q.npu(), k.npu(), v.npu(), block_mask=npu_mask)
    expected = flex_attention(q.npu(), k.npu(), v.npu(), block_mask=npu_mask)
    torch.testing.assert_close(actual.cpu(), expected.cpu(), rtol=1e-4, atol=1e-5)


def test_compiled_training_takes_the_eager_path_with_every_gradient():
    # Inductor's C++ template computes inference only; on npu such a call runs
    # eagerly between compiled graphs (Note [Eager FlexAttention in an npu
    # graph]), and a tensor the score_mod captures still gets its gradient.
    def run(compiled):
        torch._dynamo.reset()
        q, k, v = (t.npu().requires_grad_() for t in _qkv(5, (1, 2, 32, 16)))
        bias = torch.linspace(-1, 1, 32).npu().requires_grad_()
        fn = torch.compile(flex_attention) if compiled else flex_attention
        out = fn(q, k, v, score_mod=lambda score, b, h, q_idx, kv_idx: score + bias[kv_idx])
        out.square().sum().backward()
        return [t.cpu() for t in (out, q.grad, k.grad, v.grad, bias.grad)]

    for got, want in zip(run(compiled=True), run(compiled=False)):
        torch.testing.assert_close(got, want)


def test_compiled_call_asking_for_the_logsumexp_takes_the_eager_path():
    torch._dynamo.reset()
    q, k, v = (t.npu() for t in _qkv(6, (1, 2, 32, 16)))
    npu_mask = create_block_mask(_causal, 1, 1, 32, 32, device="npu")
    out, lse = torch.compile(flex_attention)(q, k, v, block_mask=npu_mask, return_lse=True)
    want_out, want_lse = flex_attention(q.cpu(), k.cpu(), v.cpu(), return_lse=True,
                                        block_mask=create_block_mask(_causal, 1, 1, 32, 32, device="cpu"))
    torch.testing.assert_close(out.cpu(), want_out)
    torch.testing.assert_close(lse.cpu(), want_lse)


def test_compiled_logsumexp_on_cpu_keeps_torchs_refusal():
    torch._dynamo.reset()
    q, k, v = _qkv(7, (1, 1, 16, 16))
    with pytest.raises(Exception, match="only supports inference and `return_lse` is not supported"):
        torch.compile(flex_attention)(q, k, v, return_lse=True)


def test_import_torch_npu_leaves_the_front_end_unimported():
    from conftest import run_python
    r = run_python("""
        import sys, torch, torch_npu
        print("torch.nn.attention.flex_attention" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"
