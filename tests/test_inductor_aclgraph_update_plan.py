"""ACLGraph update plans written by Inductor (torch_npu._inductor._aclgraph_update_plan)
and their use by compiled graphs replayed as NPU graphs (NpuGraphRunner, Note [Update
plans in compiled NPU graph replays])."""

import pytest
import sympy
import torch

import torch_npu
from torch_npu._inductor._aclgraph_update_plan.codegen import build_aclgraph_update_plan_entry_for_inductor
from torch_npu.npu._aclgraph_update_plan import build_cpu_update_input_for_graph, update_aclgraph_records_for_graph
from torch_npu.npu._npugraph_handlers import NpuGraphOpHandler, register_npu_graph_handler
from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS

FIA = torch.ops.npu.npu_fused_infer_attention_score.default
KWARGS = dict(num_heads=4, input_layout="BNSD", scale=0.25)

# A test operator that stays an extern kernel in Inductor's code: per batch
# row, the sum of its first lengths[b] rows. Its handler captures it as its
# .out overload into an output allocated first, so that an update rewrites
# the tensor the rest of the graph reads (as the fused attention's does).
_LIB = torch.library.Library("vnpu_update_plan_test", "DEF")
_LIB.define("prefix_sum(Tensor x, SymInt[] lengths) -> Tensor")
_LIB.define("prefix_sum.out(Tensor x, SymInt[] lengths, *, Tensor(a!) out) -> Tensor(a!)")


def _prefix_sum(x, lengths):
    return torch.stack([x[b, :n].sum(0) for b, n in enumerate(lengths)])


def _prefix_sum_out(x, lengths, *, out):
    return out.copy_(_prefix_sum(x, lengths))


_LIB.impl("prefix_sum", _prefix_sum, "CompositeExplicitAutograd")
_LIB.impl("prefix_sum.out", _prefix_sum_out, "CompositeExplicitAutograd")


@torch.library.register_fake("vnpu_update_plan_test::prefix_sum")
def _prefix_sum_fake(x, lengths):
    return x.new_empty((x.shape[0],) + tuple(x.shape[2:]))


PREFIX_SUM = torch.ops.vnpu_update_plan_test.prefix_sum


class _PrefixSumHandler(NpuGraphOpHandler):
    UPDATE_SPECS = {"prefix_sum.default": [("arg", 1, "lengths")], "prefix_sum.out": [("arg", 1, "lengths")]}

    @classmethod
    def prepare_capture(cls, func, args, kwargs):
        x = args[0]
        return PREFIX_SUM.out, args, {"out": x.new_empty((x.shape[0],) + tuple(x.shape[2:]))}

    @classmethod
    def postprocess_result(cls, result, kwargs):
        return kwargs["out"]


@pytest.fixture
def prefix_sum_handler():
    saved = dict(_NPU_GRAPH_OP_HANDLERS)
    register_npu_graph_handler(["prefix_sum.default", "prefix_sum.out"])(_PrefixSumHandler)
    yield
    _NPU_GRAPH_OP_HANDLERS.clear()
    _NPU_GRAPH_OP_HANDLERS.update(saved)


class _Buffer:
    """An Inductor IR value that names a buffer (an input's, when its name is one)."""

    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


def _fia_entry(kwargs, names=("arg0_1", "arg1_1", "arg2_1", "arg3_1"), inputs=None):
    return build_aclgraph_update_plan_entry_for_inductor(
        FIA, (_Buffer("arg0_1"), _Buffer("arg1_1"), _Buffer("arg2_1")), {**KWARGS, **kwargs}, list(names),
        inputs or {})


def test_entries_map_symint_inputs_constants_and_lists_through_the_builtin_handler():
    s0, s1 = sympy.Symbol("s0"), sympy.Symbol("s1")
    inputs = {"arg3_1": s0, "arg4_1": s1}
    names = ["arg0_1", "arg1_1", "arg2_1", "arg3_1", "arg4_1"]
    entry = _fia_entry({"actual_seq_lengths_kv": [s1, sympy.Integer(7), 3], "actual_seq_lengths": None},
                       names, inputs)
    assert entry == {"op": "npu_fused_infer_attention_score.default", "updates": {
        "actual_seq_lengths_kv": {"kind": "list", "items": [
            {"kind": "input", "index": 4}, {"kind": "constant", "value": 7}, {"kind": "constant", "value": 3}]},
        "actual_seq_lengths": {"kind": "none"}}}
    assert type(entry["updates"]["actual_seq_lengths_kv"]["items"][1]["value"]) is int  # not sympy's
    # Keys the handler does not update, and calls that pass none, give nothing.
    assert _fia_entry({}) is None
    # The entry is the operator's, whatever its buffers are.
    entry = _fia_entry({"actual_seq_lengths_kv": _Buffer("arg3_1")})
    assert entry["updates"] == {"actual_seq_lengths_kv": {"kind": "input", "index": 3}}


def test_values_a_replay_cannot_update_are_refused_with_what_to_do():
    s0 = sympy.Symbol("s0")
    with pytest.raises(RuntimeError, match=r"npu_fused_infer_attention_score.default argument actual_seq_lengths_kv"
                                           r".*s0 \+ 1 is computed from the graph's inputs.*as an input"):
        _fia_entry({"actual_seq_lengths_kv": [s0 + 1]}, inputs={"arg3_1": s0})
    with pytest.raises(RuntimeError, match="Tensor constant for .*actual_seq_lengths_kv: Tensor update values "
                                           "must be graph inputs.*pass it to the compiled function as an input"):
        _fia_entry({"actual_seq_lengths_kv": torch.tensor([5])})
    with pytest.raises(RuntimeError, match=r"\(of type object\) is neither a graph input nor"):
        _fia_entry({"actual_seq_lengths_kv": object()})


