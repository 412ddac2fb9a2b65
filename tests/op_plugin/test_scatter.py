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


def test_quant_scatter_round_mode_and_dst_type():
    x, indices = torch.zeros(1, 2, 32, dtype=torch.int8), torch.zeros(1, dtype=torch.int32)
    halves = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5] + [0.0] * 27).view(1, 1, 32)
    scales = torch.ones(32)
    args = [t.npu() for t in (x, indices, halves, scales)]
    rint = torch_npu.npu_quant_scatter(*args, None, -2, -1, "update", None, "rint").cpu()[0, 0, :5]
    away = torch_npu.npu_quant_scatter(*args, None, -2, -1, "update", None, "round").cpu()[0, 0, :5]
    assert rint.tolist() == [0, 2, 2, 0, -2]
    assert away.tolist() == [1, 2, 3, -1, -3]
    assert torch.equal(torch_npu.npu_quant_scatter(*args, dst_type=torch.int8).cpu()[0, 0, :5], rint)
    with pytest.raises(RuntimeError, match="dst_type=hifloat8 is not supported on vNPU"):
        torch_npu.npu_quant_scatter(*args, dst_type=torch_npu.hifloat8)
    with pytest.raises(RuntimeError, match="round_mode should be"):
        torch_npu.npu_quant_scatter(*args, round_mode="floor")


def _functionalized_code(fn, args):
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(torch.func.functionalize(fn))(*args).code


@pytest.mark.parametrize("name", ["scatter_update", "npu_scatter_nd_update", "npu_quant_scatter", "npu_silu"])
def test_in_place_form_functionalizes_to_one_npu_node(name):
    """As op-plugin's generated Functionalize kernels: the functional operator is one node (not its ATen
    composition), followed by the write-back into the mutated input."""
    cases = {
        "scatter_update": (lambda v, i, u: torch_npu.scatter_update_(v, i, u, -2),
                           (rnd(4, 4, 8, 16, seed=1), torch.tensor([1, 0, 3, 2]), rnd(4, 4, 1, 16, seed=2))),
        "npu_scatter_nd_update": (torch_npu.npu_scatter_nd_update_,
                                  (rnd(24, 16, seed=1), torch.tensor([[3], [7]], dtype=torch.int32),
                                   rnd(2, 16, seed=2))),
        "npu_quant_scatter": (lambda v, i, u, s: torch_npu.npu_quant_scatter_(v, i, u, s),
                              (torch.zeros(2, 4, 32, dtype=torch.int8), torch.tensor([1, 2], dtype=torch.int32),
                               rnd(2, 1, 32, seed=3) * 20, torch.rand(32, generator=gen(4)) + 0.5)),
        "npu_silu": (torch_npu.npu_silu_, (rnd(3, 5, seed=1),)),
    }
    fn, cpu_args = cases[name]
    args = [t.npu() for t in cpu_args]
    code = _functionalized_code(fn, [args[0].clone()] + args[1:])
    calls = [line.split("=", 1)[1].split("(")[0].strip() for line in code.splitlines() if " = torch.ops." in line]
    assert calls == [f"torch.ops.npu.{name}.default", "torch.ops.aten.copy_.default"], code
    expected = cpu_args[0].clone()
    fn(expected, *cpu_args[1:])
    var = args[0].clone()
    torch.func.functionalize(fn)(var, *args[1:])
    assert torch.equal(var.cpu(), expected)


def test_npu_silu_gradient_is_op_plugins_backward():
    x = rnd(4, 6, seed=5)
    xn = x.npu().requires_grad_()
    y = torch_npu.npu_silu(xn)
    assert "npu_silu" in type(y.grad_fn).__name__
    y.backward(torch.ones_like(y))
    xc = x.clone().requires_grad_()
    torch.nn.functional.silu(xc).sum().backward()
    assert_close(xn.grad.cpu(), xc.grad)
    compiled = torch.compile(lambda t: torch_npu.npu_silu(t) * 2)(x.npu())
    assert_close(compiled.cpu(), torch.nn.functional.silu(x) * 2)


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
