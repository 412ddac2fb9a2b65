"""torch_npu.contrib.module.roi_align: ROIAlign against real torch_npu's values and
gradients, linearity, and cpu/npu agreement."""

import pytest
import torch
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


def test_roi_align_values_and_grad_of_real_test():
    feature = torch.arange(1, 37, dtype=torch.float32).reshape(1, 1, 6, 6)
    roi = torch.tensor([[0, -2.0, -2.0, 22.0, 22.0]])
    expect = {False: torch.tensor([[[[4.5, 6.5, 8.5], [16.5, 18.5, 20.5], [28.5, 30.5, 32.5]]]]),
              True: torch.tensor([[[[2.75, 4.5, 6.5], [13.25, 15.0, 17.0], [25.25, 27.0, 29.0]]]])}
    for aligned in (False, True):
        x = feature.clone().to(NPU).requires_grad_()
        out = cm.ROIAlign((3, 3), 0.25, 2, aligned=aligned).to(NPU)(x, roi.to(NPU))
        assert_close(out.detach().cpu(), expect[aligned])
        out.sum().backward()
        assert_close(x.grad.sum().cpu(), torch.tensor(9.0))  # each bin's weights sum to 1
    assert_close(x.grad[0, 0, 0].cpu(), torch.tensor([0.5625, 0.375, 0.375, 0.375, 0.375, 0.1875]))


def test_roi_align_is_linear_in_input_and_checks_rois():
    x = rnd(2, 3, 9, 8, seed=111)
    rois = torch.tensor([[0, 1.0, 1.5, 6.0, 7.0], [1, 0.0, 0.0, 7.9, 8.9], [1, 3.3, 2.2, 3.4, 2.3]])
    for aligned, ratio in ((True, 2), (False, 0), (True, 0)):
        m = cm.ROIAlign((2, 3), 1.0, ratio, aligned=aligned)
        out = m(x.to(NPU), rois.to(NPU))
        assert out.shape == (3, 3, 2, 3)
        assert_close(m(x.to(NPU) * 2 + 1, rois.to(NPU)).cpu(), (out * 2 + 1).cpu(), atol=1e-5, rtol=1e-5)
        assert_close(m(x, rois), out.cpu(), atol=1e-6, rtol=1e-6)  # cpu and npu agree
    with pytest.raises(ValueError, match="rois"):
        cm.ROIAlign((2, 2), 1.0, 2)(x, rois[:, :4])
