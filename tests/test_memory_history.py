"""torch.npu.memory._record_memory_history / _snapshot / _dump_snapshot: the
allocator's event trace and the stacks of live allocations, as
torch.cuda.memory keeps them for the memory visualiser
(csrc/core/npu_memory_history.h)."""

import pickle

import pytest
import torch

import torch_npu

MB = 1 << 20


@pytest.fixture
def history():
    torch.npu.synchronize()
    torch.npu.empty_cache()
    yield torch.npu.memory._record_memory_history
    torch.npu.memory._record_memory_history(None)


def allocate_the_buffer(mb=24):
    return torch.empty(mb * MB, dtype=torch.uint8, device="npu")


def names(frames):
    return [frame["name"] for frame in frames]


def test_the_trace_follows_a_block_from_its_segment_to_empty_cache_with_its_stacks(history):
    history("all", context="all", stacks="python", max_entries=1000)
    assert torch_npu._C._npu_isHistoryEnabled()
    x = allocate_the_buffer()
    address = x.data_ptr()
    blocks = [b for s in torch.npu.memory._snapshot()["segments"] for b in s["blocks"] if b["address"] == address]
    assert [b["state"] for b in blocks] == ["active_allocated"]
    assert "allocate_the_buffer" in names(blocks[0]["frames"])
    del x
    torch.npu.synchronize()
    torch.npu.empty_cache()
    trace = torch.npu.memory._snapshot()["device_traces"][0]
    mine = [e for e in trace if e["addr"] == address]
    # A 24 MiB request takes a segment of its own: 26 MiB, since torch_npu pads requests by 32 bytes and
    # rounds such segments to 2 MiB. Block entries tell the requested bytes, segment entries the segment's.
    assert [(e["action"], e["size"]) for e in mine] == [
        ("segment_alloc", 26 * MB), ("alloc", 24 * MB), ("free_requested", 24 * MB), ("free_completed", 24 * MB),
        ("segment_free", 26 * MB)]
    assert "allocate_the_buffer" in names(mine[1]["frames"])
    assert "test_the_trace_follows_a_block_from_its_segment_to_empty_cache_with_its_stacks" in names(mine[2]["frames"])
    assert all(e["stream"] == 0 for e in mine)
    times = [e["time_us"] for e in mine]
    assert times == sorted(times)


def test_state_keeps_only_the_stacks_of_live_allocations(history):
    history("state", context="state", stacks="python")
    x = allocate_the_buffer(8)
    snapshot = torch.npu.memory._snapshot()
    assert snapshot["device_traces"][0] == []
    block = [b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == x.data_ptr()][0]
    assert "allocate_the_buffer" in names(block["frames"])
    history(None)
    assert not torch_npu._C._npu_isHistoryEnabled()
    block = [b for s in torch.npu.memory._snapshot()["segments"] for b in s["blocks"] if b["address"] == x.data_ptr()][0]
    assert block["frames"] == []  # stopping drops what was kept


def test_max_entries_keeps_the_newest_events_and_dump_snapshot_pickles_the_snapshot(history, tmp_path):
    history("all", context=None, max_entries=3)
    kept = [allocate_the_buffer(1) for _ in range(4)]
    trace = torch.npu.memory._snapshot()["device_traces"][0]
    assert len(trace) == 3 and trace[-1]["addr"] == kept[-1].data_ptr() and trace[-1]["action"] == "alloc"
    assert all(e["frames"] == [] for e in trace)  # context None: no stacks
    path = tmp_path / "snapshot.pickle"
    torch.npu.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        dumped = pickle.load(f)
    assert set(dumped) == {"segments", "device_traces"}
    assert [e["addr"] for e in dumped["device_traces"][0]] == [e["addr"] for e in trace]


@pytest.mark.parametrize("kwargs, message", [
    ({"enabled": "some"}, "enabled should be None, 'state' or 'all'"),
    ({"context": "stack"}, "context should be None, 'state', 'alloc' or 'all'"),
    ({"stacks": "cpp"}, "stacks should be 'python' or 'all'"),
    ({"max_entries": -1}, "max_entries should be a non-negative integer"),
])
def test_bad_arguments_are_named_and_change_nothing(history, kwargs, message):
    with pytest.raises(ValueError, match=message):
        history(**kwargs)
    assert not torch_npu._C._npu_isHistoryEnabled()


def test_memory_viz_flame_graph_lines_cover_every_segment_byte():
    from torch_npu.npu import _memory_viz
    keep = torch.ones(1000, device="npu")
    snapshot = torch.npu.memory._snapshot()
    lines = _memory_viz.segments(snapshot, format_flamegraph_func=lambda text: text).splitlines()
    by_segment = {}
    for line in lines:
        stack, size = line.rsplit(" ", 1)
        stream, segment = stack.split(";")[:2]
        assert stream.startswith("stream_") and segment.startswith("seg_")
        by_segment[int(segment[4:])] = by_segment.get(int(segment[4:]), 0) + int(size)
    for seg in snapshot["segments"]:
        assert by_segment[seg["address"]] == seg["total_size"]
    flat = _memory_viz.memory(snapshot, format_flamegraph_func=lambda text: text).splitlines()
    assert len(flat) == len(lines) and all(";seg_" not in line for line in flat)
    assert _memory_viz.__all__ == ["segments", "memory"] and keep.numel() == 1000


def test_segments_and_trace_entries_name_their_mem_pool(history):
    history("all", context="all", stacks="python", max_entries=1000)
    pool = torch.npu.MemPool()
    with torch.npu.use_mem_pool(pool):
        x = allocate_the_buffer(2)
    y = allocate_the_buffer(2)
    snapshot = torch.npu.memory._snapshot()
    # The pool of the segment holding each block (a block need not start its segment).
    pool_of = {b["address"]: tuple(s["segment_pool_id"]) for s in snapshot["segments"] for b in s["blocks"]}
    assert pool_of[x.data_ptr()] == pool.id and pool_of[y.data_ptr()] == (0, 0)
    allocs = {e["addr"]: tuple(e["pool_id"]) for e in snapshot["device_traces"][0] if e["action"] == "alloc"}
    assert allocs[x.data_ptr()] == pool.id and allocs[y.data_ptr()] == (0, 0)
    assert [b["address"] for s in pool.snapshot() for b in s["blocks"] if b["state"] == "active_allocated"] == \
        [x.data_ptr()]
