"""torch_npu.op_plugin.dense: npu_linear, npu_bmmV2 and the convolutions against
torch.nn.functional on cpu, with gradients and bad input (the linear test starts with
norm's npu_layer_norm_eval)."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import npu, rnd


def test_layer_norm_eval_linear_bmm():
    x, w, b = rnd(6, 4, seed=16), rnd(4, seed=17), rnd(4, seed=18)
    assert_close(torch_npu.npu_layer_norm_eval(npu(x), [4], npu(w), npu(b), 1e-5).cpu(),
                 torch.native_layer_norm(x, [4], w, b, 1e-5)[0], atol=1e-5, rtol=1e-5)
    wl, bl = rnd(3, 4, seed=19), rnd(3, seed=20)
    xn = npu(x).requires_grad_()
    out = torch_npu.npu_linear(xn, npu(wl), npu(bl))
    assert_close(out.cpu(), F.linear(x, wl, bl), atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert_close(xn.grad.cpu(), wl.sum(0).expand(6, 4), atol=1e-5, rtol=1e-5)
    a, m = rnd(10, 3, 4, seed=21), rnd(10, 4, 5, seed=22)
    assert_close(torch_npu.npu_bmmV2(npu(a), npu(m), []).cpu(), a @ m, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="does not match the product's shape"):
        torch_npu.npu_bmmV2(npu(a), npu(m), [10, 3, 6])


def test_convolutions():
    x, w, b = rnd(2, 4, 9, 9, seed=23), rnd(6, 4, 3, 3, seed=24), rnd(6, seed=25)
    want = F.conv2d(x, w, b, [1, 2], [1, 1], [1, 1], 1)
    for fn in (torch_npu.npu_conv2d, torch_npu.npu_convolution):
        assert_close(fn(npu(x), npu(w), npu(b), [1, 2], [1, 1], [1, 1], 1).cpu(), want, atol=1e-4, rtol=1e-4)
    x3, w3 = rnd(1, 2, 5, 5, 5, seed=26), rnd(3, 2, 3, 3, 3, seed=27)
    assert_close(torch_npu.npu_conv3d(npu(x3), npu(w3), None, [1, 1, 1], [0, 0, 0], [1, 1, 1], 1).cpu(),
                 F.conv3d(x3, w3), atol=1e-4, rtol=1e-4)
    wt = rnd(4, 2, 3, 3, seed=28)
    want = F.conv_transpose2d(x, wt, None, [2, 2], [1, 1], [1, 1], 1, [1, 1])
    for fn in (torch_npu.npu_conv_transpose2d, torch_npu.npu_convolution_transpose):
        assert_close(fn(npu(x), npu(wt), None, [1, 1], [1, 1], [2, 2], [1, 1], 1).cpu(), want,
                     atol=1e-4, rtol=1e-4)
    xn = npu(x).requires_grad_()
    torch_npu.npu_conv2d(xn, npu(w), None, [1, 1], [0, 0], [1, 1], 1).sum().backward()
    xr = x.clone().requires_grad_()
    F.conv2d(xr, w).sum().backward()
    assert_close(xn.grad.cpu(), xr.grad, atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="npu_conv2d: input should be NCHW"):
        torch_npu.npu_conv2d(npu(x3), npu(w3), None, [1, 1], [0, 0], [1, 1], 1)
