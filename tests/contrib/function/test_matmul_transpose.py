"""torch_npu.contrib.function.matmul_transpose against a @ b^T, with gradients."""

import pytest
from torch.testing import assert_close

from torch_npu.contrib import function as cf

from contrib.inputs import NPU, rnd


@pytest.mark.parametrize("shapes", [((2, 3, 5, 4), (2, 3, 7, 4)), ((2, 1, 5, 4), (3, 7, 4))])
def test_matmul_transpose_and_grad(shapes):
    a, b = rnd(*shapes[0], seed=1), rnd(*shapes[1], seed=2)
    na, nb = (t.clone().to(NPU).requires_grad_() for t in (a, b))
    ra, rb = (t.clone().requires_grad_() for t in (a, b))
    out = cf.matmul_transpose(na, nb)
    ref = ra @ rb.transpose(-2, -1)
    assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    g = rnd(*ref.shape, seed=3)
    out.backward(g.to(NPU))
    ref.backward(g)
    assert_close(na.grad.cpu(), ra.grad, atol=1e-5, rtol=1e-5)
    assert_close(nb.grad.cpu(), rb.grad, atol=1e-5, rtol=1e-5)
