"""ACLGraph update plans (torch_npu.npu._aclgraph_update_plan): a plan maps
graph inputs to the host arguments of the operators an NPU graph captured
automatically; resolved for new inputs it updates them before a replay, and
each malformed plan is refused with the entry and key at fault."""

import pytest
import torch

import torch_npu
from torch_npu.npu._aclgraph_update_plan import (
    ACLGRAPH_UPDATE_PLAN_GLOBAL,
    build_cpu_update_input_for_graph,
    resolve_aclgraph_update_plan,
    update_aclgraph_records_for_graph,
    validate_aclgraph_update_plan,
    validate_aclgraph_update_plan_for_graph,
)

FIA_OUT = "npu_fused_infer_attention_score.out"
KWARGS = dict(num_heads=4, input_layout="BNSD", scale=0.25)


def _attention_graph():
    torch.manual_seed(0)
    q = torch.randn(1, 4, 1, 16).half().npu()
    k, v = torch.randn(1, 4, 32, 16).half().npu(), torch.randn(1, 4, 32, 16).half().npu()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, auto_dispatch_capture=True):
        out, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=[32], **KWARGS)
    return g, (q, k, v), out


def test_a_plan_updates_the_captured_attention_from_new_inputs():
    g, (q, k, v), out = _attention_graph()
    plan = [{"op": "npu_fused_infer_attention_score.default",  # .default and .out name one operator
             "updates": {"actual_seq_lengths_kv": {"kind": "input", "index": 1}}}]
    records = g.graph_dispatch_mode.graph_dispatch_records
    validate_aclgraph_update_plan_for_graph(plan, g)
    for lengths in ([5], [17], [32]):
        update = build_cpu_update_input_for_graph(plan, ["query batch", lengths], records)
        assert update == [{"actual_seq_lengths_kv": lengths}]
        assert update_aclgraph_records_for_graph(update, g)
        g.replay()
        torch.npu.synchronize()
        want, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=lengths, **KWARGS)
        assert torch.equal(out.cpu(), want.cpu()), lengths
    assert not update_aclgraph_records_for_graph([], g)
    assert ACLGRAPH_UPDATE_PLAN_GLOBAL == "_torch_npu_aclgraph_update_plan"


def test_a_graph_captured_without_automatic_capture_has_nothing_to_update():
    plain = torch.npu.NPUGraph()
    with torch.npu.graph(plain):
        torch.ones(2, device="npu") * 2
    validate_aclgraph_update_plan_for_graph([{"op": "anything"}], plain)  # nothing to check
    assert not update_aclgraph_records_for_graph([{"x": 1}], plain)
    assert not update_aclgraph_records_for_graph([{"x": 1}], None)


def test_sources_resolve_inputs_constants_none_and_lists():
    plan = [{"op": FIA_OUT, "updates": {
        "a": {"kind": "input", "index": 0},
        "b": {"kind": "constant", "value": (1, 2)},
        "c": {"kind": "none"},
        "d": {"kind": "list", "items": [{"kind": "input", "index": 1}, {"kind": "constant", "value": 7}]}}}]
    assert resolve_aclgraph_update_plan(plan, [[3], 4]) == [{"a": [3], "b": (1, 2), "c": None, "d": [4, 7]}]
    assert resolve_aclgraph_update_plan(None, [1]) == []
    for index in (2, -1, "0", True):
        with pytest.raises(RuntimeError, match=f"entry 0 key a input index {index} is out of range for 2 inputs"):
            resolve_aclgraph_update_plan([{"op": FIA_OUT, "updates": {"a": {"kind": "input", "index": index}}}],
                                         [1, 2])


def test_malformed_plans_are_refused_with_the_entry_and_key_at_fault():
    g, _, _ = _attention_graph()
    records = g.graph_dispatch_mode.graph_dispatch_records

    def entry(updates, op=FIA_OUT):
        return {"op": op, "updates": updates}

    good = {"actual_seq_lengths_kv": {"kind": "input", "index": 0}}
    cases = [
        ([], "missing ACLGraph update plan: \\['npu_fused_infer_attention_score.out'\\].*cached compiled code"),
        ([entry(good), entry(good)], "length mismatch: plan has 2 entries but graph captured 1 updatable"),
        (["not a dict"], "invalid plan entry at index 0"),
        ([entry(good, op=3)], "entry 0 op must be a string, got 3"),
        ([entry(good, op="npu_fusion_attention")], "op mismatch: entry 0 expects 'npu_fusion_attention', "
                                                   "captured 'npu_fused_infer_attention_score.out'"),
        ([entry([])], "entry 0 updates must be a dict"),
        ([entry({})], "entry has no updates: entry 0"),
        ([entry({"not_a_key": {"kind": "none"}})], "cannot consume: entry 0, .*keys \\['not_a_key'\\]"),
        ([entry({"actual_seq_lengths_kv": 5})], "entry 0 key actual_seq_lengths_kv has invalid source 5"),
        ([entry({"actual_seq_lengths_kv": {"kind": "input", "index": -1}})], "has invalid input index -1"),
        ([entry({"actual_seq_lengths_kv": {"kind": "constant", "value": torch.ones(1)}})],
         "has unsupported constant value"),
        ([entry({"actual_seq_lengths_kv": {"kind": "constant", "value": [1, {2}]}})], "unsupported constant value"),
        ([entry({"actual_seq_lengths_kv": {"kind": "list", "items": 3}})], "invalid list source items 3"),
        ([entry({"actual_seq_lengths_kv": {"kind": "graph"}})], "unsupported source kind 'graph'"),
    ]
    for plan, message in cases:
        with pytest.raises(RuntimeError, match=message):
            validate_aclgraph_update_plan(plan, records)
    # The captured key, and the keys the handler's update specs map onto
    # positional arguments, are consumable.
    validate_aclgraph_update_plan([entry({"actual_seq_lengths": {"kind": "none"}})], records)
    validate_aclgraph_update_plan([], [])
