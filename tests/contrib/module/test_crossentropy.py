"""torch_npu.contrib.module.crossentropy: LabelSmoothingCrossEntropy against its formula and
real torch_npu's value."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


@pytest.mark.parametrize("smooth", [0.0, 0.1])
def test_label_smoothing_cross_entropy(smooth):
    pred = rnd(4, 10, seed=101)
    target = torch.tensor([1., 0., 9., 3.])
    a = pred.clone().to(NPU).requires_grad_()
    loss = cm.LabelSmoothingCrossEntropy(10, smooth)(a, target.to(NPU))
    r = pred.clone().requires_grad_()
    ref = F.cross_entropy(r, target.long(), label_smoothing=0.0)
    if smooth:  # off-value s/(C-1) on wrong classes: not torch's s/C spread, build it explicitly
        t = torch.full((4, 10), smooth / 9).scatter_(1, target.long()[:, None], 1 - smooth)
        ref = -(t * torch.log_softmax(r, 1)).sum(1).mean()
    assert loss.dtype == torch.float32 and loss.dim() == 0
    assert_close(loss.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    loss.backward()
    ref.backward()
    assert_close(a.grad.cpu(), r.grad, atol=1e-6, rtol=1e-5)


def test_label_smoothing_cross_entropy_values_of_real_test():
    np.random.seed(123)
    x = torch.tensor(np.random.randn(2, 10), dtype=torch.float32).to(NPU).requires_grad_()
    y = torch.tensor(np.random.randint(low=0, high=10, size=(2,)), dtype=torch.float32).to(NPU)
    loss = cm.LabelSmoothingCrossEntropy(10)(x, y)
    assert_close(loss.detach().cpu(), torch.tensor(3.8078), atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="pred"):
        cm.LabelSmoothingCrossEntropy(10)(x[:, :5], y)


def test_label_smoothing_cross_entropy_half_logits_give_a_float32_mean():
    pred = rnd(6, 5, seed=102)
    target = torch.tensor([0, 4, 2, 2, 1, 3])
    loss = cm.LabelSmoothingCrossEntropy(5, 0.2)(pred.half().to(NPU), target.to(NPU))
    t = torch.full((6, 5), 0.2 / 4).scatter_(1, target[:, None], 0.8)
    ref = -(t * torch.log_softmax(pred, 1)).sum(1).mean()
    assert loss.dtype == torch.float32
    assert_close(loss.cpu(), ref, atol=2e-3, rtol=2e-3)
    with pytest.raises(ValueError, match="at least 2"):
        cm.LabelSmoothingCrossEntropy(1)
