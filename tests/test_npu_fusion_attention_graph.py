"""torch_npu.npu_fusion_attention_graph: the fused attention as graph operators
(npu_graph::npu_fa / npu_fa_backward), equal to npu_fusion_attention and its
gradient, traced whole by torch.compile."""

import pytest
import torch

import torch_npu
from torch_npu._inductor.fx_passes.pattern_match.npu_fusion_attention_graph import (
    NpuGraphAttentionFunction, npu_fusion_attention_graph)


def qkv(layout="BNSD", requires_grad=True):
    torch.manual_seed(0)
    shape = (2, 4, 8, 16) if layout == "BNSD" else (2, 8, 64)
    return [torch.randn(shape).npu().requires_grad_(requires_grad) for _ in range(3)]


@pytest.mark.parametrize("layout", ["BNSD", "BSH"])
def test_forward_and_gradients_equal_npu_fusion_attention(layout):
    q, k, v = qkv(layout)
    out = npu_fusion_attention_graph(q, k, v, 4, layout, scale=4.0)  # scale divides: 1 / 4
    grads = torch.autograd.grad(out[0].sum(), (q, k, v))
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    ref = torch_npu.npu_fusion_attention(q2, k2, v2, 4, layout, scale=0.25)
    ref_grads = torch.autograd.grad(ref[0].sum(), (q2, k2, v2))
    for got, want in zip(out[:4], ref[:4]):
        torch.testing.assert_close(got.cpu(), want.cpu())
    assert [int(t) for t in out[4:]] == list(ref[4:])  # seed, offset, numels as tensors
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-4, atol=1e-5)


def test_compiled_whole_and_equal_to_eager():
    from torch._dynamo.testing import CompileCounterWithBackend
    q, k, v = qkv()
    counter = CompileCounterWithBackend("aot_eager")
    f = lambda q, k, v: NpuGraphAttentionFunction.apply(q, k, v, 4, "BNSD")[0] * 2  # noqa: E731
    compiled = torch.compile(f, backend=counter, fullgraph=True)
    got, want = compiled(q, k, v), f(q, k, v)
    torch.testing.assert_close(got.cpu(), want.cpu())
    torch.testing.assert_close(torch.autograd.grad(got.sum(), q)[0].cpu(), torch.autograd.grad(want.sum(), q)[0].cpu())
    assert counter.frame_count == 1


def test_meta_kernels_give_the_shapes():
    q = torch.empty(2, 6, 64, device="meta")  # BSH: B 2, S 6, N 4
    out = torch.ops.npu_graph.npu_fa(q, q, q, 4, "BSH")
    assert [tuple(t.shape) for t in out] == [(2, 6, 64), (2, 4, 6, 8), (2, 4, 6, 8), (0,), (1,), (1,), (1,)]
    dq, dk, dv, dpse, dsink = torch.ops.npu_graph.npu_fa_backward(q, q, q, q, 4, "BSH")
    assert dq.shape == q.shape and dpse is None and dsink.shape == ()


def test_the_name_on_torch_npu():
    assert torch_npu.npu_fusion_attention_graph is npu_fusion_attention_graph
