"""torch_npu/profiler/_flops_*.py: with ``with_flops`` and mstx, the profiled operators' FLOPs
appear as "N-<op>" ranges of domain mfu_flops; the formulas agree with torch's FlopCounterMode
on the products both count; the registry lets users add formulas."""

import json

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import torch_npu
from torch_npu.profiler import ProfilerActivity, _ExperimentalConfig, profile
from torch_npu.profiler import _flops_formulas as formulas
from torch_npu.profiler._flops_registry import (_npu_flop_registry, get_flop_func, get_npu_flop_targets,
                                                register_npu_flop)


def _flop_ranges(tmp_path, fn, mstx=True):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU], with_flops=True,
                 experimental_config=_ExperimentalConfig(mstx=mstx)) as prof:
        fn()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    return [e["name"] for e in events if e.get("name", "").split("-", 1)[0].isdigit()]


def test_profiled_operators_report_their_flops_as_ranges(tmp_path):
    q = torch.randn(2, 4, 8, 16).npu()
    matmul = torch.matmul

    def work():
        assert torch.matmul is not matmul  # wrapped while profiling
        torch_npu.npu_fusion_attention(q, q, q, 4, "BNSD", scale=0.25)
        torch.matmul(torch.randn(5, 1, 3, 4).npu(), torch.randn(2, 4, 6).npu())

    assert _flop_ranges(tmp_path, work) == [f"{2 * 2 * 4 * 8 * 8 * 32}-npu_fusion_attention", "1440-matmul"]
    assert torch.matmul is matmul  # put back at stop
    # without mstx nothing is wrapped nor ranged
    assert _flop_ranges(tmp_path, lambda: torch.matmul(torch.ones(2, 2).npu(), torch.ones(2, 2).npu()),
                        mstx=False) == []


def test_only_the_outermost_counted_call_is_ranged(tmp_path):
    @register_npu_flop(target=f"{__name__}:_two_products", op_name="two_products")
    def _two_products_flops(a, b):
        return 2 * formulas.mm_flops(a, b)
    try:
        a = torch.randn(4, 4).npu()
        names = _flop_ranges(tmp_path, lambda: _two_products(a, a))
        assert names == [f"{2 * 2 * 4 * 4 * 4}-two_products"], names
    finally:
        _npu_flop_registry.pop("two_products")


def _two_products(a, b):
    return torch.mm(torch.mm(a, b), b)


def _torch_count(fn, *args):
    with FlopCounterMode(display=False) as counter:
        fn(*args)
    return counter.get_total_flops()


@pytest.mark.parametrize("a_shape, b_shape", [((5, 1, 3, 4), (2, 4, 6)), ((3, 4), (4, 7)), ((4,), (4, 5)),
                                              ((2, 3, 4), (2, 4, 5))])
def test_matrix_product_formulas_equal_flop_counter_mode(a_shape, b_shape):
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    assert formulas.matmul_flops(a, b) == _torch_count(torch.matmul, a, b)
    x, w, bias = torch.randn(7, 3, 8), torch.randn(5, 8), torch.randn(5)
    assert formulas.linear_flops(x, w, bias) == _torch_count(F.linear, x, w, bias)
    m1, m2 = torch.randn(3, 8), torch.randn(8, 2)
    assert formulas.addmm_flops(torch.randn(3, 2), m1, m2) == _torch_count(torch.addmm, torch.randn(3, 2), m1, m2)


def test_matrix_vector_products():
    # FlopCounterMode does not count aten.mv / aten.dot; 2 FLOPs per multiply-add
    assert formulas.matmul_flops(torch.empty(6, 3, 4), torch.empty(4)) == 2 * 18 * 4
    assert formulas.matmul_flops(torch.empty(7), torch.empty(7)) == 2 * 7


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "SBH"])
def test_attention_formula_equals_flop_counter_mode_on_sdpa(layout):
    b, n, sq, skv, d = 2, 4, 6, 10, 8
    q, k, v = torch.randn(b, n, sq, d), torch.randn(b, n, skv, d), torch.randn(b, n, skv, d)
    # the two products of attention, as FlopCounterMode counts them
    expected = _torch_count(lambda: torch.softmax(q @ k.transpose(-1, -2), -1) @ v)

    def laid_out(t):
        if layout == "BNSD":
            return t
        if layout == "BSND":
            return t.transpose(1, 2)
        bsh = t.transpose(1, 2).flatten(2)
        return bsh if layout == "BSH" else bsh.transpose(0, 1)
    assert formulas.npu_fusion_attention_flops(laid_out(q), laid_out(k), laid_out(v), n, layout) == expected


def test_sparse_modes_and_packed_sequences():
    q = torch.empty(1, 2, 8, 16)
    full = formulas.npu_fusion_attention_flops(q, q, q, 2, "BNSD")
    causal = formulas.npu_fusion_attention_flops(q, q, q, 2, "BNSD", sparse_mode=2)
    assert causal == full / 2
    band = formulas._scores(8, 8, 4, pre_tokens=1, next_tokens=0)  # each row sees itself and one before
    assert band == 8 + 7
    tnd = torch.empty(10, 2, 16)
    assert formulas.npu_fusion_attention_flops(tnd, tnd, tnd, 2, "TND", actual_seq_qlen=[4, 10],
                                               actual_seq_kvlen=[4, 10]) == 2 * 2 * 32 * (16 + 36)
    with pytest.raises(ValueError, match="sparse_mode=6"):
        formulas.npu_fusion_attention_flops(q, q, q, 2, "BNSD", sparse_mode=6)


def test_user_formula_takes_precedence_and_keeps_the_default_target():
    @register_npu_flop(op_name="npu_grouped_matmul")
    def mine(*args, **kwargs):
        return 1
    try:
        assert get_flop_func("npu_grouped_matmul") is mine
        assert get_npu_flop_targets()["npu_grouped_matmul"] == "torch_npu:npu_grouped_matmul"
    finally:
        _npu_flop_registry.pop("npu_grouped_matmul")
    assert get_flop_func("npu_grouped_matmul") is formulas.npu_grouped_matmul_flops
