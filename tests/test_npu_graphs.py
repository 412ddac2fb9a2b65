"""NPU graphs (torch.npu.NPUGraph, torch.npu.graph, make_graphed_callables,
graph pools, MemPool): capture records without running, replays equal eager,
private pools keep the captured addresses, and what cannot be captured raises
the capture error instead of misbehaving.

The runtime's own tests of capture and replay are in
runtime/tests/test_stream.cpp (StreamCapture.*)."""

import gc

import pytest
import torch
import torch.nn as nn

CAPTURE_ERROR = "operation not permitted when stream is capturing"


def _mlp_step(x, w):
    y = x
    for _ in range(6):
        y = torch.relu(y @ w) * 0.5 + y
    return y.sum(dim=1)


def _side_stream():
    """A pool stream that is not torch.npu.graph's capture stream.

    The pool hands its 32 streams out round-robin (as CUDA's does), so a plain
    torch.npu.Stream() is the graph's default capture stream once in 32 calls,
    and a test about a second stream would then run on the first.
    """
    capture = torch.npu.graph.default_capture_stream
    stream = torch.npu.Stream()
    return torch.npu.Stream() if stream == capture else stream


def _warm_up(fn, *args):
    s = torch.npu.Stream()
    s.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(s):
        fn(*args)
    torch.npu.current_stream().wait_stream(s)
    torch.npu.synchronize()


def test_replay_equals_eager_and_follows_refilled_inputs():
    w = torch.randn(32, 32, device="npu") / 8
    x = torch.randn(16, 32, device="npu")
    _warm_up(_mlp_step, x, w)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = _mlp_step(x, w)
    assert g._num_tasks() > 0
    for _ in range(3):
        fresh = torch.randn(16, 32)
        x.copy_(fresh)
        g.replay()
        torch.testing.assert_close(out.cpu(), _mlp_step(fresh, w.cpu()), rtol=1e-5, atol=1e-5)


def test_capture_runs_nothing_and_each_replay_runs_everything_once():
    x = torch.zeros(8, device="npu")
    _warm_up(lambda t: t.add_(0), x)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        x.add_(1)
        x.mul_(2)
    assert x.cpu().tolist() == [0.0] * 8  # captured, not run
    g.replay()
    g.replay()
    assert x.cpu().tolist() == [6.0] * 8  # (0+1)*2 = 2, (2+1)*2 = 6


def test_replay_is_ordered_with_eager_work_on_the_replaying_stream():
    x = torch.ones(1000, device="npu")
    _warm_up(lambda t: t * 3, x)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        y = x * 3
    # Replayed on the default stream, between eager writes of its input.
    x.fill_(2)
    g.replay()
    x.fill_(5)
    assert y.cpu().unique().tolist() == [6.0]
    side = _side_stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        torch.npu._sleep(20000)
        g.replay()
    torch.npu.current_stream().wait_stream(side)
    assert y.cpu().unique().tolist() == [15.0]


def test_captured_memory_is_private_to_the_graph():
    x = torch.randn(256, 256, device="npu")
    _warm_up(lambda t: (t + 1) * 2, x)
    gc.collect()
    before = torch.npu.memory_allocated()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        tmp = x + 1
        out = tmp * 2
        del tmp  # freed during capture: the pool may reuse it within the capture only
    # The graph's memory is counted like CUDA's graph pools.
    assert torch.npu.memory_allocated() - before >= out.nbytes
    address = out.data_ptr()
    del out
    gc.collect()
    # Ordinary allocations never land in the graph's pool, even after the
    # static output died: the replay still writes there.
    others = [torch.empty(256, 256, device="npu") for _ in range(8)]
    assert all(o.data_ptr() != address for o in others)
    g.replay()
    torch.npu.synchronize()
    g.reset()
    torch.npu.empty_cache()


def test_graphs_share_a_pool_handle():
    pool = torch.npu.graph_pool_handle()
    x = torch.randn(64, device="npu")
    _warm_up(lambda t: t.sin(), x)
    g1, g2 = torch.npu.NPUGraph(), torch.npu.NPUGraph()
    with torch.npu.graph(g1, pool=pool):
        a = x.sin()
    with torch.npu.graph(g2, pool=g1.pool()):
        b = a.cos()
    assert g1.pool() == g2.pool() == pool
    g1.replay()
    g2.replay()
    torch.testing.assert_close(b.cpu(), x.cpu().sin().cos())


