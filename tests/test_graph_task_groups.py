"""Task groups of NPU graphs and external events, as vllm-ascend's full-graph
decoding uses them: each attention call is captured in a task group behind an
ExternalEvent wait; every step, the graph's replay is queued first and each
group is then re-recorded on an update stream with that step's sequence
lengths, recording the event after it (csrc/graph/npu_task_group.h,
csrc/graph/external_event.h). The runtime's tests of the group swap are
runtime/tests/test_stream.cpp (StreamCapture.ATaskGroups*, AReplayRuns*)."""

import gc

import pytest
import torch

import torch_npu


def _side_stream():
    capture = torch.npu.graph.default_capture_stream
    stream = torch.npu.Stream()
    return torch.npu.Stream() if stream == capture else stream


def _fia(q, k, v, out, lse, seq_lens):
    return torch_npu.npu_fused_infer_attention_score.out(
        q, k, v, num_heads=2, input_layout="BSH", scale=0.25, actual_seq_lengths_kv=seq_lens,
        softmax_lse_flag=True, out=[out, lse])


def _decode_graph(q, k, v, out, lse, seq_lens):
    """Captures: x = q * 2 (live across the group), [wait; reset; group: FIA into out], y = out + x."""
    graph = torch.npu.NPUGraph()
    event = torch.npu.ExternalEvent()
    with torch.npu.graph(graph):
        stream = torch.npu.current_stream()
        x = q * 2
        event.wait(stream)
        event.reset(stream)
        torch.npu.graph_task_group_begin(stream)
        _fia(q, k, v, out, lse, seq_lens)
        handle = torch.npu.graph_task_group_end(stream)
        y = out + x
    return graph, event, handle, y


def _reference(q, k, v, seq_lens):
    out, lse = torch_npu.npu_fused_infer_attention_score(
        q, k, v, num_heads=2, input_layout="BSH", scale=0.25, actual_seq_lengths_kv=seq_lens, softmax_lse_flag=True)
    return out + q * 2


def test_update_re_records_the_group_with_new_host_arguments():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 1, 32).half().npu(), torch.randn(2, 8, 32).half().npu(), torch.randn(2, 8, 32).half().npu()
    out, lse = torch.empty(2, 1, 32, dtype=torch.half, device="npu"), torch.empty(0, device="npu")
    _fia(q, k, v, out, lse, [8, 8])  # warm-up outside the capture
    torch.npu.synchronize()
    graph, event, handle, y = _decode_graph(q, k, v, out, lse, [8, 8])
    assert isinstance(handle, torch_npu._C._NPUTaskGroupHandle)
    update_stream = _side_stream()

    for step, seq_lens in enumerate([[8, 8], [3, 5], [1, 8], [6, 2]]):
        # vllm-ascend's order: queue the replay, then update behind it. The
        # update stream is kept busy first, so a replay that did not wait for
        # the event would run the previous step's group.
        graph.replay()
        if step == 2:
            # A first launch of a signature behind the replay: it must not run
            # on the caller (that would wait for the replay, which waits for
            # the record this thread has yet to issue).
            torch.special.i0(q.float() * (step + 0.5))
        with torch.npu.stream(update_stream):
            torch.npu._sleep(20000)
            torch.npu.graph_task_update_begin(update_stream, handle)
            _fia(q, k, v, out, lse, seq_lens)
            torch.npu.graph_task_update_end(update_stream)
            event.record(update_stream)
        torch.npu.synchronize()
        assert torch.equal(y.cpu(), _reference(q, k, v, seq_lens).cpu()), f"step {step}"
    graph.reset()


