"""NPU graph trees (torch_npu/npu/_graph_tree.py): warm-up, recording, replay,
generations, the step marker, the pool and its checks, compiled code on them.

Each result is compared with eager execution of the same function; real
torch_npu's unit tests of the module's pieces run unchanged through
scripts/run_real_tests.py (test/npu/test_graph_tree.py)."""

import copy
import gc
import warnings

import pytest
import torch
import torch.nn as nn

import torch_npu
from graph_counting import CountGraphs
from torch_npu.npu import _graph_tree as gt

DEVICE = "npu:0"


@pytest.fixture(autouse=True)
def fresh_trees():
    torch._dynamo.reset()
    gt.reset_npugraph_trees()
    yield
    torch._dynamo.reset()
    gt.reset_npugraph_trees()


def boxed(fn):
    """``fn`` with the boxed calling convention of compiled graphs: one list of
    inputs, which the callee empties, and a list of outputs."""
    def model(inputs):
        args = list(inputs)
        inputs.clear()
        out = fn(*args)
        return list(out) if isinstance(out, (tuple, list)) else [out]
    return model


def tree_function(fn, example, static_input_idxs=(), is_inference=True):
    """``fn`` (taking npu tensors) as a function of the device's tree."""
    return gt.npugraphify_impl(boxed(fn), list(example), static_input_idxs, device_index=0, is_backward=False,
                               is_inference=is_inference)


def step():
    torch.compiler.npugraph_mark_step_begin()


def test_a_function_warms_up_then_records_then_replays_like_eager():
    fn = lambda a, b: (a @ b).relu() + a.sum()  # noqa: E731
    a, b = torch.randn(8, 8, device=DEVICE), torch.randn(8, 8, device=DEVICE)
    f = tree_function(fn, [a, b])
    manager = gt.get_manager(0)
    states = []
    with CountGraphs() as count:
        for i in range(5):
            step()
            x, y = a + i, b - i
            out = f([x, y])[0]
            states.append(manager.path_state)
            torch.testing.assert_close(out, fn(x, y))
    assert states == [gt.ExecutionState.WARMUP, gt.ExecutionState.RECORDING] + [gt.ExecutionState.EXECUTION] * 3
    # One capture; its first replay computes the recording call, then one per call.
    assert count.captures == 1 and count.replays == 4 and manager.node_count() == 1


def test_replays_write_one_place_and_held_outputs_keep_their_values():
    fn = lambda a: a * 2 + 1  # noqa: E731
    x = torch.randn(64, device=DEVICE)
    f = tree_function(fn, [x])
    for _ in range(3):  # warm-up, record, first replay
        step()
        f([x])
    addresses = set()
    for i in range(3):
        step()
        addresses.add(f([x + i])[0].data_ptr())  # dropped at once: nothing to move
    assert len(addresses) == 1  # every replay writes the same pool memory: no copies
    held = []
    for i in range(4):
        step()
        held.append(f([x + i])[0])
    # Each held output moved out of the pool when the next generation began.
    for i, out in enumerate(held):
        torch.testing.assert_close(out, fn(x + i))
    assert len({t.data_ptr() for t in held}) == 4


def test_outputs_of_one_graph_feed_the_next_as_a_child():
    f1 = tree_function(lambda a: a.sin(), [torch.randn(16, device=DEVICE)])
    f2 = tree_function(lambda h: h * 3 + 1, [torch.randn(16, device=DEVICE)])
    manager = gt.get_manager(0)
    for i in range(4):
        step()
        x = torch.full((16,), float(i), device=DEVICE)
        h = f1([x])[0]
        out = f2([h])[0]
        torch.testing.assert_close(out, x.sin() * 3 + 1)
    root = next(manager.get_roots())
    child = root.children[next(iter(root.children))][0]
    assert manager.node_count() == 2 and child.npugraph_managed_idxs == [0]  # h is read in place


def test_a_pending_backward_records_again_until_a_step_is_marked():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).to(DEVICE)
    compiled = torch.compile(model, backend="npugraphs")
    x = torch.randn(4, 8, device=DEVICE)
    for _ in range(3):  # forward and backward: warm-up, record, replay
        compiled(x).sum().backward()
    manager = gt.get_manager(0)
    nodes = manager.node_count()
    # Forwards whose backward has not run keep their outputs alive: without
    # a step mark each one is recorded again, as a child of the last.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pending = [compiled(x) for _ in range(4)]
    assert manager.node_count() > nodes
    assert any("Unable to hit fast path of NPUGraphs" in str(w.message) for w in caught)
    for out in pending:
        torch.testing.assert_close(out, model(x))
    del pending
    nodes = manager.node_count()
    for _ in range(3):
        step()
        out = compiled(x)
        torch.testing.assert_close(out, model(x))
    assert manager.node_count() == nodes  # marked steps replay