@pytest.mark.parametrize("case", ["item", "synchronize", "to_cpu", "from_cpu", "nonzero", "event_sync",
                                  "stream_sync"])
def test_operations_that_cannot_be_captured_raise_and_leave_the_device_usable(case):
    x = torch.randn(16, device="npu")
    _warm_up(lambda t: t * 2, x)
    forbidden = {
        "item": lambda: (x * 2).sum().item(),
        "synchronize": torch.npu.synchronize,
        "to_cpu": lambda: (x * 2).cpu(),
        "from_cpu": lambda: torch.ones(4).npu(),
        "nonzero": lambda: (x > 0).nonzero(),
        "event_sync": lambda: torch.npu.current_stream().record_event().synchronize(),
        "stream_sync": lambda: torch.npu.current_stream().synchronize(),
    }[case]
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match=CAPTURE_ERROR):
        with torch.npu.graph(g):
            y = x * 2
            forbidden()
    assert not torch.npu.is_current_stream_capturing()
    # The failed capture is gone; the stream and the device work as before.
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)
    g2 = torch.npu.NPUGraph()
    with torch.npu.graph(g2):
        y = x * 2
    g2.replay()
    torch.testing.assert_close(y.cpu(), x.cpu() * 2)


def _random_block(x, generator=None):
    # Random ops of several kinds: a factory, an in-place draw, dropout
    # (a hand-written kernel), sampling and one with an explicit generator.
    a = torch.rand(x.shape, device="npu") + x
    b = torch.empty_like(x).normal_() * a
    c = torch.nn.functional.dropout(b, p=0.5, training=True)
    d = torch.randn(x.shape, device="npu", generator=generator) if generator is not None else 0
    m = torch.multinomial(a.abs() + 0.1, x.numel(), replacement=True).to(x.dtype)
    return torch.stack([c, c + d, m])


def _rewinding_block():
    # get_rng_state / set_rng_state between draws, as activation
    # checkpointing's recompute does: the second draw repeats the first.
    first = torch.rand(8, device="npu")
    state = torch.npu.get_rng_state()
    second = torch.rand(8, device="npu")
    torch.npu.set_rng_state(state)
    third = torch.rand(8, device="npu")
    return first, second, third


def test_rng_state_calls_in_a_capture_replay_as_they_ran_eagerly():
    torch.npu.manual_seed(11)
    eager = _rewinding_block()
    eager_next = torch.rand(4, device="npu")
    assert torch.equal(eager[1].cpu(), eager[2].cpu())
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        captured = _rewinding_block()
    torch.npu.manual_seed(11)
    g.replay()
    # The replay advanced the generator as far as the eager block did.
    replay_next = torch.rand(4, device="npu")
    for e, c in zip(eager, captured):
        assert torch.equal(e.cpu(), c.cpu())
    assert torch.equal(eager_next.cpu(), replay_next.cpu())


def test_checkpoint_preserving_rng_state_in_a_capture_matches_eager():
    def fn(x):
        return torch.nn.functional.dropout(x, 0.5) * torch.sigmoid(torch.randn(16, device="npu"))

    def step():
        x = torch.ones(16, device="npu", requires_grad=True)
        out = torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=True)
        (grad,) = torch.autograd.grad(out.sum(), x)
        return out.detach(), grad

    fn(torch.ones(16, device="npu"))  # warm-up before the capture
    torch.npu.manual_seed(42)
    eager_out, eager_grad = step()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        graph_out, graph_grad = step()
    torch.npu.manual_seed(42)
    g.replay()
    assert torch.equal(eager_out.cpu(), graph_out.cpu())
    # The recompute drew the forward's numbers again: gradients match exactly.
    assert torch.equal(eager_grad.cpu(), graph_grad.cpu())