def test_the_one_call_update_binding_re_records_the_group_and_records_the_event():
    # torch_npu._C._npu_fused_infer_attention_score_out_graph: begin, the
    # operator, end and the event record, as one call
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 1, 32).half().npu(), torch.randn(2, 8, 32).half().npu(), torch.randn(2, 8, 32).half().npu()
    out, lse = torch.empty(2, 1, 32, dtype=torch.half, device="npu"), torch.empty(0, device="npu")
    _fia(q, k, v, out, lse, [8, 8])
    torch.npu.synchronize()
    graph, event, handle, y = _decode_graph(q, k, v, out, lse, [8, 8])
    update_stream = _side_stream()
    for seq_lens in ([2, 7], [8, 1]):
        graph.replay()
        with torch.npu.stream(update_stream):
            got = torch_npu._C._npu_fused_infer_attention_score_out_graph(
                update_stream, handle, event, q, k, v, num_heads=2, input_layout="BSH", scale=0.25,
                actual_seq_lengths_kv=seq_lens, softmax_lse_flag=True, out=[out, lse])
        assert got[0] is out and got[1] is lse
        torch.npu.synchronize()
        assert torch.equal(y.cpu(), _reference(q, k, v, seq_lens).cpu())
    graph.reset()


def test_an_update_runs_nothing_and_takes_effect_at_the_next_replay():
    a = torch.ones(4, device="npu")
    out = torch.zeros(4, device="npu")
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        stream = torch.npu.current_stream()
        torch.npu.graph_task_group_begin(stream)
        torch.mul(a, 2.0, out=out)
        handle = torch.npu.graph_task_group_end(stream)
    graph.replay()
    torch.npu.synchronize()
    assert out.tolist() == [2.0] * 4
    update_stream = _side_stream()
    with torch.npu.stream(update_stream):
        torch.npu.graph_task_update_begin(update_stream, handle)
        assert torch.npu.is_current_stream_capturing()
        torch.mul(a, 5.0, out=out)
        torch.npu.graph_task_update_end(update_stream)
    torch.npu.synchronize()
    assert out.tolist() == [2.0] * 4  # recorded, not run
    graph.replay()
    torch.npu.synchronize()
    assert out.tolist() == [5.0] * 4
    graph.reset()


def test_update_intermediates_do_not_disturb_the_graph_and_do_not_grow():
    # The group's work allocates an intermediate; the graph keeps a value
    # live across the group. Repeated updates must neither corrupt it (their
    # memory is the group's own pool) nor pile up memory.
    a = torch.arange(8.0, device="npu")
    out = torch.zeros(8, device="npu")
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        stream = torch.npu.current_stream()
        live = a * 3
        torch.npu.graph_task_group_begin(stream)
        torch.add(torch.sin(a) * 2, 1.0, out=out)
        handle = torch.npu.graph_task_group_end(stream)
        result = live + out
    update_stream = _side_stream()
    sizes = []
    for scale in range(1, 8):
        with torch.npu.stream(update_stream):
            torch.npu.graph_task_update_begin(update_stream, handle)
            torch.add(torch.cos(a) * scale, 1.0, out=out)
            torch.npu.graph_task_update_end(update_stream)
        torch.npu.current_stream().wait_stream(update_stream)  # the swap lands before the replay
        graph.replay()
        torch.npu.synchronize()
        expected = a.cpu() * 3 + torch.cos(a.cpu()) * scale + 1
        torch.testing.assert_close(result.cpu(), expected)
        sizes.append(torch.npu.memory_reserved())
    assert sizes[-1] == sizes[1]
    graph.reset()


def test_external_event_wait_holds_the_stream_until_a_record():
    ev = torch.npu.ExternalEvent()
    waiter, recorder = _side_stream(), torch.npu.Stream()
    x = torch.zeros(1, device="npu")
    ev.wait(waiter)
    with torch.npu.stream(waiter):
        x.add_(1)
    assert not ev.query()
    assert not waiter.query()  # held: the add has not run
    with torch.npu.stream(recorder):
        x.mul_(10)  # runs first: the waiter is held
        ev.record(recorder)
    waiter.synchronize()
    assert x.item() == 1.0 and ev.query()
    ev.reset(waiter)
    waiter.synchronize()
    assert not ev.query()


