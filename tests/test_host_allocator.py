"""The pinned host allocator (csrc/core/host_allocator.h): torch's caching
host allocator on vNPU's streams. Its statistics, rounding and caching are
checked against what torch.cuda's (and real torch_npu's) would report; the
stream-ordered reuse against a copy held back on its stream."""

import gc
import subprocess
import sys
import textwrap

import pytest
import torch
import torch_npu  # noqa: F401

MiB = 1024 * 1024


def stats():
    return torch.npu.host_memory_stats()


def settle():
    gc.collect()
    torch.npu.synchronize()
    torch.npu.host_empty_cache()


def test_stats_have_torch_cudas_layout():
    settle()
    nested = torch.npu.host_memory_stats_as_nested_dict()
    for name in ("allocations", "allocated_bytes", "active_requests", "active_bytes"):
        assert set(nested[name]) == {"current", "peak", "allocated", "freed"}
    for name in ("host_alloc_time", "host_free_time"):
        assert set(nested[name]) == {"total", "max", "min", "count", "avg"}
    flat = stats()
    assert list(flat) == sorted(flat) and flat["allocations.current"] == nested["allocations"]["current"]
    assert flat["num_host_alloc"] == flat["allocations.allocated"]


def test_requests_round_up_to_a_power_of_two_and_freed_blocks_are_cached_and_reused():
    settle()
    before = stats()
    t = torch.ones(10 * 1024, pin_memory=True)  # 40 KiB -> a 64 KiB block
    assert t.is_pinned() and t[7:].is_pinned()
    after = stats()
    assert after["allocated_bytes.current"] - before["allocated_bytes.current"] == 64 * 1024
    assert after["active_bytes.current"] - before["active_bytes.current"] == 64 * 1024
    assert after["num_host_alloc"] - before["num_host_alloc"] == 1
    assert after["host_alloc_time.count"] - before["host_alloc_time.count"] == 1
    address = t.data_ptr()
    del t
    cached = stats()
    assert cached["active_bytes.current"] == before["active_bytes.current"]
    assert cached["allocated_bytes.current"] == after["allocated_bytes.current"]  # kept in the cache
    again = torch.empty(50_000, dtype=torch.uint8).pin_memory()  # same 64 KiB bucket
    assert again.data_ptr() == address and stats()["num_host_alloc"] == after["num_host_alloc"]
    torch.npu.host_empty_cache()  # in use: nothing to return
    assert stats()["allocated_bytes.current"] == after["allocated_bytes.current"]
    del again
    torch.npu.host_empty_cache()
    emptied = stats()
    assert emptied["allocated_bytes.current"] == before["allocated_bytes.current"]
    assert emptied["num_host_free"] - before["num_host_free"] == 1
    assert not torch.ones(4).is_pinned()


def test_a_block_a_queued_copy_still_reads_is_not_reused_until_the_copy_ran():
    settle()
    values = torch.arange(4096.0)
    src = values.pin_memory()
    address = src.data_ptr()
    dst = torch.empty(4096, device="npu")
    gate = torch.npu.ExternalEvent()
    gate.wait(torch.npu.current_stream())  # holds the copy back
    dst.copy_(src, non_blocking=True)
    del src
    other = torch.full((4096,), -1.0).pin_memory()  # must not take the block the copy reads
    other_address = other.data_ptr()
    assert other_address != address
    assert stats()["active_requests.current"] >= 2
    gate.record(torch.npu.Stream())
    torch.npu.synchronize()
    assert torch.equal(dst.cpu(), values)
    del other
    created = stats()["num_host_alloc"]
    first, second = torch.empty(4096).pin_memory(), torch.empty(4096).pin_memory()
    # The copy ran: both blocks are free again, and reused.
    assert {first.data_ptr(), second.data_ptr()} == {address, other_address}
    assert stats()["num_host_alloc"] == created
    del first, second
    settle()


def test_a_device_to_host_copy_into_pinned_memory_keeps_its_block_until_it_ran():
    settle()
    src = torch.arange(1 << 16, dtype=torch.float32, device="npu")
    dst = torch.empty(1 << 16).pin_memory()
    gate = torch.npu.ExternalEvent()
    gate.wait(torch.npu.current_stream())
    dst.copy_(src, non_blocking=True)
    address = dst.data_ptr()
    del dst
    torch.npu.host_empty_cache()  # the block waits for the copy: not returned
    assert stats()["active_bytes.current"] >= 1 << 18
    assert torch.empty(1 << 16).pin_memory().data_ptr() != address
    gate.record(torch.npu.Stream())
    settle()
    assert stats()["active_bytes.current"] == 0


