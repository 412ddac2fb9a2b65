"""torch_npu.op_plugin.activation: the GELU family, Mish/SiLU, SwiGLU/GeGLU, softmax cross
entropy, masked softmax with relative position bias and npu_confusion_transpose (whose
test also checks attention's npu_scaled_masked_softmax), each against its plain-PyTorch
formula, with gradients and bad input."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import DEVICES, npu, rnd


def test_fast_gelu_and_backward():
    x = rnd(3, 16, 32, seed=11) * 4
    want = x * torch.sigmoid(1.702 * x)
    for fn in (torch_npu.fast_gelu, torch_npu.npu_fast_gelu):
        assert_close(fn(npu(x)).cpu(), want, atol=1e-5, rtol=1e-5)
    xr = x.clone().requires_grad_()
    g = rnd(*x.shape, seed=12)
    (want_dx,) = torch.autograd.grad(xr * torch.sigmoid(1.702 * xr), xr, g)
    assert_close(torch_npu.npu_fast_gelu_backward(npu(g), npu(x)).cpu(), want_dx, atol=1e-5, rtol=1e-5)
    xn = npu(x).requires_grad_()
    (dx,) = torch.autograd.grad(torch_npu.fast_gelu(xn), xn, npu(g))
    assert_close(dx.cpu(), want_dx, atol=1e-5, rtol=1e-4)


def test_mish_silu():
    x = rnd(5, 5, seed=13)
    assert_close(torch_npu.npu_mish(npu(x)).cpu(), x * torch.tanh(F.softplus(x)))
    xr = x.clone().requires_grad_()
    g = rnd(5, 5, seed=14)
    (want,) = torch.autograd.grad(F.mish(xr), xr, g)
    assert_close(torch_npu.npu_mish_backward(npu(g), npu(x)).cpu(), want, atol=1e-5, rtol=1e-5)
    assert_close(torch_npu.npu_silu(npu(x)).cpu(), x * torch.sigmoid(x))
    y = npu(x)
    assert torch_npu.npu_silu_(y) is y
    assert_close(y.cpu(), x * torch.sigmoid(x))


def test_softmax_cross_entropy_with_logits():
    logits, labels = rnd(64, 10, seed=15), torch.rand(64, 10, generator=torch.Generator().manual_seed(1))
    want = torch.sum(-labels * torch.log(torch.softmax(logits, 1)), 1)
    ln = npu(logits).requires_grad_()
    got = torch_npu.npu_softmax_cross_entropy_with_logits(ln, npu(labels))
    assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)
    got.sum().backward()
    lr = logits.clone().requires_grad_()
    torch.sum(-labels * F.log_softmax(lr, 1), 1).sum().backward()
    assert_close(ln.grad.cpu(), lr.grad, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="should be \\(N, C\\) of the same shape"):
        torch_npu.npu_softmax_cross_entropy_with_logits(ln, npu(labels[:, :5]))


@pytest.mark.parametrize("activate_left", [False, True])
@pytest.mark.parametrize("approximate", [0, 1])
def test_geglu_grad_matches_autograd(approximate, activate_left):
    x = rnd(2, 10, 16, seed=30)
    xr = x.clone().requires_grad_()
    y, _ = torch_npu.npu_geglu(xr, -1, approximate, activate_left)
    dy = rnd(2, 10, 8, seed=31)
    (want,) = torch.autograd.grad(y, xr, dy)
    _, gelu = torch_npu.npu_geglu(npu(x), -1, approximate, activate_left)
    got = torch_npu.npu_geglu_grad(npu(dy), npu(x), gelu, -1, approximate, activate_left)
    assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)


def test_masked_softmax_with_rel_pos_bias():
    x, bias, mask = rnd(1, 2, 3, 4, 4, seed=32), rnd(1, 1, 3, 4, 4, seed=33), rnd(1, 2, 1, 4, 4, seed=34)
    got = torch_npu.npu_masked_softmax_with_rel_pos_bias(npu(x), npu(mask), npu(bias))
    assert_close(got.cpu(), torch.softmax(x + mask + bias, -1), atol=1e-6, rtol=1e-5)
    got = torch_npu.npu_masked_softmax_with_rel_pos_bias(npu(x), None, npu(bias), scale_value=0.5)
    assert_close(got.cpu(), torch.softmax(0.5 * x + bias, -1), atol=1e-6, rtol=1e-5)


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
