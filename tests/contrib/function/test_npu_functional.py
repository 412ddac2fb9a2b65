"""torch_npu.contrib.function.npu_functional: dropout_with_byte_mask (and its module form)."""

import pytest
import torch
from torch.testing import assert_close

from torch_npu.contrib import function as cf
from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_dropout_with_byte_mask_and_module(p):
    x = rnd(64, 64, seed=71).to(NPU).requires_grad_()
    torch.manual_seed(1)
    out = cf.dropout_with_byte_mask(x, p, training=True)
    kept = out.detach() != 0
    if p == 0.:
        assert torch.equal(out.detach().cpu(), x.detach().cpu())
    elif p == 1.:
        assert not kept.any()
    else:
        assert abs(kept.float().mean().item() - (1 - p)) < 0.05
        assert_close(out.detach()[kept].cpu(), (x.detach()[kept] / (1 - p)).cpu())
    out.sum().backward()
    if p < 1.:
        assert_close(x.grad.cpu(), (kept.float() / (1 - p)).cpu())
    module = cm.DropoutWithByteMask(p).eval()
    assert module(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        cf.dropout_with_byte_mask(x, 1.5)
    with pytest.raises(ValueError, match="no-inplace"):
        cf.dropout_with_byte_mask(x, 0.5, inplace=True)
    with pytest.raises(ValueError, match="between 0 and 1"):
        cm.DropoutWithByteMask(-0.1)


def test_dropout_with_byte_mask_module_in_training_equals_the_function():
    x = rnd(32, 32, seed=72).to(NPU)
    module = cm.DropoutWithByteMask(0.25)
    assert module.training and module.max_seed == 1023 and "p=0.25" in repr(module)
    torch.manual_seed(5)
    got = module(x)
    torch.manual_seed(5)
    want = cf.dropout_with_byte_mask(x, 0.25, training=True)
    assert torch.equal(got.cpu(), want.cpu())
    kept = want != 0
    assert_close(want[kept].cpu(), (x[kept] / 0.75).cpu())
    with pytest.raises(ValueError, match="no-inplace"):
        cm.DropoutWithByteMask(0.25, inplace=True)(x)