def run_with_conf(conf, body):
    script = "import gc, torch, torch_npu\nMiB = 1024 * 1024\n" + textwrap.dedent(body)
    env = dict(__import__("os").environ, PYTORCH_NPU_ALLOC_CONF=conf)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)


def test_pinned_max_round_threshold_and_cached_size_from_the_environment():
    done = run_with_conf("pinned_max_round_threshold_mb:2,pinned_max_cached_size_mb:4", """
        s = lambda: torch.npu.host_memory_stats()["allocated_bytes.current"]
        small = torch.empty(MiB + 1, dtype=torch.uint8).pin_memory()      # rounded: 2 MiB
        print("small", s())
        big = torch.empty(3 * MiB + 1, dtype=torch.uint8).pin_memory()    # above 2 MiB: exact
        print("big", s() - 2 * MiB)
        huge = torch.empty(5 * MiB, dtype=torch.uint8).pin_memory()
        del huge
        gc.collect()
        print("after huge", s() - 2 * MiB - (3 * MiB + 1))              # above 4 MiB: not cached
        del big
        gc.collect()
        print("after big", s())                                           # below 4 MiB: cached
    """)
    assert done.returncode == 0, done.stderr
    lines = dict(line.rsplit(" ", 1) for line in done.stdout.splitlines())
    assert int(lines["small"]) == 2 * MiB
    assert int(lines["big"]) == 3 * MiB + 1
    assert int(lines["after huge"]) == 0
    assert int(lines["after big"]) == 2 * MiB + 3 * MiB + 1


def test_pinned_settings_at_run_time_and_bad_values():
    done = run_with_conf("", """
        from torch_npu.npu.memory import _set_allocator_settings
        _set_allocator_settings("pinned_max_round_threshold_mb:1")
        t = torch.empty(MiB + 3, dtype=torch.uint8).pin_memory()
        print("exact", torch.npu.host_memory_stats()["allocated_bytes.current"] == MiB + 3)
        for bad in ("pinned_max_cached_size_mb:0", "pinned_max_round_threshold_mb:x",
                    "pinned_max_cached_size_mb:-4"):
            try:
                _set_allocator_settings(bad)
                print("accepted", bad)
            except RuntimeError as e:
                print("refused", bad, "|", str(e).splitlines()[0])
    """)
    assert done.returncode == 0, done.stderr
    assert "exact True" in done.stdout and "accepted" not in done.stdout
    assert "refused pinned_max_cached_size_mb:0 | " in done.stdout
    assert "pinned_max_cached_size_mb error, must be [1," in done.stdout
    bad_env = run_with_conf("pinned_max_round_threshold_mb:zero", "torch.ones(4).pin_memory()\n")
    assert bad_env.returncode != 0 and "pinned_max_round_threshold_mb" in bad_env.stderr


def test_reset_peak_and_accumulated_stats():
    settle()
    t = torch.empty(MiB, dtype=torch.uint8).pin_memory()
    del t
    torch.npu.host_empty_cache()
    assert stats()["allocated_bytes.peak"] >= MiB and stats()["allocations.allocated"] >= 1
    torch.npu.reset_peak_host_memory_stats()
    torch.npu.reset_accumulated_host_memory_stats()
    after = stats()
    assert after["allocated_bytes.peak"] == after["allocated_bytes.current"]
    assert after["allocations.allocated"] == 0 and after["allocations.freed"] == 0
    assert after["host_alloc_time.count"] == 0


@pytest.mark.parametrize("fn", ["host_memory_stats", "host_empty_cache"])
def test_real_torch_npus_module_paths(fn):
    assert getattr(torch_npu.npu, fn) is getattr(torch.npu, fn)


def test_a_graph_captures_pinned_copies_and_keeps_their_blocks_in_its_pool():
    settle()
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        torch.ones(4, device="npu").mul_(2)
    torch.npu.synchronize()
    g = torch.npu.NPUGraph()
    dst = torch.zeros(64, device="npu")
    back = torch.empty(64).pin_memory()
    with torch.npu.graph(g, stream=s):
        src = torch.full((64,), 7.0).pin_memory()   # from the graph's host pool
        dst.copy_(src, non_blocking=True)           # each replay reads src anew, as in CUDA graphs
        back.copy_(dst * 2, non_blocking=True)      # and writes the pinned `back`
    g.replay()
    torch.npu.synchronize()
    assert torch.equal(dst.cpu(), torch.full((64,), 7.0)) and torch.equal(back, torch.full((64,), 14.0))
    src.fill_(3.0)
    g.replay()
    torch.npu.synchronize()
    assert torch.equal(back, torch.full((64,), 6.0))
    captured = src.data_ptr()
    del src
    gc.collect()
    before = stats()
    torch.npu.host_empty_cache()  # drains the default pool only
    assert stats()["allocations.current"] == before["allocations.current"]
    assert captured not in {torch.full((64,), -1.0).pin_memory().data_ptr() for _ in range(8)}
    g.replay()
    torch.npu.synchronize()
    assert torch.equal(back, torch.full((64,), 6.0))
    with pytest.raises(RuntimeError, match="a copy from host to device"):  # pageable memory stays refused
        with torch.npu.graph(torch.npu.NPUGraph(), stream=s):
            dst.copy_(torch.ones(64), non_blocking=True)
    g.reset()


