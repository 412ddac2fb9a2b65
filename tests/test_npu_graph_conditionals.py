"""torch.cond inside NPU graphs (torch_npu/npu/_npugraph_conditional_nodes.py, vnpu::Graph's
conditional nodes): each replay runs the branch the predicate's value at replay selects, equal
to eager; conditionals nest; bad predicates and unclosed nodes are refused."""

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.npu._npugraph_conditional_nodes import (ControlFlowOpWarmupDispatchMode,
                                                       NPUGraphCaptureControlFlowOpDispatchMode)


def _capture(fn, *args):
    graph, stream = torch.npu.NPUGraph(), torch.npu.Stream()
    with torch.npu.graph(graph, stream=stream), NPUGraphCaptureControlFlowOpDispatchMode():
        out = fn(*args)
    return graph, out


def _replay(graph, out):
    graph.replay()
    torch.npu.synchronize()
    return [t.cpu().clone() for t in (out if isinstance(out, (tuple, list)) else (out,))]


def test_each_replay_runs_the_branch_the_predicate_selects_then():
    def fn(x, pred):
        a, b = torch.cond(pred, lambda t: (t.sin(), t + 1), lambda t: (t.cos(), t - 1), (x,))
        return a * b

    x = torch.randn(5, 3, device="npu")
    pred = torch.tensor(True, device="npu")
    graph, out = _capture(fn, x, pred)
    xc = x.cpu()
    for value in (True, False, True):
        pred.fill_(value)
        expected = (xc.sin() * (xc + 1)) if value else (xc.cos() * (xc - 1))
        torch.testing.assert_close(_replay(graph, out)[0], expected)
    x.copy_(torch.ones(5, 3))  # the graph reads its static input at replay, as any graph
    pred.fill_(False)
    torch.testing.assert_close(_replay(graph, out)[0], torch.ones(5, 3).cos() * 0)


def test_nested_conditionals_and_a_predicate_computed_in_the_graph():
    def fn(x, p):
        inner = lambda t, q: torch.cond(q, lambda u: u * 10, lambda u: u * 100, (t,))  # noqa: E731
        # the outer predicate is computed inside the captured work
        return torch.cond(x.sum() > 0, lambda t, q: inner(t, q) + 1, lambda t, q: inner(t, q) - 1, (x, p))

    x = torch.full((4,), 2.0, device="npu")
    p = torch.tensor(True, device="npu")
    graph, out = _capture(fn, x, p)
    for sign, inner_pred in ((1, True), (1, False), (-1, True), (-1, False)):
        x.fill_(2.0 * sign)
        p.fill_(inner_pred)
        scaled = 2.0 * sign * (10 if inner_pred else 100)
        assert _replay(graph, out)[0].tolist() == [scaled + (1 if sign > 0 else -1)] * 4


def test_warmup_mode_runs_the_cond_eagerly():
    x = torch.randn(6, device="npu")
    with ControlFlowOpWarmupDispatchMode():
        got = torch.cond(torch.tensor(False, device="npu"), lambda t: t.exp(), lambda t: t.neg(), (x,))
    torch.testing.assert_close(got.cpu(), -x.cpu())


def test_warmup_mode_records_nested_conds_then_runs_them_eagerly():
    # The throw-away capture meets the inner cond while capturing: it must nest, not capture again.
    x, inner = torch.randn(6, device="npu"), torch.tensor(False, device="npu")

    def branch(t, q):
        return torch.cond(q, lambda u: u * 10, lambda u: u * 100, (t,)) + 1

    with ControlFlowOpWarmupDispatchMode():
        got = torch.cond(torch.tensor(True, device="npu"), branch, lambda t, q: t.neg(), (x, inner))
    torch.testing.assert_close(got.cpu(), x.cpu() * 100 + 1)


def test_bad_predicates_and_unclosed_nodes_are_refused():
    x = torch.randn(3, device="npu")
    int_pred, host_pred = torch.tensor(1, dtype=torch.int32, device="npu"), torch.tensor(True)
    with pytest.raises(RuntimeError, match="Conditions must be bool tensors"):
        _capture(lambda t: torch.cond(int_pred, torch.sin, torch.cos, (t,)), x)
    with pytest.raises(ValueError, match="Conditions must be on an npu device"):
        _capture(lambda t: torch.cond(host_pred, torch.sin, torch.cos, (t,)), x)
    graph, stream, pred = torch.npu.NPUGraph(), torch.npu.Stream(), torch.tensor(True, device="npu")
    with pytest.raises(RuntimeError, match="a conditional node is still being captured"):
        with torch.npu.graph(graph, stream=stream):
            graph.begin_capture_to_if_node(pred)
            x.sin()
    with pytest.raises(RuntimeError, match="not capturing"):
        torch.npu.NPUGraph().begin_capture_to_if_node(torch.tensor(True, device="npu"))
