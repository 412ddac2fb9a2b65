"""The torch.npu memory API on top of the caching allocator."""

import gc

import pytest
import torch

MB = 1024 * 1024


def _settle():
    # Frees become visible once queued kernels that used the block finished.
    gc.collect()
    torch.npu.synchronize()


def test_memory_allocated_tracks_tensors():
    _settle()
    base = torch.npu.memory_allocated()
    t = torch.empty(4 * MB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_allocated() - base >= 4 * MB
    assert torch.npu.memory_reserved() >= torch.npu.memory_allocated()
    del t
    _settle()
    assert torch.npu.memory_allocated() == base


def test_memory_allocated_after_computation():
    _settle()
    base = torch.npu.memory_allocated()
    a = torch.randn(512, 512, device="npu")  # 1 MiB
    b = a @ a
    assert torch.npu.memory_allocated() - base >= 2 * 512 * 512 * 4
    del a, b
    _settle()
    assert torch.npu.memory_allocated() == base


def test_per_device_accounting():
    _settle()
    base0 = torch.npu.memory_allocated(0)
    base1 = torch.npu.memory_allocated(1)
    t = torch.empty(2 * MB, dtype=torch.uint8, device="npu:1")
    assert torch.npu.memory_allocated(1) - base1 >= 2 * MB
    assert torch.npu.memory_allocated("npu:1") == torch.npu.memory_allocated(1)
    assert torch.npu.memory_allocated(0) == base0
    del t
    _settle()


def test_max_memory_allocated_and_reset():
    _settle()
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    t = torch.empty(8 * MB, dtype=torch.uint8, device="npu")
    del t
    _settle()
    assert torch.npu.max_memory_allocated() >= base + 8 * MB
    assert torch.npu.max_memory_reserved() >= torch.npu.max_memory_allocated()
    torch.npu.reset_peak_memory_stats()
    assert torch.npu.max_memory_allocated() == torch.npu.memory_allocated()


def test_empty_cache_releases_reserved():
    _settle()
    torch.npu.empty_cache()
    # What stays reserved now are segments with live blocks (tensors an
    # earlier test in this process kept). A block larger than all of them
    # cannot be carved from their free parts, so it gets a segment of its own.
    baseline = torch.npu.memory_reserved()
    size = max(16 * MB, baseline + 2 * MB)
    t = torch.empty(size, dtype=torch.uint8, device="npu")
    del t
    _settle()
    reserved = torch.npu.memory_reserved()
    assert reserved >= baseline + size  # the freed block stays cached
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() <= baseline
    assert torch.npu.memory_reserved() >= torch.npu.memory_allocated()


def test_cached_block_is_reused():
    _settle()
    torch.npu.empty_cache()  # so the block freed below is the only 8 MiB candidate
    t = torch.empty(8 * MB, dtype=torch.uint8, device="npu")
    ptr = t.data_ptr()
    del t
    _settle()
    reserved = torch.npu.memory_reserved()
    u = torch.empty(8 * MB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_reserved() == reserved  # no new reservation
    assert u.data_ptr() == ptr
    del u


def test_memory_stats_keys():
    stats = torch.npu.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "reserved_bytes.all.current", "reserved_bytes.all.peak",
                "active_bytes.all.current", "num_alloc_retries", "num_ooms"):
        assert key in stats, key
    assert stats["allocated_bytes.all.current"] == torch.npu.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.npu.memory_reserved()
    assert all(isinstance(v, int) for v in stats.values())


def test_mem_get_info_reflects_reservation():
    _settle()
    torch.npu.empty_cache()
    free_before, total = torch.npu.mem_get_info()
    t = torch.empty(64 * MB, dtype=torch.uint8, device="npu")
    free_after, total2 = torch.npu.mem_get_info()
    assert total2 == total
    assert free_before - free_after >= 64 * MB
    del t
    _settle()
    torch.npu.empty_cache()


def test_set_per_process_memory_fraction():
    torch.npu.set_per_process_memory_fraction(0.5)
    try:
        assert torch.npu.get_per_process_memory_fraction() == 0.5
        x = torch.ones(1000, device="npu")  # small allocations still work
        assert x.sum().item() == 1000
    finally:
        torch.npu.set_per_process_memory_fraction(1.0)
    torch.npu.set_per_process_memory_fraction(0.8, 0)  # seed 000's form


def test_set_per_process_memory_fraction_bad_args():
    with pytest.raises(TypeError):
        torch.npu.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError):
        torch.npu.set_per_process_memory_fraction(1.5)
    with pytest.raises(ValueError):
        torch.npu.set_per_process_memory_fraction(-0.1)


def test_memory_fraction_limits_allocation():
    # A cap of 1% of the device turns a larger allocation into OOM.
    total = torch.npu.get_device_properties(1).total_memory
    torch.npu.set_per_process_memory_fraction(0.01, 1)
    try:
        with pytest.raises(torch.OutOfMemoryError, match="NPU out of memory"):
            torch.empty(int(total * 0.02), dtype=torch.uint8, device="npu:1")
        ok = torch.empty(int(total * 0.001), dtype=torch.uint8, device="npu:1")
        del ok
    finally:
        torch.npu.set_per_process_memory_fraction(1.0, 1)
    _settle()
    torch.npu.empty_cache()


def test_oom_message():
    total = torch.npu.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(total * 2, dtype=torch.uint8, device="npu")
    msg = str(info.value)
    assert msg.startswith("NPU out of memory. Tried to allocate")
    assert "NPU 0" in msg and "total capacity" in msg and "reserved in total by PyTorch" in msg
    # The device is fine afterwards.
    assert torch.ones(3, device="npu").sum().item() == 3


def test_caching_allocator_alloc_delete():
    _settle()
    base = torch.npu.memory_allocated()
    ptr = torch.npu.caching_allocator_alloc(MB)
    assert isinstance(ptr, int) and ptr != 0
    assert torch.npu.memory_allocated() - base >= MB
    torch.npu.caching_allocator_delete(ptr)
    assert torch.npu.memory_allocated() == base


def test_seed_snippet_memory_report():
    # Seed 002 prints these in GB; after empty_cache() nothing idle is reserved
    # beyond what tensors other tests keep alive pin (a segment in use stays).
    torch.npu.empty_cache()
    pinned = torch.npu.memory_reserved() - torch.npu.memory_allocated()
    t = torch.empty(3 * MB, dtype=torch.uint8, device="npu")
    allocated_gb = torch.npu.memory_allocated() / 1024 ** 3
    reserved_gb = torch.npu.memory_reserved() / 1024 ** 3
    assert reserved_gb >= allocated_gb >= 3 * MB / 1024 ** 3
    del t
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() - torch.npu.memory_allocated() <= pinned


def test_memory_summary():
    text = torch.npu.memory_summary()
    assert "PyTorch NPU memory summary, device ID 0" in text


def test_memory_snapshot():
    t = torch.empty(MB, dtype=torch.uint8, device="npu")
    snap = torch.npu.memory_snapshot()
    assert isinstance(snap, list) and snap
    # The tensor's block is in the snapshot, active, inside a segment.
    blocks = [b for seg in snap for b in seg["blocks"]]
    assert any(b["state"] == "active_allocated" and b["size"] >= MB for b in blocks), snap
    del t