def test_handlers_decide_which_calls_get_entries(prefix_sum_handler):
    x = _Buffer("arg0_1")
    assert build_aclgraph_update_plan_entry_for_inductor(PREFIX_SUM.default, (x, [4, 2]), {}, ["arg0_1"], {}) == {
        "op": "prefix_sum.default",
        "updates": {"lengths": {"kind": "list", "items": [{"kind": "constant", "value": 4},
                                                          {"kind": "constant", "value": 2}]}}}

    class Declines(_PrefixSumHandler):
        @classmethod
        def should_handle(cls, func, args, kwargs):
            return len(args[1]) > 2

    _NPU_GRAPH_OP_HANDLERS["prefix_sum.default"] = Declines
    assert build_aclgraph_update_plan_entry_for_inductor(PREFIX_SUM.default, (x, [4, 2]), {}, ["arg0_1"], {}) is None
    del _NPU_GRAPH_OP_HANDLERS["prefix_sum.default"]
    assert build_aclgraph_update_plan_entry_for_inductor(PREFIX_SUM.default, (x, [4, 2]), {}, ["arg0_1"], {}) is None


def test_an_entry_built_for_inductor_updates_a_captured_attention_like_eager():
    torch.manual_seed(0)
    q = torch.randn(1, 4, 1, 16).half().npu()
    k, v = torch.randn(1, 4, 32, 16).half().npu(), torch.randn(1, 4, 32, 16).half().npu()
    s0 = sympy.Symbol("s0")
    plan = [_fia_entry({"actual_seq_lengths_kv": [s0]}, inputs={"arg3_1": s0})]
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, auto_dispatch_capture=True):
        out, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=[32], **KWARGS)
    records = g.graph_dispatch_mode.graph_dispatch_records
    for length in (3, 20, 32):
        update = build_cpu_update_input_for_graph(plan, [q, k, v, length], records)
        assert update == [{"actual_seq_lengths_kv": [length]}]
        assert update_aclgraph_records_for_graph(update, g)
        g.replay()
        want, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=[length], **KWARGS)
        assert torch.equal(out.cpu(), want.cpu()), length


@pytest.fixture
def made_runners(monkeypatch):
    """The NpuGraphRunners made while the test runs (by Inductor's retargeting)."""
    from torch_npu._inductor import npugraph_runner

    made = []

    class Recorded(npugraph_runner.NpuGraphRunner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(npugraph_runner, "NpuGraphRunner", Recorded)
    torch._dynamo.reset()
    yield made
    torch._dynamo.reset()


def test_compiled_replays_update_sequence_lengths_per_call(prefix_sum_handler, made_runners):
    def f(x, n):
        return PREFIX_SUM(x * 2, [n, 3]) + 1

    x = torch.randn(2, 8, 4).npu()
    compiled = torch.compile(f, mode="reduce-overhead")
    for n in (5, 6, 2, 7, 8, 1, 4):  # 5 compiles with n a constant, 6 with n dynamic
        assert torch.allclose(compiled(x, n).cpu(), f(x, n).cpu()), n
    constant, dynamic = made_runners
    assert constant.update_plan == [{"op": "prefix_sum.default", "updates": {"lengths": {"kind": "list", "items": [
        {"kind": "constant", "value": 5}, {"kind": "constant", "value": 3}]}}}]
    assert dynamic.update_plan == [{"op": "prefix_sum.default", "updates": {"lengths": {"kind": "list", "items": [
        {"kind": "input", "index": 1}, {"kind": "constant", "value": 3}]}}}]
    # Recorded at n=2 and replayed for 7, 8, 1 and 4: the updates, not new
    # captures, carried those lengths.
    assert dynamic.updated_ints == {1} and dynamic.graph_count() == 1
    (recorded,) = dynamic.recorded.values()
    assert recorded.graph.auto_dispatch_capture


def test_an_int_used_beyond_the_update_keeps_its_recordings_apart(prefix_sum_handler, made_runners):
    def f(x, n):
        return PREFIX_SUM(x, [n, 3]) * n  # n also scales the result

    x = torch.randn(2, 8, 4).npu()
    compiled = torch.compile(f, mode="reduce-overhead")
    for n in (5, 6, 2, 2, 7, 7, 7):
        assert torch.allclose(compiled(x, n).cpu(), f(x, n).cpu()), n
    dynamic = made_runners[-1]
    assert dynamic.update_plan[0]["updates"]["lengths"]["items"][0] == {"kind": "input", "index": 1}
    assert dynamic.updated_ints == frozenset() and dynamic.graph_count() == 2  # n=2 and n=7 recorded


def test_compiled_graphs_without_handled_operators_write_no_plan_and_replay_from_the_tree(made_runners):
    def f(x, n):
        return x[:, :n].sum(1) * 2

    x = torch.randn(2, 8, 4).npu()
    compiled = torch.compile(f, mode="reduce-overhead")
    for n in (5, 5, 5):
        assert torch.allclose(compiled(x, n).cpu(), f(x, n).cpu())
    # No plan: the graph replays from the device's NPU graph tree, not through NpuGraphRunner.
    assert made_runners == []
    from torch_npu.npu._graph_tree import get_manager
    assert get_manager(0, create_if_none_exists=False) is not None
