"""The NPU memory API (torch.npu.memory_allocated, empty_cache, ...), mirroring
torch.cuda's, over the caching allocator (csrc/core/npu_caching_allocator.h).

torch.accelerator.memory_* reach the same allocator through c10's
DeviceAllocator interface, so both report the same figures."""

import collections
import pickle
import sys

import torch

from torch_npu import _C
from torch_npu.npu.device import _index, _lazy_init, device_count as _device_count, is_initialized as _is_initialized


def _device(device) -> int:
    _lazy_init()
    index = _index(device)
    return _C._current_device() if index < 0 else index


def memory_stats(device=None) -> "collections.OrderedDict[str, int]":
    """Allocator counters with torch.cuda's key names, sorted, e.g.
    'allocated_bytes.all.current' (also .peak, .allocated, .freed, and the
    pools .small_pool / .large_pool), 'num_ooms', 'num_alloc_retries'."""
    return collections.OrderedDict(sorted(_C._memory_stats(_device(device)).items()))


def memory_allocated(device=None) -> int:
    """Bytes held by tensors (blocks rounded to the allocator's granularity)."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    """Bytes of device memory the caching allocator holds, in use or cached."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def memory_cached(device=None) -> int:
    """Deprecated alias of memory_reserved (as in torch.cuda)."""
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated alias of max_memory_reserved (as in torch.cuda)."""
    return max_memory_reserved(device)


def reset_peak_memory_stats(device=None) -> None:
    """Sets every peak counter to its current value."""
    _C._reset_peak_memory_stats(_device(device))


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None) -> None:
    """Zeroes the '.allocated'/'.freed' totals and the event counters."""
    _C._reset_accumulated_memory_stats(_device(device))


def empty_cache() -> None:
    """Returns cached, unused blocks to the device, after the work queued
    before they were freed has run. Tensors keep their memory."""
    _C._empty_cache()


def _set_allocator_settings(settings: str) -> None:
    """Applies caching allocator options at run time, in PYTORCH_NPU_ALLOC_CONF's
    syntax ("garbage_collection_threshold:0.8"); options not named keep their
    values. Raises RuntimeError for an unknown key, a bad value or an option
    that only PYTORCH_NPU_ALLOC_CONF can set (before the first allocation)."""
    if not isinstance(settings, str):
        raise TypeError(f"_set_allocator_settings: settings should be a str, got {type(settings).__name__}")
    apply = getattr(_C, "_npu_set_allocator_settings", None)
    if apply is None:
        raise RuntimeError("_set_allocator_settings: this build of torch_npu._C has no _npu_set_allocator_settings; "
                           "rebuild the extension (scripts/build.sh), or set PYTORCH_NPU_ALLOC_CONF before the "
                           "first allocation instead.")
    apply(settings)


def host_empty_cache() -> None:
    """Returns the pinned host allocator's cached blocks to the system. A
    block whose tensor died while a queued copy still uses it is returned
    only once that copy has run (csrc/core/host_allocator.h)."""
    _C._npu_hostEmptyCache()


def memory_stats_as_nested_dict(device=None) -> dict:
    """memory_stats as nested dictionaries: "allocated_bytes.all.current"
    becomes stats["allocated_bytes"]["all"]["current"]."""
    nested = {}
    for key, value in _C._memory_stats(_device(device)).items():
        node = nested
        *path, leaf = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def get_allocator_backend() -> str:
    """The allocator behind npu tensors: vNPU's caching allocator ("native"),
    or "pluggable" after change_current_allocator."""
    return _C._npu_getAllocatorBackend()


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Caps this process at ``fraction`` of the device's memory; allocations
    beyond it raise torch.OutOfMemoryError (after freeing the cache)."""
    from torch_npu.utils._error_code import ErrCode, pta_error
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`" + pta_error(ErrCode.TYPE))
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1" + pta_error(ErrCode.VALUE))
    _C._set_memory_fraction(fraction, _device(device))


def get_per_process_memory_fraction(device=None) -> float:
    return _C._get_memory_fraction(_device(device))


def memory_snapshot(mempool_id=None) -> list:
    """Every segment of every device, as torch.cuda.memory_snapshot():
    dicts with 'device', 'address', 'total_size', 'allocated_size',
    'active_size', 'requested_size', 'stream', 'segment_type' and 'blocks'
    (each with 'address', 'size', 'requested_size' and 'state':
    'active_allocated', 'active_pending_free' or 'inactive')."""
    if mempool_id is not None:
        # The segments of one torch.npu.MemPool (each segment says its pool).
        pool_id = tuple(mempool_id)
        device = _C._npu_mempool_device(pool_id)
        return [s for s in _C._memory_snapshot(device) if tuple(s["segment_pool_id"]) == pool_id]
    if not _is_initialized():
        return []
    return [segment for d in range(_device_count()) for segment in _C._memory_snapshot(d)]


_HISTORY_ENABLED = (None, "state", "all")
_HISTORY_CONTEXT = {None: 0, "state": 1, "alloc": 2, "all": 3}


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
                           clear_history=False):
    """Records where memory is allocated, for :func:`_snapshot` and the
    memory visualiser (torch.cuda.memory._record_memory_history's arguments).

    enabled: None stops recording (and drops what was kept); "state" keeps
    the stack of each live allocation; "all" also keeps a trace of every
    allocation, free and segment event, ``max_entries`` per device.
    context: the stacks kept: None, "state" (live allocations), "alloc" (also
    the trace's allocations), "all" (also its frees). stacks: "python"
    (Python and TorchScript frames) or "all" (also C++ frames). Recording
    covers every device (``device`` is accepted for CUDA's signature)."""
    if enabled is True:  # torch's older boolean form
        enabled = "all"
    elif enabled is False:
        enabled = None
    if enabled not in _HISTORY_ENABLED:
        raise ValueError(f"_record_memory_history: enabled should be None, 'state' or 'all', got {enabled!r}")
    if context not in _HISTORY_CONTEXT:
        raise ValueError(f"_record_memory_history: context should be None, 'state', 'alloc' or 'all', got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"_record_memory_history: stacks should be 'python' or 'all', got {stacks!r}")
    if not isinstance(max_entries, int) or isinstance(max_entries, bool) or max_entries < 0:
        raise ValueError(f"_record_memory_history: max_entries should be a non-negative integer, got {max_entries!r}")
    _lazy_init()
    _C._npu_record_memory_history(enabled is not None, enabled == "all", _HISTORY_CONTEXT[context],
                                  stacks == "all", min(max_entries, sys.maxsize), bool(clear_history))


def _snapshot(device=None) -> dict:
    """torch.cuda.memory._snapshot(): every segment of every device (each
    block with the stack that allocated it, when recorded) and each device's
    trace of allocator events (see _record_memory_history)."""
    traces = [_C._npu_memory_trace(d) for d in range(_device_count())] if _is_initialized() else []
    return {"segments": memory_snapshot(), "device_traces": traces}


def _dump_snapshot(filename="dump_snapshot.pickle"):
    """Pickles :func:`_snapshot` to ``filename``, for pytorch.org/memory_viz."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def caching_allocator_alloc(size, device=None, stream=None) -> int:
    """Allocates ``size`` bytes from the caching allocator for work on
    ``stream`` (default: the device's current stream); returns the address.
    Free it with caching_allocator_delete."""
    index = _device(device)
    if stream is None:
        stream = _C._current_stream(index)[0]
    elif isinstance(stream, torch.Stream):
        stream = stream.stream_id
    if not isinstance(stream, int):
        raise TypeError("Invalid type for stream argument, must be `torch.npu.Stream` or `int` "
                        "representing a stream id")
    return _C._caching_allocator_alloc(size, index, stream)


def caching_allocator_delete(mem_ptr) -> None:
    """Frees memory from caching_allocator_alloc."""
    _C._caching_allocator_delete(mem_ptr)


def _erase_stream(tensor, stream) -> None:
    """torch_npu.erase_stream(tensor, stream): takes back a
    ``tensor.record_stream(stream)``, promising that ``stream``'s use of the
    memory is ordered before later work by an event wait, so that a real
    chip's allocator can reuse the block when the tensor dies instead of
    when ``stream`` reaches it.

    The arguments are checked as real torch_npu checks them. Memory of a
    pluggable allocator goes to its erase_stream hook, if set. vNPU's caching
    allocator (C++) has no call to drop a recorded stream, so its block is
    reused when ``stream`` has passed it, as if erase_stream had not been
    called. Results are the same (the promise is only an opportunity);
    the peak of reserved memory may be higher than on a chip.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor should be torch.Tensor, could not be {type(tensor)}")
    if not isinstance(stream, torch.npu.Stream):
        raise TypeError(f"stream should be torch_npu.npu.Stream, could not be {type(stream)}")
    if tensor.device.type == "npu" and tensor.untyped_storage().data_ptr():
        _C._npu_erase_stream(tensor.untyped_storage().data_ptr(), stream.device_index, stream.stream_id)


def _format_bytes(value: int, reference: int) -> str:
    # The unit is chosen from `reference` (the row's "all" figure) so that a
    # row's pool figures are comparable with it.
    for unit in ("B  ", "KiB", "MiB", "GiB", "TiB"):
        if reference < 768 * 1024 or unit == "TiB":
            return f"{value:6d} {unit}"
        value //= 1024
        reference //= 1024
    raise AssertionError("unreachable")


def _format_count(value: int, reference: int) -> str:
    for unit in (" ", "K", "M"):
        if reference < 750 * 1000 or unit == "M":
            return f"{value:7d} {unit} "
        value //= 1000
        reference //= 1000
    raise AssertionError("unreachable")


def memory_summary(device=None, abbreviated=False) -> str:
    """A human-readable table of memory_stats(device), in torch.cuda's layout
    under torch_npu's header " PyTorch NPU memory summary, device ID N"."""
    index = _device(device)
    stats = memory_stats(index)
    rule, double_rule = "-" * 75, "=" * 75

    def metric_row(name, key, fmt, references=None):
        figures = [stats[f"{key}.{what}"] for what in ("current", "peak", "allocated", "freed")]
        cells = " | ".join(fmt(v, r) for v, r in zip(figures, references or figures))
        return f" {name:<21} | {cells} ", figures

    lines = [
        double_rule,
        f"{'':18}PyTorch NPU memory summary, device ID {index}",
        rule,
        f"{'':12}NPU OOMs: {stats['num_ooms']:<13d} | {'':7}npuMalloc retries: {stats['num_alloc_retries']}",
        double_rule,
        "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
    ]
    pooled = [
        ("allocated_bytes", "Allocated memory", _format_bytes),
        ("active_bytes", "Active memory", _format_bytes),
        ("requested_bytes", "Requested memory", _format_bytes),
        ("reserved_bytes", "NPU reserved memory", _format_bytes),
        ("inactive_split_bytes", "Non-releasable memory", _format_bytes),
        ("allocation", "Allocations", _format_count),
        ("active", "Active allocs", _format_count),
        ("segment", "NPU reserved segments", _format_count),
        ("inactive_split", "Non-releasable allocs", _format_count),
    ]
    for key, name, fmt in pooled:
        lines.append(rule)
        line, totals = metric_row(name, f"{key}.all", fmt)
        lines.append(line)
        if not abbreviated:
            lines.append(metric_row("      from large pool", f"{key}.large_pool", fmt, totals)[0])
            lines.append(metric_row("      from small pool", f"{key}.small_pool", fmt, totals)[0])
    for key, name in (("oversize_allocations", "Oversize allocations"),
                      ("oversize_segments", "Oversize NPU segments")):
        lines.append(rule)
        lines.append(metric_row(name, key, _format_count)[0])
    lines.append(double_rule)
    return "".join(f"|{line:<75}|\n" for line in lines)


class MemPool:
    """A private memory pool (torch.cuda.MemPool's API): allocations made
    inside ``use_mem_pool(pool)`` come from it and never from the device's
    ordinary cache; its memory is returned when the pool is deleted (and
    the tensors allocated from it have died)."""

    # allocator, use_on_oom and no_split in real torch_npu's order; ``device``
    # is vNPU's own (keyword-only, after them): a vNPU pool holds the memory of
    # one device, chosen when it is created (default: the current device).
    def __init__(self, allocator=None, use_on_oom=False, no_split=False, *, device=None):
        if allocator is not None and not isinstance(allocator, _C._NPUPluggableAllocator):
            raise TypeError("torch.npu.MemPool(allocator=...) expects the allocator of an NPUPluggableAllocator "
                            f"(its .allocator()), got {type(allocator).__name__}")
        self._device = _device(device)
        self._allocator = allocator
        # With an allocator, the pool's segments come from its alloc and free
        # (Note [Pools of a pluggable allocator], csrc/core/npu_mem_pool.cpp).
        # no_split: each segment is made for one request and holds that one block.
        # use_on_oom: while the pool lives, an allocation outside it that would
        # run out of memory takes a block from the pool's cache instead.
        self._id = tuple(_C._npu_mempool_create(self._device, allocator, bool(no_split), bool(use_on_oom)))

    @property
    def id(self):
        return self._id

    @property
    def allocator(self):
        return self._allocator

    def snapshot(self):
        """The pool's segments, as torch.npu.memory_snapshot(mempool_id=pool.id)."""
        return memory_snapshot(mempool_id=self._id)

    def use_count(self) -> int:
        return _C._npu_mempool_use_count(self._id)

    def __del__(self):
        try:
            _C._npu_mempool_release(self._id)
        except Exception:  # interpreter teardown
            pass


class use_mem_pool:
    """``with torch.npu.use_mem_pool(pool):`` routes this thread's allocations
    on ``device`` (default: the pool's) to ``pool``."""

    def __init__(self, pool: MemPool, device=None):
        if not isinstance(pool, MemPool):
            raise TypeError(f"use_mem_pool expects a torch.npu.MemPool, got {type(pool).__name__}")
        self._pool = pool
        self._device = pool._device if device is None else _device(device)

    def __enter__(self):
        _C._npu_begin_allocate_to_pool(self._device, self._pool.id)
        return self._pool

    def __exit__(self, *exc):
        _C._npu_end_allocate_to_pool(self._device, self._pool.id)


# torch_npu.npu.memory.NPUPluggableAllocator and friends live in their own module.
from torch_npu.npu.pluggable_allocator import (  # noqa: E402,F401
    NPUPluggableAllocator, _get_current_allocator, change_current_allocator,
)


def __getattr__(name):
    # Real torch_npu defines these in torch_npu.npu.memory; vNPU's live in
    # host_memory.py / ascend_compat.py (imported after this module).
    if name in ("host_memory_stats", "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats",
                "reset_peak_host_memory_stats"):
        from torch_npu.npu import host_memory
        return getattr(host_memory, name)
    if name == "empty_virt_addr_cache":
        from torch_npu.npu.ascend_compat import empty_virt_addr_cache
        return empty_virt_addr_cache
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