def test_pinned_expandable_segments_and_register_are_turned_off_with_real_torch_npus_warning():
    done = run_with_conf("pin_memory_expandable_segments:True,pinned_mem_register:True",
                         "torch.empty(1, device='npu')\nprint(torch.ones(4).pin_memory().is_pinned())\n")
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
    assert "m_pin_memory_expandable_segments setting failure, the current cann version does not support" in done.stderr
    assert "pinned_mem_register setting failure" in done.stderr


def test_graphs_sharing_a_pool_handle_capture_again_after_a_reset():
    # Each capture has a host pool of its own: torch's host allocator keeps a
    # released pool until its blocks are freed and would refuse to reopen it.
    s = torch.npu.Stream()
    pool = torch.npu.graph_pool_handle()
    x = torch.ones(4, device="npu")
    for k in (2.0, 3.0, 4.0):
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, stream=s, pool=pool):
            pinned = torch.full((4,), k).pin_memory()
            y = x * 1
            y.copy_(pinned, non_blocking=True)
        g.replay()
        torch.npu.synchronize()
        assert torch.equal(y.cpu(), torch.full((4,), k))
        g.reset()


def test_a_reserve_segment_serves_small_requests_until_it_is_used_up():
    done = run_with_conf("pinned_reserve_segment_size_mb:1", """
        a = torch.empty(100, dtype=torch.uint8).pin_memory()
        b = torch.empty(5000, dtype=torch.uint8).pin_memory()  # 8 KiB block: two 4 KiB steps
        c = torch.empty(10, dtype=torch.uint8).pin_memory()
        print("steps", b.data_ptr() - a.data_ptr(), c.data_ptr() - b.data_ptr())
        big = torch.empty(2 * MiB, dtype=torch.uint8).pin_memory()  # beyond the reserve: from the system
        print("outside", abs(big.data_ptr() - a.data_ptr()) >= MiB)
        big.copy_(torch.ones(2 * MiB, dtype=torch.uint8))
        x = big.to("npu", non_blocking=True)
        a.fill_(7)
        print("copied", int(x.sum()) == 2 * MiB, int(a.to("npu", non_blocking=True).sum()) == 700)
        del a, b, c
        torch.npu.synchronize()
        torch.npu.host_empty_cache()
        d = torch.empty(100, dtype=torch.uint8).pin_memory()  # the reserve is never reused: further on
        print("pinned", d.is_pinned())
    """)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # Blocks are rounded to a power of two (128 B, 8 KiB), then carved in 4 KiB steps of the reserve.
    assert lines[0] == "steps 4096 8192", lines
    assert lines[1:] == ["outside True", "copied True True", "pinned True"], lines
    bad = run_with_conf("pinned_reserve_segment_size_mb:lots", "torch.ones(4).pin_memory()\n")
    assert bad.returncode != 0 and "pinned_reserve_segment_size_mb" in bad.stderr


COLLECTION = """
    import time
    active = lambda: torch.npu.host_memory_stats()["active_bytes.current"]
    src = torch.arange(1 << 16, dtype=torch.float32, device="npu")
    dst = torch.empty(1 << 16).pin_memory()
    gate = torch.npu.ExternalEvent()
    gate.wait(torch.npu.current_stream())
    dst.copy_(src, non_blocking=True)
    del dst
    assert active() >= 1 << 18
    gate.record(torch.npu.Stream())
    torch.npu.synchronize()
    deadline = time.monotonic() + 5
    while active() and time.monotonic() < deadline:
        time.sleep(0.01)
    print("active", active())
"""


@pytest.mark.parametrize("background", [True, False])
def test_pinned_use_background_threads_collects_freed_blocks_without_an_allocation(background):
    done = run_with_conf(f"pinned_use_background_threads:{background}", COLLECTION)
    assert done.returncode == 0, done.stderr
    active = int(done.stdout.split()[-1])
    # With the helper thread the block comes back once its copy ran; without,
    # only at the next allocation (or host_empty_cache).
    assert (active == 0) if background else (active >= 1 << 18)
