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


@pytest.mark.parametrize("output_dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_quant_conv2d_geometry_and_zero_point(output_dtype):
    # stride, dilation, groups and a non-zero offset_x, against the formula on cpu
    x, w = rand_int((2, 4, 9, 8), -5, 5, 211), rand_int((6, 2, 3, 2), -5, 5, 212)
    bias, scale = rand_int((6,), -30, 30, 213, torch.int32), rnd(6, seed=214, low=0.05, high=0.2)
    model = cm.QuantConv2d(4, 6, (3, 2), output_dtype, stride=(2, 1), padding=(1, 2), dilation=(1, 2),
                           groups=2, offset_x=-3).to(NPU)
    assert model.kernel_size == (3, 2) and model.stride == (2, 1) and model.padding == (1, 2)
    assert model.weight.shape == (6, 2, 3, 2) and not model.weight.requires_grad and model.offset is None
    model.weight.data, model.bias.data, model.scale.data = w.to(NPU), bias.to(NPU), scale.to(NPU)
    padded = F.pad(x.double(), (2, 2, 1, 1), value=-3.)
    acc = F.conv2d(padded, w.double(), bias.double(), stride=(2, 1), dilation=(1, 2), groups=2)
    want = (acc.float() * scale.view(1, 6, 1, 1)).to(output_dtype)
    out = model(x.to(NPU))
    assert out.dtype == output_dtype
    assert_close(out.cpu(), want)


def test_quant_conv2d_matches_npu_quant_conv2d_without_bias():
    # On the operator's own ground (float16 out, int64 scales) the module and the operator agree. Without
    # bias: the module's documented formula adds bias before scaling, vNPU's npu_quant_conv2d after it.
    import torch_npu
    x, w = rand_int((1, 2, 7, 7), -8, 8, 221), rand_int((4, 2, 3, 3), -8, 8, 222)
    scale = torch_npu.npu_trans_quant_param(rnd(4, seed=224, low=0.01, high=0.1).to(NPU))
    model = cm.QuantConv2d(2, 4, 3, torch.float16, stride=2, padding=1, bias=False, offset_x=5).to(NPU)
    model.weight.data, model.scale.data = w.to(NPU), scale
    want = torch_npu.npu_quant_conv2d(x.to(NPU), w.to(NPU), scale, strides=[2, 2], pads=[1, 1], offset_x=5,
                                      output_dtype=torch.float16)
    assert_close(model(x.to(NPU)).cpu(), want.cpu())


def test_quant_conv2d_rejects_what_vnpu_cannot_compute():
    with pytest.raises(RuntimeError, match="offset"):
        cm.QuantConv2d(2, 3, 3, torch.float16, offset=True)
    with pytest.raises(RuntimeError, match="round_mode 'round'"):
        cm.QuantConv2d(2, 3, 3, torch.float16, round_mode="round")
