"""torch_npu.contrib.module.linear_weight_quant: LinearWeightQuant against dequantise-then-matmul."""

import pytest
import torch
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rand_int, rnd


def test_linear_weight_quant():
    x = rnd(4, 32, seed=191, dtype=torch.float16)
    w = rand_int((32, 6), -5, 5, 192)
    scale, offset, bias = rnd(6, seed=193, dtype=torch.float16), rnd(6, seed=194, dtype=torch.float16), rnd(6, seed=195)
    model = cm.LinearWeightQuant(32, 6, bias=True, device=torch.device(NPU), antiquant_offset=True)
    model.weight.data, model.antiquant_scale.data = w.to(NPU), scale.to(NPU)
    model.antiquant_offset.data, model.bias.data = offset.to(NPU), bias.to(NPU)
    out = model(x.to(NPU))
    want = x.float() @ ((w.half() + offset) * scale).float() + bias  # dequantised in x's dtype
    assert out.dtype == torch.float16
    assert_close(out.cpu().float(), want.half().float(), atol=1e-2, rtol=1e-2)
    grouped = cm.LinearWeightQuant(32, 6, bias=False, antiquant_group_size=8)
    group_scale = rnd(4, 6, seed=196)
    grouped.weight.data, grouped.antiquant_scale.data = w, group_scale
    want = x.float() @ (w.float() * group_scale.repeat_interleave(8, 0))
    assert_close(grouped(x.float()), want, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="in_features"):
        grouped(x.float()[:, :16])
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        cm.LinearWeightQuant(32, 6, weight_dtype=torch.float8_e4m3fn)
