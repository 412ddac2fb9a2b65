"""The NPU memory API (torch.npu.memory_allocated, empty_cache, ...)."""

from torch_npu import _C
from torch_npu.npu.device import _index, _lazy_init


def _device(device) -> int:
    _lazy_init()
    index = _index(device)
    return _C._current_device() if index < 0 else index


def memory_stats(device=None) -> dict:
    """Allocator counters with torch.cuda's key names (e.g. 'allocated_bytes.all.current')."""
    return dict(sorted(_C._memory_stats(_device(device)).items()))


def memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None) -> None:
    _C._reset_peak_memory_stats(_device(device))


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Returns cached, unused blocks to the device (waits for queued work first)."""
    _C._empty_cache()


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Caps this process at ``fraction`` of the device's memory."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction, _device(device))


def get_per_process_memory_fraction(device=None) -> float:
    return _C._get_memory_fraction(_device(device))


def caching_allocator_alloc(size, device=None, stream=None) -> int:
    """Allocates ``size`` bytes from the caching allocator; returns the address."""
    index = _device(device)
    stream_id = 0 if stream is None else (stream if isinstance(stream, int) else stream.stream_id)
    return _C._caching_allocator_alloc(size, index, stream_id)


def caching_allocator_delete(mem_ptr) -> None:
    _C._caching_allocator_delete(mem_ptr)
