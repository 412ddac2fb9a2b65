"""torch.npu.host_memory_stats and its companions: the pinned host
allocator's statistics (csrc/core/host_allocator.h, torch's caching host
allocator), in torch.cuda.host_memory_stats' layout.

- ``allocations`` / ``allocated_bytes``: blocks (and their rounded bytes)
  the allocator owns, in use or cached.
- ``active_requests`` / ``active_bytes``: blocks handed out and not yet
  reusable (their tensor is alive, or a queued copy still uses them).
- ``num_host_alloc`` / ``num_host_free``: blocks taken from and returned to
  the system; ``host_alloc_time`` / ``host_free_time``: the time those took,
  in microseconds (total, max, min, count, avg).

Each Stat has ``current``, ``peak``, ``allocated`` (total increase) and
``freed`` (total decrease). Peaks are summed over the size buckets, as
torch's are: an estimate, not the true peak.
"""

import collections

from torch_npu import _C


def host_memory_stats():
    """The statistics as one flat, sorted dictionary:
    ``"allocated_bytes.current"``, ``"host_alloc_time.count"``, ..."""
    result = []

    def add(prefix, value):
        if isinstance(value, dict):
            for key, inner in value.items():
                add(f"{prefix}.{key}" if prefix else key, inner)
        else:
            result.append((prefix, value))

    add("", host_memory_stats_as_nested_dict())
    result.sort()
    return collections.OrderedDict(result)


def host_memory_stats_as_nested_dict():
    """host_memory_stats as nested dictionaries: ``stats["active_bytes"]["peak"]``."""
    return _C._npu_hostMemoryStats()


def reset_accumulated_host_memory_stats():
    """Resets the ``allocated`` and ``freed`` counts (and the time totals)."""
    _C._npu_resetAccumulatedHostMemoryStats()


def reset_peak_host_memory_stats():
    """Resets the ``peak`` values (and the time maxima and minima)."""
    _C._npu_resetPeakHostMemoryStats()
