"""torch_npu.contrib.function.roll against torch.roll, with its gradient."""

import pytest
import torch

from torch_npu.contrib import function as cf

from contrib.inputs import NPU, rnd


@pytest.mark.parametrize("shifts", [(-3, -3), (2, 5), (0, -1)])
def test_roll_matches_torch_roll_with_grad(shifts):
    x = rnd(2, 7, 6, 3, seed=61)
    a = x.clone().to(NPU).requires_grad_()
    out = cf.roll(a, shifts=shifts, dims=(1, 2))
    assert torch.equal(out.detach().cpu(), torch.roll(x, shifts, (1, 2)))
    g = rnd(*x.shape, seed=62)
    out.backward(g.to(NPU))
    assert torch.equal(a.grad.cpu(), torch.roll(g, tuple(-s for s in shifts), (1, 2)))
    for bad in ((x[0], shifts, (1, 2)), (x, (1,), (1, 2)), (x, shifts, (1,))):
        with pytest.raises(ValueError, match="Expected"):
            cf.roll(*bad)
