"""Inductor's graph partitions on npu (torch_npu/_inductor/graph_partition.py):
with mode="reduce-overhead", a compiled graph is split at what an NPU graph
cannot capture, each other part is recorded in the device's NPU graph tree,
and the results equal eager execution."""

import warnings

import pytest
import torch
from torch._inductor import config
from torch._inductor.utils import fresh_cache, run_and_get_code

import torch_npu  # noqa: F401
from torch_npu.npu._graph_tree import get_container, reset_npugraph_trees


@pytest.fixture(autouse=True)
def fresh_trees():
    torch._dynamo.reset()
    reset_npugraph_trees()
    yield
    torch._dynamo.reset()
    reset_npugraph_trees()


def recorded_graphs():
    manager = get_container(torch.npu.current_device()).tree_manager
    return 0 if manager is None else manager.new_graph_id().id


@torch.library.custom_op("vnpu_partition_test::host_round_trip", mutates_args=(),
                         tags=(torch._C.Tag.cudagraph_unsafe,))
def host_round_trip(x: torch.Tensor) -> torch.Tensor:
    return ((x.cpu() + 1) * 2).to(x.device)


@host_round_trip.register_fake
def _(x):
    return torch.empty_like(x)


host_round_trip.register_autograd(lambda ctx, grad: grad * 2)


@torch.library.custom_op("vnpu_partition_test::host_pair", mutates_args=(),
                         tags=(torch._C.Tag.cudagraph_unsafe,))
def host_pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x.cpu()
    return (y + 1).to(x.device), (y * 3).to(x.device)


@host_pair.register_fake
def _(x):
    return torch.empty_like(x), torch.empty_like(x)


def test_an_unsafe_custom_op_splits_the_graph_into_recorded_partitions():
    def f(x):
        y = host_round_trip(x.relu() * 2)
        z = host_round_trip(y.abs() + 1)
        return z * 0.5

    x = torch.randn(4, 16, device="npu")
    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), f(x))
    # Three parts around the two host round trips, each its own NPU graph.
    assert recorded_graphs() == 3
    _, (code,) = run_and_get_code(compiled, x)
    assert "def partition_2(args):" in code and "host_round_trip" in code


def test_items_of_an_unsafe_ops_outputs_stay_outside_the_graphs():
    def f(x):
        a, b = host_pair(x + 1)
        return a * b

    x = torch.randn(8, device="npu")
    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), f(x))
    # The two parts around host_pair; its items are read in `call`, not in a graph.
    assert recorded_graphs() == 2


def test_a_graph_with_nothing_to_record_runs_without_graphs_or_warnings():
    def f(x):
        return host_round_trip(x)

    x = torch.randn(8, device="npu")
    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "skipping NPU graphs": nothing was tried
        for _ in range(3):
            torch.testing.assert_close(compiled(x), f(x))
    assert recorded_graphs() == 0


def test_torch_cond_with_an_npu_predicate_runs_between_partitions():
    def f(p, x):
        return torch.cond(p, lambda t: t.cos(), lambda t: t.sin(), [x * 2]) + 1

    x = torch.randn(3, 5, device="npu")
    compiled = torch.compile(f, mode="reduce-overhead")
    for flag in (True, False, True, False):
        p = torch.tensor(flag, device="npu")
        torch.testing.assert_close(compiled(p, x), f(p, x))


def test_cpu_work_in_a_graph_with_npu_inputs_is_partitioned():
    from torch.testing._internal.logging_utils import logs_to_string

    def f(x, y):
        return x + 1, y * 2  # y is a cpu tensor

    x, y = torch.ones(10, device="npu"), torch.ones(20)
    compiled = torch.compile(f, mode="reduce-overhead")
    scheduler_log, scheduler_logging = logs_to_string("torch._inductor.scheduler", "cudagraphs")
    with scheduler_logging(), fresh_cache():  # scheduled here, not read from the cache
        compiled(x, y)
    tree_log, tree_logging = logs_to_string("torch_npu.npugraph", "cudagraphs")
    with tree_logging():
        for _ in range(2):
            out = compiled(x, y)
    torch.testing.assert_close(out[0], x + 1)
    torch.testing.assert_close(out[1], y * 2)
    assert out[0].device.type == "npu" and out[1].device.type == "cpu"
    assert "Created 2 graph partitions: 1 cudagraphable, 1 non-cudagraphable" in scheduler_log.getvalue()
    assert "reason=cpu ops" in scheduler_log.getvalue()
    assert "NPUGRAPH-TREE Node Record function=0, graph=0" in tree_log.getvalue()
    assert recorded_graphs() == 1


def test_training_step_records_forward_and_backward_and_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).npu()
    reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).npu()
    reference.load_state_dict(model.state_dict())

    def step(m, x):
        y = host_round_trip(m(x))
        y.sum().backward()
        return y

    compiled = torch.compile(model, mode="reduce-overhead")
    for _ in range(3):
        x = torch.randn(8, 16, device="npu")
        torch.compiler.npugraph_mark_step_begin()
        got = step(compiled, x).detach().clone()
        want = step(reference, x)
        torch.testing.assert_close(got, want)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    assert recorded_graphs() == 2  # the forward and the backward


def test_a_backward_compiled_without_graphs_leaves_only_the_forward_recorded():
    @torch.compile(mode="reduce-overhead")
    def cube(x):
        return x * x * x

    for _ in range(3):
        x = torch.rand(20, 20, device="npu", requires_grad=True)
        out = cube(x)
        with config.patch(force_disable_cudagraph_TESTING_ONLY=True):
            out.backward(torch.ones_like(out))
        torch.testing.assert_close(x.grad, 3 * x.detach() ** 2)
    manager = get_container(torch.npu.current_device()).tree_manager
    assert manager.new_graph_id().id == 1
    assert not manager.running_forwards_with_pending_backwards


def test_without_graph_partitions_a_graph_is_recorded_whole():
    def f(x):
        return (x.relu() * 2).sum(0)

    x = torch.randn(6, 6, device="npu")
    with config.patch(graph_partition=False):
        compiled = torch.compile(f, mode="reduce-overhead")
        for _ in range(3):
            torch.testing.assert_close(compiled(x), f(x))
        assert recorded_graphs() == 1
        _, (code,) = run_and_get_code(compiled, x)
    assert "partition_0" not in code


def test_a_process_whose_first_graph_mixes_devices_compiles_it():
    # Its first compilation takes the direct path (npu as an Inductor device
    # of its own), so no graph of one npu had been compiled on this thread
    # before the partition decisions asked which one compiles now.
    from conftest import run_python

    result = run_python("""
        import torch, torch_npu
        f = torch.compile(lambda x, y: (x * 2, y + 1), mode="reduce-overhead")
        for _ in range(3):
            a, b = f(torch.ones(4, device="npu"), torch.ones(3))
        assert a.device.type == "npu" and a.tolist() == [2.0] * 4 and b.tolist() == [2.0] * 3
        print("OK")
    """, timeout=300)
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-3000:]