def test_a_capture_cannot_reseed_the_generator():
    torch.npu.manual_seed(0)
    other = torch.npu.get_rng_state()
    torch.npu.manual_seed(1)
    message = "set_current_seed can be called during stream capture only if new seed is the same"
    for reseed in (lambda: torch.npu.manual_seed(0), lambda: torch.npu.set_rng_state(other)):
        g = torch.npu.NPUGraph()
        with pytest.raises(RuntimeError, match=message):
            with torch.npu.graph(g):
                reseed()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        torch.npu.manual_seed(1)  # the same seed: allowed, nothing changes
        y = torch.rand(2, device="npu")
    torch.npu.manual_seed(1)
    expected = torch.rand(2, device="npu")
    torch.npu.manual_seed(1)
    g.replay()
    assert torch.equal(y.cpu(), expected.cpu())


def test_random_ops_in_a_capture_draw_fresh_numbers_at_each_replay_as_eager_would():
    x = torch.randn(64, device="npu")
    gen = torch.Generator(device="npu")
    _warm_up(_random_block, x, gen)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = _random_block(x, gen)

    def eager_then_next(seed):
        torch.npu.manual_seed(seed)
        gen.manual_seed(seed + 1)
        y = _random_block(x, gen)
        return y.cpu(), torch.rand(3, device="npu").cpu(), torch.randn(2, device="npu", generator=gen).cpu()

    def replay_then_next(seed):
        torch.npu.manual_seed(seed)
        gen.manual_seed(seed + 1)
        g.replay()
        y = out.clone()
        return y.cpu(), torch.rand(3, device="npu").cpu(), torch.randn(2, device="npu", generator=gen).cpu()

    # A replay draws exactly what the captured ops would have drawn eagerly,
    # and the generators continue after it as after the eager ops.
    for seed in (0, 7):
        for eager, replayed in zip(eager_then_next(seed), replay_then_next(seed)):
            assert torch.equal(eager, replayed)
    # Two replays in a row draw different numbers (dropout masks too).
    torch.npu.manual_seed(3)
    g.replay()
    first = out.clone()
    g.replay()
    second = out.clone()
    assert not torch.equal(first.cpu(), second.cpu())
    assert not torch.equal((first[0] == 0).cpu(), (second[0] == 0).cpu())
    # Queued replays each take their own state: replaying twice before the
    # first ran equals replaying with a sync in between.
    torch.npu.manual_seed(5)
    gen.manual_seed(6)
    g.replay(); a = out.clone(); g.replay(); b = out.clone()
    torch.npu.manual_seed(5)
    gen.manual_seed(6)
    g.replay(); torch.npu.synchronize(); a2 = out.clone(); g.replay(); torch.npu.synchronize(); b2 = out.clone()
    assert torch.equal(a.cpu(), a2.cpu()) and torch.equal(b.cpu(), b2.cpu())


def test_a_capture_leaves_the_generator_alone():
    x = torch.randn(8, device="npu")
    _warm_up(_random_block, x)
    torch.npu.manual_seed(11)
    offset = torch.npu.default_generators[0].get_offset()
    with torch.npu.graph(torch.npu.NPUGraph()):
        _random_block(x)
    assert torch.npu.default_generators[0].get_offset() == offset


def test_graphed_callables_with_dropout_train_as_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.3), nn.Linear(32, 4)).npu()
    eager_model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.3), nn.Linear(32, 4)).npu()
    eager_model.load_state_dict(model.state_dict())
    x = torch.randn(8, 16, device="npu", requires_grad=True)
    graphed = torch.npu.make_graphed_callables(model, (x,))
    data = torch.randn(8, 16, device="npu")
    for seed in (1, 2):
        torch.npu.manual_seed(seed)
        out = graphed(data)
        out.sum().backward()
        torch.npu.manual_seed(seed)
        ref = eager_model(data)
        ref.sum().backward()
        assert torch.equal(out.cpu(), ref.cpu())
        for p, q in zip(model.parameters(), eager_model.parameters()):
            assert torch.equal(p.grad.cpu(), q.grad.cpu())
        # As with CUDA graphs, a parameter's grad may be the static buffer the
        # next replay writes: clear grads between steps.
        model.zero_grad(set_to_none=True)
        eager_model.zero_grad(set_to_none=True)


