"""Binding the calling thread to CPU cores (torch_npu.utils.set_thread_affinity
/ reset_thread_affinity), as real torch_npu offers to keep a training
process's host threads off each other's cores.

The binding itself is ``torch_npu._C._npu_set_thread_affinity`` (which also
refuses cores the process may not use); here the user's ranges are checked
and turned into the sorted core ids it takes.
"""

import torch_npu
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = []

# glibc's cpu_set_t holds cores 0-1023: no thread can be bound beyond, and a
# range reaching further is refused before it is enumerated.
_MAX_CORES = 1024


def _is_pair(value):
    return isinstance(value, list) and len(value) == 2


def _ranges_of(core_range):
    """``[start, end]`` alone or a non-empty list of them, as a list of pairs."""
    if _is_pair(core_range) and all(isinstance(bound, int) for bound in core_range):
        return [core_range]
    if isinstance(core_range, list) and core_range and all(_is_pair(item) for item in core_range):
        return core_range
    raise ValueError(f"Invalid core range: {core_range}" + pta_error(ErrCode.PARAM))


def _cores_between(start, end):
    bounds_are_ints = isinstance(start, int) and isinstance(end, int)
    if not (bounds_are_ints and 0 <= start <= end < _MAX_CORES):
        raise ValueError(f"Invalid core range values: [{start}, {end}]" + pta_error(ErrCode.VALUE))
    return range(start, end + 1)


def _set_thread_affinity(core_range: list[int] | list[list[int]] | None = None):
    """Binds the calling thread to the cores of ``core_range``: [start, end]
    (inclusive), a list of such ranges (they may overlap), or None for every
    core the process started with."""
    if core_range is None:
        torch_npu._C._npu_set_thread_affinity(-1, -1)  # the binding's "all of the process's cores"
        return
    # Every range is checked before any is enumerated (the * unpacks first).
    cores = set().union(*[_cores_between(start, end) for start, end in _ranges_of(core_range)])
    torch_npu._C._npu_set_thread_affinity(sorted(cores))


def _reset_thread_affinity():
    """Lets the calling thread run on every core the process started with."""
    torch_npu._C._npu_reset_thread_affinity()
