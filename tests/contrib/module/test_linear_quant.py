"""torch_npu.contrib.module.linear_quant: LinearQuant (and linear_a8w8_quant's LinearA8W8Quant,
the same formula) against the integer formula, int4 packing and errors."""

import pytest
import torch
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rand_int, rnd


@pytest.mark.parametrize("output_dtype", [None, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cls", ["LinearQuant", "LinearA8W8Quant"])
def test_linear_quant_int8(cls, output_dtype):
    x, w = rand_int((3, 16), -8, 8, 1), rand_int((5, 16), -8, 8, 2)
    scale, offset = rnd(5, seed=3, low=0.01, high=0.05), rnd(5, seed=4)
    bias = rand_int((5,), -20, 20, 5, torch.int32)
    if cls == "LinearQuant":
        model = cm.LinearQuant(16, 5, bias=True, offset=output_dtype is None, output_dtype=output_dtype)
    else:
        model = cm.LinearA8W8Quant(16, 5, bias=True, offset=output_dtype is None, output_dtype=output_dtype)
    model = model.to(NPU)
    model.weight.data, model.scale.data, model.bias.data = w.to(NPU), scale.to(NPU), bias.to(NPU)
    if output_dtype is None:
        model.offset.data = offset.to(NPU)
    out = model(x.to(NPU))
    acc = (x.long() @ w.long().t() + bias.long()).float() * scale
    if output_dtype is None:
        want = torch.round(acc + offset).clamp(-128, 127).to(torch.int8)
        assert out.dtype == torch.int8 and torch.equal(out.cpu(), want)
    else:
        assert out.dtype == output_dtype
        assert_close(out.cpu().float(), acc.to(output_dtype).float())


def test_linear_quant_int4_packed_and_errors():
    x4, w4 = rand_int((2, 16), -8, 8, 6), rand_int((3, 16), -8, 8, 7)

    def pack(t):  # eight signed nibbles per int32, lowest first
        nib = (t.to(torch.int64) & 0xF).view(t.shape[0], -1, 8)
        word = (nib << (torch.arange(8) * 4)).sum(-1)
        return torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)

    model = cm.LinearQuant(2, 3, bias=False, output_dtype=torch.float16).to(NPU)
    model.weight.data, model.scale.data = pack(w4).to(NPU), torch.tensor([0.5]).to(NPU)
    out = model(pack(x4).to(NPU))
    assert_close(out.cpu(), ((x4.long() @ w4.long().t()).float() * 0.5).half())
    with pytest.raises(ValueError, match="both torch.int32 or both torch.int8"):
        model(x4.to(NPU))
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        bad = cm.LinearQuant(16, 3, bias=False, output_dtype=torch.float32)
        bad.weight.data, bad.scale.data = w4, torch.ones(1)
        bad(x4)


def test_int32_output_is_the_accumulator_in_linear_quant_only():
    x, w = rand_int((3, 16), -8, 8, 1), rand_int((5, 16), -8, 8, 2)
    bias = rand_int((5,), -20, 20, 5, torch.int32)
    model = cm.LinearQuant(16, 5, bias=True, output_dtype=torch.int32).to(NPU)
    model.weight.data, model.scale.data, model.bias.data = w.to(NPU), torch.full((5,), 0.5).to(NPU), bias.to(NPU)
    out = model(x.to(NPU))
    assert out.dtype == torch.int32 and torch.equal(out.cpu(), x.int() @ w.int().t() + bias)
    with pytest.warns(FutureWarning, match="LinearA8W8Quant is deprecated"):
        old = cm.LinearA8W8Quant(16, 5, bias=False, pertoken_scale=True, output_dtype=torch.int32).to(NPU)
    old.weight.data, old.scale.data = w.to(NPU), torch.full((5,), 0.5).to(NPU)
    with pytest.raises(ValueError, match="output_dtype should be torch.int8, torch.float16 or torch.bfloat16"):
        old(x.to(NPU))


def test_a8w8_pertoken_scale_scales_each_row():
    x, w = rand_int((3, 16), -8, 8, 1), rand_int((5, 16), -8, 8, 2)
    pertoken = rnd(3, seed=6, low=0.5, high=1.5)
    model = cm.LinearA8W8Quant(16, 5, bias=False, pertoken_scale=True, output_dtype=torch.bfloat16).to(NPU)
    model.weight.data, model.scale.data = w.to(NPU), torch.full((5,), 0.25).to(NPU)
    model.pertoken_scale.data = pertoken.to(NPU)
    want = ((x.long() @ w.long().t()).float() * 0.25 * pertoken.unsqueeze(-1)).bfloat16()
    assert_close(model(x.to(NPU)).cpu(), want)