def test_capture_api_errors():
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="non-default stream"):
        g.capture_begin()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    with pytest.raises(ValueError, match="capture error mode"):
        with torch.npu.graph(g, capture_error_mode="loose"):
            pass
    x = torch.ones(4, device="npu")
    with torch.npu.graph(g):
        x.add_(1)
    with pytest.raises(RuntimeError, match="already owns a captured graph"):
        with torch.npu.graph(g):
            pass
    assert torch.npu.is_current_stream_capturing() is False


def test_is_current_stream_capturing_inside_the_capture():
    seen = []
    with torch.npu.graph(torch.npu.NPUGraph()):
        seen.append(torch.npu.is_current_stream_capturing())
        torch.ones(1, device="npu").add_(1)
    assert seen == [True] and not torch.npu.is_current_stream_capturing()


def test_kernel_error_in_a_replay_reaches_the_next_sync_and_poisons_the_output():
    table = torch.randn(10, 4, device="npu")
    index = torch.tensor([1, 2], device="npu")
    _warm_up(lambda: table.index_select(0, index))
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        rows = table.index_select(0, index)
    index.fill_(99)  # out of range at replay time
    g.replay()
    with pytest.raises(torch.AcceleratorError, match="index"):
        torch.npu.synchronize()
    assert torch.isnan(rows.cpu()).all()  # never stale data that looks valid
    index.fill_(3)
    g.replay()
    torch.testing.assert_close(rows.cpu(), table.cpu()[[3, 3]])


