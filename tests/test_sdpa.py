"""scaled_dot_product_attention on npu: ATen's flash kernel (through the
"overrideable" fused backend) wherever it applies, the math path elsewhere;
always equal to cpu, gradients included."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.testing import assert_close

import torch_npu

B, N, S, D = 2, 4, 16, 8


def rnd(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def run(device, q, k, v, **kwargs):
    inputs = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    kwargs = {a: (b.to(device) if isinstance(b, torch.Tensor) else b) for a, b in kwargs.items()}
    out = F.scaled_dot_product_attention(*inputs, **kwargs)
    out.backward(torch.ones_like(out))
    return [t.detach().cpu() for t in [out] + [x.grad for x in inputs]], type(out.grad_fn).__name__


CASES = {
    "plain": ({}, None),
    "causal": (dict(is_causal=True), None),
    "bool_mask": (dict(attn_mask=rnd(S, S, seed=1) > 0), None),
    "float_mask": (dict(attn_mask=rnd(B, 1, S, S, seed=2)), None),  # cast to the query's dtype below
    "scale": (dict(scale=0.2), None),
    "gqa": (dict(enable_gqa=True), 2),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sdpa_takes_the_flash_kernel_and_equals_cpu(name, dtype):
    kwargs, kv_heads = CASES[name]
    q = rnd(B, N, S, D, seed=3).to(dtype)
    k, v = (rnd(B, kv_heads or N, S, D, seed=s).to(dtype) for s in (4, 5))
    if kwargs.get("attn_mask") is not None and kwargs["attn_mask"].is_floating_point():
        kwargs = dict(kwargs, attn_mask=kwargs["attn_mask"].to(dtype))
    want, _ = run("cpu", q, k, v, **kwargs)
    got, grad_fn = run("npu", q, k, v, **kwargs)
    assert grad_fn == "ScaledDotProductFusedAttentionOverrideableBackward0"
    # bfloat16 GQA: cpu sums the repeated heads' key/value gradients in a
    # different order (autograd of repeat_interleave), so allow bf16 rounding.
    tol = dict(atol=1e-6, rtol=1e-5) if dtype == torch.float32 else dict(atol=4e-2, rtol=2e-2)
    for a, b in zip(got, want):
        assert_close(a, b, **tol)


@pytest.mark.parametrize("how", ["dropout", "math_only", "mask_needs_grad"])
def test_sdpa_math_path_where_flash_does_not_apply(how):
    q, k, v = (rnd(B, N, S, D, seed=s).npu() for s in (6, 7, 8))
    if how == "dropout":
        out = F.scaled_dot_product_attention(q.requires_grad_(), k, v, dropout_p=0.3)
        assert "Overrideable" not in type(out.grad_fn).__name__
        return
    if how == "math_only":
        with sdpa_kernel([SDPBackend.MATH]):
            out = F.scaled_dot_product_attention(q.requires_grad_(), k, v)
        assert "Overrideable" not in type(out.grad_fn).__name__
        assert_close(out.cpu(), F.scaled_dot_product_attention(q.detach().cpu(), k.cpu(), v.cpu()))
        return
    mask = rnd(S, S, seed=9).npu().requires_grad_()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.sum().backward()
    cpu_mask = mask.detach().cpu().requires_grad_()
    F.scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu(), attn_mask=cpu_mask).sum().backward()
    assert_close(mask.grad.cpu(), cpu_mask.grad, atol=1e-5, rtol=1e-4)


def test_sdpa_long_causal_sequence_memory_is_linear():
    s = 8192
    q = torch.randn(1, 1, s, 16, device="npu", dtype=torch.bfloat16)
    torch.npu.synchronize()
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    torch.npu.synchronize()
    assert out.shape == q.shape
    # The math path would hold an 8192 x 8192 score matrix (128 MiB in bf16).
    assert torch.npu.max_memory_allocated() - base < 16 * 2**20


def test_sdpa_argument_errors_are_atens():
    q = torch.randn(B, N, S, D)
    k = torch.randn(B + 1, N, S, D)
    with pytest.raises(RuntimeError) as cpu_err:
        F.scaled_dot_product_attention(q, k, k)
    with pytest.raises(RuntimeError) as npu_err:
        F.scaled_dot_product_attention(q.npu(), k.npu(), k.npu())
    assert str(npu_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]


def test_flop_counter_counts_npu_attention_as_cuda_flash_and_math_only_takes_the_math_path():
    from torch.utils.flop_counter import FlopCounterMode

    q = torch.randn(2, 4, 64, 32, dtype=torch.float16).npu().requires_grad_()

    def flops(with_backward, **switches):
        mode = FlopCounterMode(display=False)
        with torch_npu.npu.sdp_kernel(**switches), mode:
            out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
            if with_backward:
                out.sum().backward()
        return mode.get_total_flops()

    math_only = dict(enable_flash=False, enable_math=True, enable_mem_efficient=False)
    flash = dict(enable_flash=True, enable_math=False, enable_mem_efficient=False)
    forward = 2 * 2 * (2 * 4 * 64 * 64 * 32)  # QK^T and PV, causal not discounted (torch's formula)
    assert flops(False, **math_only) == flops(False, **flash) == forward
    assert flops(True, **math_only) == 3 * forward  # bmm backward: two matmuls per forward one
    assert flops(True, **flash) == 7 * forward // 2  # torch's flash backward formula


def test_sdpa_kernel_overrideable_runs_the_npu_kernel_and_math_the_math_path():
    # torch.nn.attention.sdpa_kernel(SDPBackend.OVERRIDEABLE) turns flash, efficient and math off: the npu
    # kernel is what it asks for (real torch_npu's context-parallel tests run under it)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(func)
            return func(*args, **(kwargs or {}))

    q = torch.randn(2, 4, 16, 8).npu()
    for backend, expect_kernel in ((SDPBackend.OVERRIDEABLE, True), (SDPBackend.MATH, False)):
        Ops.seen = []
        with sdpa_kernel(backend), Ops():
            out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        ran = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default in Ops.seen
        assert ran == expect_kernel, (backend, Ops.seen)
        torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q.cpu(), q.cpu(), q.cpu(),
                                                                             is_causal=True))


def test_cuda_flash_operator_by_name_equals_sdpa_and_agrees_with_fake_tensor():
    # aten::_scaled_dot_product_flash_attention, as graphs traced on CUDA call it
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, n, 8, dtype=torch.float32).requires_grad_() for n in (16, 12, 12))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref.sum().backward()
    qn, kn, vn = (t.detach().npu().requires_grad_() for t in (q, k, v))
    outputs = torch.ops.aten._scaled_dot_product_flash_attention(qn, kn, vn, is_causal=True)
    assert_close(outputs[0].cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    outputs[0].sum().backward()
    for got, want in ((qn, q), (kn, k), (vn, v)):
        assert_close(got.grad.cpu(), want.grad, atol=1e-5, rtol=1e-5)
    # every output as its meta function describes it
    with torch._subclasses.CrossRefFakeMode():
        torch.ops.aten._scaled_dot_product_flash_attention(qn.detach(), kn.detach(), vn.detach())
    with pytest.raises(RuntimeError, match="dropout_p=0.1 is not supported on vNPU"):
        torch.ops.aten._scaled_dot_product_flash_attention(qn, kn, vn, 0.1)
