"""torch_npu.op_plugin.scatter: npu_scatter_nd_update and npu_quant_scatter against index
formulas, their in-place forms under functionalization and torch.compile, and bad input."""

import pytest
import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen, rnd


def test_scatter_nd_update_matches_index_formula():
    var = rnd(6, 5, 4, seed=1)
    indices = torch.tensor([[1, 0], [4, 3], [0, 4]], dtype=torch.int32)
    updates = rnd(3, 4, seed=2)
    expected = var.clone()
    for row, upd in zip(indices.tolist(), updates):
        expected[tuple(row)] = upd
    assert_close(torch_npu.npu_scatter_nd_update(var.npu(), indices.npu(), updates.npu()).cpu(), expected)
    in_place = var.half().npu()
    result = torch_npu.npu_scatter_nd_update_(in_place, indices[:, :1].contiguous().npu(),
                                              rnd(3, 5, 4, seed=3).half().npu())
    assert result is in_place
    ref = var.half().clone()
    ref[indices[:, 0].long()] = rnd(3, 5, 4, seed=3).half()
    assert torch.equal(in_place.cpu(), ref)


def test_scatter_nd_update_bad_input():
    var = torch.zeros(6, 4).npu()
    with pytest.raises(RuntimeError, match="updates should have shape"):
        torch_npu.npu_scatter_nd_update(var, torch.zeros(2, 1, dtype=torch.int32).npu(), torch.zeros(2, 5).npu())
    with pytest.raises(RuntimeError, match="integer"):
        torch_npu.npu_scatter_nd_update(var, torch.zeros(2, 1).npu(), torch.zeros(2, 4).npu())


def quant_scatter_reference(x, batch, start, updates, scales, zero_points):
    q = torch.round(updates.float() / scales.float() + (0 if zero_points is None else zero_points.float()))
    q = q.clamp(-128, 127).to(torch.int8)
    out = x.clone()
    for m, (b, s) in enumerate(zip(batch, start)):
        out[b, s:s + updates.shape[1]] = q[m]
    return out


@pytest.mark.parametrize("two_d", [False, True])
def test_quant_scatter_matches_quantise_then_update(two_d):
    x = torch.randint(-128, 128, (3, 10, 32), generator=gen(1), dtype=torch.int8)
    updates = (rnd(2, 3, 32, seed=2) * 40).to(torch.bfloat16)
    scales = (torch.rand(1, 1, 32, generator=gen(3)) + 0.5).to(torch.bfloat16)
    zero_points = (rnd(1, 1, 32, seed=4) * 3).to(torch.bfloat16)
    if two_d:
        indices, batch, start = torch.tensor([[2, 1], [0, 7]], dtype=torch.int32), [2, 0], [1, 7]
    else:
        indices, batch, start = torch.tensor([4, 0], dtype=torch.int32), [0, 1], [4, 0]
    expected = quant_scatter_reference(x, batch, start, updates, scales, zero_points)
    got = torch_npu.npu_quant_scatter(x.npu(), indices.npu(), updates.npu(), scales.npu(), zero_points.npu(),
                                      axis=-2, quant_axis=-1)
    assert torch.equal(got.cpu(), expected)
    in_place = x.npu()
    assert torch_npu.npu_quant_scatter_(in_place, indices.npu(), updates.npu(), scales.npu(), zero_points.npu(),
                                        -2, -1, "update") is in_place
    assert torch.equal(in_place.cpu(), expected)
    no_offset = torch.ops.npu.npu_quant_scatter(x.npu(), indices.npu(), updates.npu(), scales.npu(), None, -2, -1)
    assert torch.equal(no_offset.cpu(), quant_scatter_reference(x, batch, start, updates, scales, None))


def test_quant_scatter_bad_input():
    x, indices = torch.zeros(2, 8, 32, dtype=torch.int8).npu(), torch.zeros(2, dtype=torch.int32).npu()
    updates, scales = torch.zeros(2, 1, 32).npu(), torch.ones(32).npu()
    with pytest.raises(RuntimeError, match="reduce only supports 'update'"):
        torch_npu.npu_quant_scatter(x, indices, updates, scales, None, -2, -1, "add")
    with pytest.raises(RuntimeError, match="quant_axis should be the last"):
        torch_npu.npu_quant_scatter(x, indices, updates, scales, None, -2, 1)
    with pytest.raises(RuntimeError, match="axis cannot be"):
        torch_npu.npu_quant_scatter(x, indices, updates, scales, None, 0, -1)
    with pytest.raises(RuntimeError, match="quant_scales should have 32"):
        torch_npu.npu_quant_scatter(x, indices, updates, torch.ones(16).npu(), None, -2, -1)
    with pytest.raises(RuntimeError, match="self should be int8"):
        torch_npu.npu_quant_scatter(x.float(), indices, updates, scales, None, -2, -1)


def test_in_place_scatters_functionalize_and_compile():
    """Real torch_npu's test_functionalization: the in-place form becomes its functional form + copy_."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def nd(var, indices, updates):
        return torch_npu.npu_scatter_nd_update_(var, indices, updates)

    def quant(var, indices, updates, scales):
        return torch.ops.npu.npu_quant_scatter_(var, indices, updates, scales, None, -2, -1, "update")

    cases = [(nd, (rnd(24, 16, seed=1), torch.tensor([[3], [7], [20]], dtype=torch.int32), rnd(3, 16, seed=2))),
             (quant, (torch.zeros(2, 4, 32, dtype=torch.int8), torch.tensor([1, 2], dtype=torch.int32),
                      rnd(2, 1, 32, seed=3) * 20, torch.rand(32, generator=gen(4)) + 0.5))]
    for fn, cpu_args in cases:
        expected = cpu_args[0].clone()
        fn(expected, *cpu_args[1:])
        args = [t.npu() for t in cpu_args]
        code = make_fx(torch.func.functionalize(fn))(args[0].clone(), *args[1:]).code
        assert "aten.copy_" in code and "npu_scatter_nd_update_" not in code and "npu_quant_scatter_" not in code
        for run in (torch.func.functionalize(fn), torch.compile(fn, backend="aot_eager")):
            var = args[0].clone()
            run(var, *args[1:])
            assert torch.equal(var.cpu(), expected)