def test_make_graphed_callables_trains_like_eager():
    def build():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).npu()

    eager, graphed = build(), build()
    x = torch.randn(8, 16, device="npu", requires_grad=True)
    graphed = torch.npu.make_graphed_callables(graphed, (x,))
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_g = torch.optim.SGD(graphed.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        data = torch.randn(8, 16, generator=g).npu().requires_grad_()
        target = torch.randn(8, 4, generator=g).npu()
        for model, opt in ((eager, opt_e), (graphed, opt_g)):
            opt.zero_grad()
            inp = data.detach().clone().requires_grad_()
            loss = ((model(inp) - target) ** 2).mean()
            loss.backward()
            opt.step()
            model._last = (loss.detach(), inp.grad)
        torch.testing.assert_close(graphed._last[0].cpu(), eager._last[0].cpu(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(graphed._last[1].cpu(), eager._last[1].cpu(), rtol=1e-5, atol=1e-6)
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        torch.testing.assert_close(pg.cpu(), pe.cpu(), rtol=1e-5, atol=1e-6)
    graphed.eval()  # the other mode runs eagerly
    torch.testing.assert_close(graphed(x).cpu(), eager.eval()(x).cpu(), rtol=1e-5, atol=1e-6)


def test_make_graphed_callables_rejects_modules_with_hooks():
    m = nn.Linear(4, 4).npu()
    m.register_forward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="must not have hooks"):
        torch.npu.make_graphed_callables(m, (torch.randn(2, 4, device="npu"),))


def test_mem_pool_routes_allocations_and_returns_its_memory():
    pool = torch.npu.MemPool()
    assert pool.use_count() == 1
    gc.collect()
    torch.npu.empty_cache()
    before = torch.npu.memory_reserved()
    with torch.npu.use_mem_pool(pool):
        inside = torch.empty(4 * 1024 * 1024, dtype=torch.uint8, device="npu")
    outside = torch.empty(4 * 1024 * 1024, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_reserved() > before
    del inside
    gc.collect()
    # The pool's freed block is not reused outside it.
    again = torch.empty(4 * 1024 * 1024, dtype=torch.uint8, device="npu")
    assert again.data_ptr() != outside.data_ptr()
    del pool, again, outside
    gc.collect()
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() == before
    # A pool's use holds a reference, as torch.cuda's does.
    pool = torch.npu.MemPool()
    with torch.npu.use_mem_pool(pool):
        assert pool.use_count() == 2
    assert pool.use_count() == 1
    # Pools of a pluggable allocator: tests/test_pluggable_allocator.py.


def test_a_use_on_oom_pool_lends_its_cache_when_the_limited_device_runs_out():
    device, mib = 2, 1024 * 1024

    def empty(mb):
        return torch.empty(mb * mib, dtype=torch.uint8, device=f"npu:{device}")

    keeper = torch.npu.MemPool(device=device)
    lender = torch.npu.MemPool(use_on_oom=True, device=device)
    gc.collect()
    torch.npu.empty_cache()
    total = torch.npu.get_device_properties(device).total_memory
    # Requests are padded and rounded to 2 MiB: 32 MiB takes 34 MiB.
    torch.npu.set_per_process_memory_fraction((torch.npu.memory_reserved(device) + 72 * mib) / total, device)
    try:
        with torch.npu.use_mem_pool(keeper):
            a = empty(32)
        with torch.npu.use_mem_pool(lender):
            b = empty(32)
        lent_at = b.data_ptr()
        with pytest.raises(torch.OutOfMemoryError):
            empty(32)  # the pools' segments count toward the process's limit
        del a, b
        c = empty(24)  # no room for a new segment: the lender's cached block serves it
        assert c.data_ptr() == lent_at
        c.fill_(3)
        assert int(c.sum()) == 3 * 24 * mib
        with pytest.raises(torch.OutOfMemoryError):
            empty(24)  # the keeper (use_on_oom=False) lends nothing, the lender has 8 MiB left
        del c  # back to the lender's cache, not the ordinary one
        with torch.npu.use_mem_pool(lender):
            e = empty(16)
        assert e.data_ptr() == lent_at
        del e, lender  # a deleted pool lends nothing; its memory goes back
        gc.collect()
        torch.npu.empty_cache()
        d = empty(24)
        del d
    finally:
        torch.npu.set_per_process_memory_fraction(1.0, device)
        del keeper
        gc.collect()
        torch.npu.empty_cache()


# --- multi-stream capture: fork and join through events ----------------------

def test_a_capture_forks_onto_a_side_stream_and_joins_back():
    x = torch.randn(32, device="npu")
    side = _side_stream()

    def block():
        capture = torch.npu.current_stream()
        a = x * 2
        side.wait_stream(capture)  # fork: side's work joins the capture
        with torch.npu.stream(side):
            b = (a + 1).sin()
        c = x - 1  # meanwhile on the capturing stream
        capture.wait_stream(side)  # join
        return b * c

    _warm_up(lambda: block())
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = block()
    # The side stream's tasks are in the graph: mul, add, sin, sub, mul.
    assert len([n for n in g._task_names() if n != "stream_wait_event"]) == 5
    for _ in range(2):
        fresh = torch.randn(32)
        x.copy_(fresh.npu())
        g.replay()
        torch.testing.assert_close(out.cpu(), ((fresh * 2 + 1).sin()) * (fresh - 1))
    # Both streams are back to normal.
    with torch.npu.stream(side):
        y = x + 1
    side.synchronize()
    torch.testing.assert_close(y.cpu(), x.cpu() + 1)
    assert not torch.npu.is_current_stream_capturing()


def test_a_capture_with_unjoined_work_raises_and_leaves_both_streams_usable():
    x = torch.randn(8, device="npu")
    side = _side_stream()
    _warm_up(lambda t: t * 2, x)
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match=CAPTURE_ERROR + ".*unjoined work"):
        with torch.npu.graph(g):
            side.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(side):
                x * 3  # never joined back
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    with torch.npu.stream(side):
        y = x * 3
    side.synchronize()
    torch.testing.assert_close(y.cpu(), x.cpu() * 3)
    g2 = torch.npu.NPUGraph()
    with torch.npu.graph(g2):
        z = x * 4
    g2.replay()
    torch.testing.assert_close(z.cpu(), x.cpu() * 4)


def test_events_of_a_capture_cannot_be_waited_on_by_the_host_or_after_it():
    x = torch.randn(8, device="npu")
    _warm_up(lambda t: t * 2, x)
    g = torch.npu.NPUGraph()
    event = torch.npu.Event()
    with torch.npu.graph(g):
        y = x * 2
        event.record()
        for host_wait in (event.query, event.synchronize):
            with pytest.raises(RuntimeError, match=CAPTURE_ERROR + ".*event recorded in a graph capture"):
                host_wait()
    other = _side_stream()
    with pytest.raises(RuntimeError, match=CAPTURE_ERROR + ".*capture that has ended"):
        other.wait_event(event)
    event.record()  # recorded again outside: an ordinary event
    event.synchronize()
    assert event.query()
    g.replay()
    torch.testing.assert_close(y.cpu(), x.cpu() * 2)


# --- capture error modes ------------------------------------------------------

def _synchronize_from_another_thread():
    import threading
    outcome = []

    def run():
        try:
            torch.npu.synchronize()
            outcome.append("ok")
        except RuntimeError as e:
            outcome.append(str(e))

    t = threading.Thread(target=run)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive(), "a device synchronize from another thread hung during a capture"
    return outcome[0]


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_capture_error_modes_decide_who_may_synchronize_the_device(mode):
    x = torch.randn(8, device="npu")
    _warm_up(lambda t: t * 2, x)
    busy = _side_stream()
    with torch.npu.stream(busy):
        torch.npu._sleep(20000)  # other streams' work is still waited for
        late = x + 5
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, capture_error_mode=mode):
        y = x * 2
        other_thread = _synchronize_from_another_thread()
        if mode == "global":
            assert CAPTURE_ERROR in other_thread
        else:
            assert other_thread == "ok"
            assert busy.query()  # the other thread's synchronize waited for it
        if mode == "relaxed":
            torch.npu.synchronize()  # skips the capture
        else:
            with pytest.raises(RuntimeError, match=CAPTURE_ERROR):
                torch.npu.synchronize()
        z = y + 1
    g.replay()
    torch.testing.assert_close(z.cpu(), x.cpu() * 2 + 1)
    torch.testing.assert_close(late.cpu(), x.cpu() + 5)


# --- torch.accelerator.Graph (csrc/graph/accelerator_graph.cpp) ---------------

def test_accelerator_graph_captures_and_replays_on_npu():
    x = torch.ones(4, device="npu")
    y = torch.empty_like(x)
    g = torch.accelerator.Graph()
    with torch.Stream(), g:
        y.copy_(x * 3 + 1)
    y.zero_()
    x.fill_(2)  # a replay reads the captured input's current contents
    g.replay()
    torch.accelerator.synchronize()
    assert torch.equal(y.cpu(), torch.full((4,), 7.0))
    g.reset()


def test_accelerator_graph_random_ops_draw_fresh_numbers_per_replay():
    out = torch.empty(64, device="npu")
    g = torch.accelerator.Graph()
    with torch.Stream(), g:
        out.copy_(torch.rand(64, device="npu"))
    g.replay()
    first = out.cpu()
    g.replay()
    assert not torch.equal(first, out.cpu())
    assert ((0 <= first) & (first < 1)).all()


def test_accelerator_graph_keep_graph_instantiates_and_shares_a_pool():
    x = torch.ones(8, device="npu")
    g1 = torch.accelerator.Graph(keep_graph=True)
    with torch.Stream(), g1:
        a = x + 1
    g1.instantiate()
    g2 = torch.accelerator.Graph(pool=g1.pool())
    with torch.Stream(), g2:
        b = a * 2
    g1.replay()
    g2.replay()
    assert torch.equal(b.cpu(), torch.full((8,), 4.0))


def test_npugraph_getter_names_the_graph_capturing_or_refuses_clearly():
    x = torch.ones(2, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        x.add_(1)
        assert torch.npu.NPUGraph.get_currently_capturing_graph() is g
    with pytest.raises(RuntimeError, match="not currently capturing"):
        torch.npu.NPUGraph.get_currently_capturing_graph()
    with torch.Stream(), torch.accelerator.Graph():
        x.add_(1)
        with pytest.raises(RuntimeError, match="not supported during torch.accelerator.Graph capture"):
            torch.npu.NPUGraph.get_currently_capturing_graph()


def test_a_no_split_mem_pool_holds_one_block_per_segment():
    split, no_split = torch.npu.MemPool(), torch.npu.MemPool(no_split=True)
    keep = []
    for pool in (split, no_split):
        with torch.npu.use_mem_pool(pool):
            keep += [torch.empty(1 << 20, device="npu") for _ in range(2)]  # 4 MiB each
    by_split, by_no_split = split.snapshot(), no_split.snapshot()
    assert len(by_no_split) == 2 and len(by_split) == 1
    assert all(len(s["blocks"]) == 1 and s["blocks"][0]["size"] == s["total_size"] for s in by_no_split)
    del keep