def test_bad_calls_say_what_is_wrong():
    stream = _side_stream()
    with pytest.raises(RuntimeError, match="graph_task_group_begin: the stream is not capturing"):
        torch.npu.graph_task_group_begin(stream)
    with pytest.raises(RuntimeError, match="graph_task_update_end: no task update is underway"):
        torch.npu.graph_task_update_end(stream)
    with pytest.raises(TypeError, match="expected a torch.npu.Stream"):
        torch.npu.graph_task_group_begin("npu:0")
    graph = torch.npu.NPUGraph()
    a = torch.ones(2, device="npu")
    with torch.npu.graph(graph):
        s = torch.npu.current_stream()
        with pytest.raises(RuntimeError, match="no task group is open"):
            torch.npu.graph_task_group_end(s)
        torch.npu.graph_task_group_begin(s)
        with pytest.raises(RuntimeError, match="do not nest"):
            torch.npu.graph_task_group_begin(s)
        a.add_(1)
        handle = torch.npu.graph_task_group_end(s)
        with pytest.raises(RuntimeError, match="the stream is capturing"):
            torch.npu.graph_task_update_begin(s, handle)
    with pytest.raises(TypeError):
        torch.npu.graph_task_update_begin(stream, "not a handle")
    graph.reset()
    gc.collect()
    with pytest.raises(RuntimeError, match="has been reset or destroyed"):
        torch.npu.graph_task_update_begin(stream, handle)


def test_a_wait_that_could_never_end_under_launch_blocking_raises(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "blocking.py"
    script.write_text(
        "import torch, torch_npu\n"
        "ev = torch.npu.ExternalEvent()\n"
        "ev.record(); ev.wait()  # recorded first: passes\n"
        "ev.reset()\n"
        "try:\n"
        "    ev.wait()\n"
        "except RuntimeError as e:\n"
        "    print('raised:', e)\n")
    env = dict(__import__("os").environ, ASCEND_LAUNCH_BLOCKING="1")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "raised: ExternalEvent.wait: the event was not recorded" in done.stdout


def test_super_kernel_scopes_and_options_are_checked_and_change_nothing():
    x, y = torch.randn(8, 8, device="npu"), torch.randn(8, 8, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        torch_npu.npu.super_kernel_scope_begin("outer")
        z1 = x @ y
        torch_npu.npu.super_kernel_scope_begin()
        z2 = z1 * 2.0
        torch_npu.npu.super_kernel_scope_end()
        z3 = z2 + 1.0
        torch_npu.npu.super_kernel_scope_end("outer")
    g.super_kernel_optimize(optimize_options={"preload_code": 1, "dcci_before_kernel_start": ["mm"],
                                              "aggressive_opt_strategies": {"event_breaker_bypass": 1}},
                            debug_options={"debug_sync_all": 0})
    g.replay()
    torch.testing.assert_close(z3.cpu(), (x.cpu() @ y.cpu()) * 2 + 1)
    for bad in ("", "   "):
        with pytest.raises(RuntimeError, match="scope_name should be None or a non-empty string"):
            torch_npu.npu.super_kernel_scope_begin(bad)
    with pytest.raises(RuntimeError, match="without a matching super_kernel_scope_begin"):
        torch_npu.npu.super_kernel_scope_end("never_opened")
    for kwargs, message in [(dict(optimize_options="invalid"), "must be dict or None"),
                            (dict(debug_options={"invalid_key": 1}), "has no option 'invalid_key'"),
                            (dict(optimize_options={"preload_code": "x"}), "should be a int"),
                            (dict(optimize_options={"aggressive_opt_strategies": {"bad": 1}}), "has no option")]:
        with pytest.raises(RuntimeError, match=message):
            g.super_kernel_optimize(**{"optimize_options": None, "debug_options": None, **kwargs})
    gen = torch.Generator(device="npu")
    g.register_generator_state(gen)
    with pytest.raises(ValueError, match="npu generator"):
        g.register_generator_state(torch.Generator())


def test_auto_dispatch_capture_updates_attention_with_new_sequence_lengths():
    # torch.npu.graph(g, auto_dispatch_capture=True): the functional call is
    # captured as its .out overload in a task group; g.update re-records it.
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4, 1, 16).half().npu() for _ in range(3))
    k, v = torch.randn(1, 4, 32, 16).half().npu(), torch.randn(1, 4, 32, 16).half().npu()
    kwargs = dict(num_heads=4, input_layout="BNSD", scale=0.25)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, auto_dispatch_capture=True):
        out, lse = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=[32], **kwargs)
    records = g.graph_dispatch_mode.graph_dispatch_records
    assert len(records) == 1 and records[0].op_cache_entry.__name__ == "npu_fused_infer_attention_score.out"
    for lengths in ([32], [5], [17]):
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": lengths}])
        g.replay()
        torch.npu.synchronize()
        want, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=lengths, **kwargs)
        assert torch.equal(out.cpu(), want.cpu()), lengths
    with pytest.raises(RuntimeError, match="there are 1 operators that need to be updated"):
        g.update(cpu_update_input=[{}, {}])
    plain = torch.npu.NPUGraph()
    with torch.npu.graph(plain):
        q * 2
    with pytest.raises(RuntimeError, match="does not support update"):
        plain.update(cpu_update_input=[{}])


