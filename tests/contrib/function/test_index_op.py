"""torch_npu.contrib.function.index_op: npu_fast_condition_index_put against index_put."""

import pytest
from torch.testing import assert_close

from torch_npu.contrib import function as cf

from contrib.inputs import NPU, rnd


@pytest.mark.parametrize("value", [0., 1., 2.5])
def test_npu_fast_condition_index_put(value):
    x = rnd(6, 7, seed=51).to(NPU).requires_grad_()
    cond = x.detach() < 0.5
    out = cf.npu_fast_condition_index_put(x, cond, value)
    ref = x.detach().cpu().clone()
    ref[cond.cpu()] = value
    assert_close(out.detach().cpu(), ref)
    out.sum().backward()
    assert_close(x.grad.cpu(), (~cond).float().cpu())
    with pytest.raises(TypeError, match="bool"):
        cf.npu_fast_condition_index_put(x, cond.int(), value)


def test_npu_fast_condition_index_put_is_out_of_place_and_broadcasts_the_mask():
    import torch
    x = rnd(6, 7, seed=52, dtype=torch.float16).to(NPU)
    before = x.clone()
    cond = (rnd(1, 7, seed=53) > 0).to(NPU)
    out = cf.npu_fast_condition_index_put(x, cond, -3.)
    assert torch.equal(x.cpu(), before.cpu()) and out.dtype == torch.float16
    ref = before.cpu().clone()
    ref[cond.cpu().expand(6, 7)] = -3.
    assert torch.equal(out.cpu(), ref)
