"""torch_npu.contrib.module.quant_conv2d: QuantConv2d against an integer convolution."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rand_int, rnd


def test_quant_conv2d():
    x, w = rand_int((1, 2, 6, 6), -4, 4, 201), rand_int((3, 2, 3, 3), -4, 4, 202)
    bias, scale = rand_int((3,), -10, 10, 203, torch.int32), rnd(3, seed=204, low=0.1, high=0.2)
    model = cm.QuantConv2d(2, 3, 3, torch.float16, padding=1).to(NPU)
    model.weight.data, model.bias.data = w.to(NPU), bias.to(NPU)
    model.scale.data = scale.view(torch.int32).to(torch.int64).to(NPU)  # npu_trans_quant_param's int64 form
    out = model(x.to(NPU))
    want = (F.conv2d(x.double(), w.double(), bias.double(), padding=1).float() * scale.view(1, 3, 1, 1)).half()
    assert out.dtype == torch.float16 and out.shape == (1, 3, 6, 6)
    assert_close(out.cpu(), want)
    model.scale.data = scale.to(NPU)  # float32 scales work as they are
    assert_close(model(x.to(NPU)).cpu(), want)
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        cm.QuantConv2d(2, 3, 3, torch.int8)
    with pytest.raises(ValueError, match="int8"):
        model(x.float().to(NPU))
