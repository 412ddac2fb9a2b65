"""torch_npu.op_plugin.norm: npu_rms_norm, its backward and npu_add_rms_norm against the
RMSNorm formula on cpu and npu."""

import pytest
import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import DEVICES, rnd


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
