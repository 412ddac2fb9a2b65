"""torch_npu.contrib.module.activations: Mish, SiLU and Swish against their formulas."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


@pytest.mark.parametrize("cls, formula", [(cm.Mish, lambda x: x * torch.tanh(F.softplus(x))),
                                          (cm.SiLU, lambda x: x * torch.sigmoid(x)),
                                          (cm.Swish, lambda x: x * torch.sigmoid(x))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_activations(cls, formula, dtype):
    x = rnd(2, 5, 6, seed=81, dtype=dtype)
    with pytest.warns(FutureWarning, match="deprecated"):
        m = cls()
    a = x.clone().to(NPU).requires_grad_()
    out = m(a)
    r = x.float().requires_grad_()
    ref = formula(r)
    assert out.dtype == dtype
    tol = 1e-3 if dtype == torch.float16 else 1e-5
    assert_close(out.detach().cpu().float(), ref.detach(), atol=tol, rtol=tol)
    out.sum().backward()
    ref.sum().backward()
    assert_close(a.grad.cpu().float(), r.grad, atol=tol * 3, rtol=tol * 3)


def test_a_subclass_of_an_activation_computes_it():
    class Scaled(cm.Mish):  # a user's subclass keeps mish's arithmetic
        def forward(self, x):
            return 2 * super().forward(x)

    with pytest.warns(FutureWarning, match=r"torch_npu.contrib.module.Mish is deprecated. Please use torch.nn.Mish"):
        m = Scaled()
    x = rnd(7, seed=82)
    assert_close(m(x.to(NPU)).cpu(), 2 * x * torch.tanh(F.softplus(x)), atol=1e-5, rtol=1e-5)