@pytest.mark.parametrize("backend", ["npugraphs", "inductor"])
def test_compiled_training_matches_eager(backend):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).to(DEVICE)
    reference = copy.deepcopy(model)
    if backend == "inductor":
        compiled = torch.compile(model, mode="reduce-overhead")
    else:
        compiled = torch.compile(model, backend="npugraphs")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(6):
        x = torch.randn(8, 16, generator=g).to(DEVICE)
        for m, o in ((compiled, opt), (reference, ref_opt)):
            o.zero_grad()
            loss = m(x).square().mean()
            loss.backward()
            o.step()
            losses.append(loss)
    for compiled_loss, eager_loss in zip(losses[::2], losses[1::2]):
        torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-5, atol=1e-5)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5)
    assert gt.get_manager(0).node_count() >= 2  # a forward and a backward graph


def test_integer_inputs_key_one_tree_function_each():
    fn = lambda a, n: a * n  # noqa: E731
    x = torch.randn(8, device=DEVICE)
    f = tree_function(fn, [x, 2])
    for n in (2, 3, 2, 3, 2, 3):
        step()
        torch.testing.assert_close(f([x, n])[0], x * n)
    assert len(gt.get_manager(0).ids_to_funcs) == 2


def test_the_pool_checks_count_every_output_the_tree_holds():
    from torch._inductor import config
    fn = lambda a: (a + 1, a.sum())  # noqa: E731
    x = torch.randn(32, device=DEVICE)
    f = tree_function(fn, [x])
    with config.patch({"triton.slow_path_cudagraph_asserts": True, "triton.fast_path_cudagraph_asserts": True}):
        for i in range(4):
            step()
            out = f([x + i])
            torch.testing.assert_close(out[0], x + i + 1)
    manager = gt.get_manager(0)
    pool = manager.npu_graphs_thread_pool
    node = next(manager.get_roots())
    owned = gt._owned_output_refs(pool)
    assert len(owned) == 2 and {r.data_ptr() for r in owned} <= set(gt.get_block_addrs(pool))
    live = [gt.StorageWeakRefWrapper(t) for t in out] + owned
    gt.check_memory_pool(0, pool, live)
    # An allocation in the pool that no graph accounts for is reported.
    with gt._use_npu_memory_pool_manager(0, pool, manager.stream):
        stray = torch.empty(1000, device=DEVICE)
    with pytest.raises(RuntimeError, match="in the npugraph pool but not accounted for"):
        gt.check_memory_pool(0, pool, live)
    del stray
    gc.collect()
    gt.check_memory_pool(0, pool, live)
    assert node.checkpointed_caching_state.live_block_addresses() <= set(gt.get_block_addrs(pool))


def test_a_capture_vnpu_refuses_runs_without_graphs():
    def fn(a):
        return a * 2 + torch.tensor([1.0, 2.0]).to(a.device)  # a host copy: not capturable

    x = torch.randn(2, device=DEVICE)
    f = tree_function(fn, [x])
    results = []
    refusal = "skipping NPU graphs for .*: operation not permitted when stream is capturing"
    with pytest.warns(UserWarning, match=refusal):
        for i in range(4):
            step()
            results.append(f([x + i])[0])
    for i, r in enumerate(results):
        torch.testing.assert_close(r, fn(x + i))
    assert gt.get_manager(0).node_count() == 0


def test_reset_drops_the_trees():
    f = tree_function(lambda a: a.cos(), [torch.randn(4, device=DEVICE)])
    for _ in range(3):
        step()
        f([torch.randn(4, device=DEVICE)])
    manager = gt.get_manager(0)
    root = next(manager.get_roots())
    gt.reset_npugraph_trees()
    assert root.graph is None and manager.graph is None and manager.roots is None
    assert gt.get_manager(0, create_if_none_exists=False) is None
    with pytest.raises(RuntimeError, match="Running NPUGraph after shutdown"):
        f([torch.randn(4, device=DEVICE)])


