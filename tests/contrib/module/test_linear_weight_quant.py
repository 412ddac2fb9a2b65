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


def test_linear_weight_quant_requantised_and_linear_layout_against_cpu():
    # quant_scale / quant_offset requantise to int8; an nn.Linear-shaped (n, k) weight is read transposed
    x = rnd(3, 16, seed=197) * 4
    w = rand_int((16, 5), -7, 7, 198)
    scale, bias = rnd(5, seed=199, low=0.5, high=1.5), rnd(5, seed=200)
    qscale, qoffset = rnd(5, seed=201, low=0.5, high=2.), rnd(5, seed=202, low=-3, high=3)
    model = cm.LinearWeightQuant(16, 5, bias=True, quant_scale=True, quant_offset=True).to(NPU)
    assert [name for name, _ in model.named_parameters()] == \
        ["weight", "antiquant_scale", "quant_scale", "quant_offset", "bias"]
    model.weight.data, model.antiquant_scale.data, model.bias.data = w.t().contiguous().to(NPU), scale.to(NPU), \
        bias.to(NPU)
    model.quant_scale.data, model.quant_offset.data = qscale.to(NPU), qoffset.to(NPU)
    acc = x @ (w.float() * scale) + bias
    want = torch.round(acc * qscale + qoffset).clamp(-128, 127).to(torch.int8)
    out = model(x.to(NPU))
    assert out.dtype == torch.int8
    assert (out.cpu().int() - want.int()).abs().max() <= 1  # a rounding step at most (float32 sums)


@pytest.mark.parametrize("group_size", [0, 32])  # per column; per 32 rows, the last group short
def test_linear_weight_quant_matches_npu_weight_quant_batchmatmul(group_size):
    import torch_npu
    x = rnd(4, 80, seed=203, dtype=torch.float16)
    w = rand_int((80, 6), -8, 8, 204)
    rows = 3 if group_size else None
    scale = rnd(*((rows, 6) if rows else (6,)), seed=205, low=0.02, high=0.1, dtype=torch.float16)
    offset = rnd(*((rows, 6) if rows else (6,)), seed=206, dtype=torch.float16)
    model = cm.LinearWeightQuant(80, 6, bias=False, antiquant_offset=True, antiquant_group_size=group_size).to(NPU)
    model.weight.data, model.antiquant_scale.data, model.antiquant_offset.data = \
        w.to(NPU), scale.to(NPU), offset.to(NPU)
    want = torch_npu.npu_weight_quant_batchmatmul(x.to(NPU), w.to(NPU), scale.to(NPU), antiquant_offset=offset.to(NPU),
                                                  antiquant_group_size=group_size)
    assert_close(model(x.to(NPU)).cpu(), want.cpu())