def test_a_replay_queued_before_a_late_update_waits_for_that_update():
    # The capture sets each record's event once, so that a replay before any
    # update runs the capture-time arguments. The first update must clear
    # that setting: otherwise the replay after the second update, queued
    # while that update still waits on its stream, passes its wait on a stale
    # setting and runs the first update's arguments (a race CI once hit).
    torch.manual_seed(0)
    q = torch.randn(1, 4, 1, 16).half().npu()
    k, v = torch.randn(1, 4, 32, 16).half().npu(), torch.randn(1, 4, 32, 16).half().npu()
    kwargs = dict(num_heads=4, input_layout="BNSD", scale=0.25)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, auto_dispatch_capture=True):
        out, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=[32], **kwargs)
    update_stream, opener = g.graph_dispatch_mode.update_stream, torch.npu.Stream()
    # Pool streams are handed out round robin (as CUDA's): in a process that made many, torch.npu.Stream()
    # may return the update stream itself, behind whose gate the opening record would then wait forever.
    while opener == update_stream:
        opener = torch.npu.Stream()
    for lengths in ([32], [5], [17]):
        gate = torch.npu.ExternalEvent()
        gate.wait(update_stream)  # holds the update until the replay is queued
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": lengths}])
        g.replay()
        gate.record(opener)
        torch.npu.synchronize()
        want, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=lengths, **kwargs)
        assert torch.equal(out.cpu(), want.cpu()), lengths


def test_a_registered_handler_makes_an_operator_updatable():
    # A user's handler: torch.mul into out=, its scalar factor updatable
    # through UPDATE_SPECS (positional argument 1 <- update key "factor").
    from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS
    prepared = []

    @torch.npu.register_npu_graph_handler("mul")
    class _ScaleHandler(torch.npu.NpuGraphOpHandler):
        UPDATE_SPECS = {"mul": [("arg", 1, "factor")]}

        @classmethod
        def prepare_capture(cls, func, args, kwargs):
            prepared.append(func.__name__)
            return func, args, kwargs
    try:
        assert _NPU_GRAPH_OP_HANDLERS["mul"] is _ScaleHandler
        x, out = torch.arange(4.0, device="npu"), torch.zeros(4, device="npu")
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, auto_dispatch_capture=True):
            torch.mul(x, 2.0, out=out)
            x + 1  # no handler: captured as usual
        assert prepared == ["mul"] and len(g.graph_dispatch_mode.graph_dispatch_records) == 1
        g.replay()
        torch.npu.synchronize()
        assert out.tolist() == [0.0, 2.0, 4.0, 6.0]
        g.update(cpu_update_input=[{"factor": 5.0}])
        g.replay()
        torch.npu.synchronize()
        assert out.tolist() == [0.0, 5.0, 10.0, 15.0]
    finally:
        del _NPU_GRAPH_OP_HANDLERS["mul"]