def test_misuse_raises_clear_errors():
    with pytest.raises(RuntimeError, match="check is_backward and is_inference fail"):
        gt.npugraphify(boxed(torch.neg), [torch.ones(1, device=DEVICE)], device_index=0, is_backward=True,
                       is_inference=True)
    with pytest.raises(RuntimeError, match=r"check isinstance\(inputs, \(list, tuple\)\) fail"):
        gt.NPUGraphNode(None, gt.GraphID(0), None, "x", (0, 0), 0, None, torch.npu.Stream())
    with pytest.raises(RuntimeError, match="StorageWeakRefWrapper"):
        gt.check_memory_pool(0, (0, 0), [object()])
    with pytest.raises(RuntimeError, match=r"check isinstance\(index, tuple\) fail"):
        gt.AliasesPriorGraphOutput(3)


def test_pool_zero_names_no_pool():
    torch_npu._C._npu_beginAllocateCurrentThreadToPool(0, (0, 0))
    t = torch.ones(3, device=DEVICE)  # the ordinary allocator's
    torch_npu._C._npu_endAllocateToPool(0, (0, 0))
    assert torch_npu._C._npu_getCheckpointState(0, (0, 0)).segments == []
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, pool=(0, 0)):
        u = t * 2
    assert g.pool() != (0, 0)
    g.replay()
    torch.testing.assert_close(u, torch.full((3,), 2.0, device=DEVICE))


def test_inductor_reduce_overhead_outputs_survive_later_steps():
    fn = lambda a: torch.nn.functional.gelu(a) * a.mean()  # noqa: E731
    compiled = torch.compile(fn, mode="reduce-overhead")
    kept = []
    with torch.no_grad():
        for i in range(5):
            step()
            kept.append(compiled(torch.full((32,), float(i) / 4, device=DEVICE)))
    for i, out in enumerate(kept):
        torch.testing.assert_close(out, fn(torch.full((32,), float(i) / 4, device=DEVICE)))
    assert gt.get_manager(0).node_count() == 1


def test_dynamic_shapes_record_one_function_per_size():
    fn = lambda a: (a * 2).softmax(0)  # noqa: E731
    compiled = torch.compile(fn, mode="reduce-overhead", dynamic=True)
    results = []
    for n in (4, 8, 4, 8, 4, 8, 16):
        x = torch.arange(n, dtype=torch.float32, device=DEVICE)
        results.append((compiled(x), x))
    for out, x in results:
        torch.testing.assert_close(out, fn(x))
    manager = gt.get_manager(0)
    assert len(manager.ids_to_funcs) == 3 and manager.node_count() == 2  # 16 came once: warmed up only


def test_functions_that_mutate_their_inputs_run_without_graphs_and_buffers_stay_in_place():
    def fn(x, y):
        x.add_(1)
        return x * y

    compiled = torch.compile(fn, mode="reduce-overhead")
    x, y = torch.zeros(4, device=DEVICE), torch.full((4,), 2.0, device=DEVICE)
    x_eager = x.clone()
    with CountGraphs() as count:
        for _ in range(4):
            torch.testing.assert_close(compiled(x, y), fn(x_eager, y))
            torch.testing.assert_close(x, x_eager)
    assert count.replays == 0
    torch.manual_seed(0)
    norm = nn.BatchNorm1d(4).to(DEVICE)
    reference = copy.deepcopy(norm)
    compiled = torch.compile(norm, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(4):
            step()
            inp = torch.randn(8, 4, device=DEVICE)
            torch.testing.assert_close(compiled(inp), reference(inp))
    # The running statistics are buffers the graph updates where they are.
    torch.testing.assert_close(norm.running_mean, reference.running_mean)
    torch.testing.assert_close(norm.running_var, reference.running_var)
    assert gt.get_manager(0).node_count() == 1


def test_outputs_keep_their_npu_format_across_replays():
    fn = lambda a: torch_npu.npu_format_cast(a * 2, torch_npu.Format.FRACTAL_NZ)  # noqa: E731
    f = tree_function(fn, [torch.ones(4, 4, device=DEVICE)])
    for i in range(4):  # warm-up, record, replays
        step()
        out = f([torch.full((4, 4), float(i), device=DEVICE)])[0]
        assert torch_npu.get_npu_format(out) == torch_npu.Format.FRACTAL_NZ
        torch.testing.assert_close(out, torch.full((4, 4), 2.0 * i, device=DEVICE))
