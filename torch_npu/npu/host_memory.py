"""torch.npu.host_memory_stats and its companions (pinned host memory statistics).

Real torch_npu's caching host allocator counts its allocations, frees,
cached and in-use bytes, like torch.cuda.host_memory_stats. vNPU's pinned
allocator (csrc/core/host_allocator.h) keeps no cache and no statistics: a
block returns to the system as soon as its tensor dies and the copies queued
on it have run, and nothing counts the bytes in use. Zeros would be false
whenever a pinned tensor is alive, so these raise a RuntimeError that says
so (host_empty_cache, which has nothing to free, is in memory.py).
"""


def _not_supported(fn):
    raise RuntimeError(f"torch.npu.{fn} is not supported on vNPU: the pinned host allocator "
                       "(csrc/core/host_allocator.h) keeps no cache and records no statistics. "
                       "Count the bytes of your pinned tensors (t.untyped_storage().nbytes()) instead.")


def host_memory_stats():
    _not_supported("host_memory_stats")


def host_memory_stats_as_nested_dict():
    _not_supported("host_memory_stats_as_nested_dict")


def reset_accumulated_host_memory_stats():
    _not_supported("reset_accumulated_host_memory_stats")


def reset_peak_host_memory_stats():
    _not_supported("reset_peak_host_memory_stats")
