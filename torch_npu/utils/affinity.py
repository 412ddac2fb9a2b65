"""Binding the calling thread to CPU cores (torch_npu.utils.set_thread_affinity
/ reset_thread_affinity), as real torch_npu offers to keep a training
process's host threads off each other's cores."""

import os

__all__ = []

# The cores this process may use when it started: what a reset restores.
_INITIAL = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()


def _cores(core_range):
    from torch_npu.utils._error_code import ErrCode, pta_error
    if isinstance(core_range, list) and len(core_range) == 2 and all(isinstance(x, int) for x in core_range):
        ranges = [core_range]
    elif isinstance(core_range, list) and core_range and \
            all(isinstance(x, list) and len(x) == 2 for x in core_range):
        ranges = core_range
    else:
        raise ValueError(f"Invalid core range: {core_range}" + pta_error(ErrCode.PARAM))
    for start, end in ranges:
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
            raise ValueError(f"Invalid core range values: [{start}, {end}]" + pta_error(ErrCode.VALUE))
    cores = {core for start, end in ranges for core in range(start, end + 1)}
    unknown = sorted(cores - set(_INITIAL))
    if unknown:
        raise ValueError(f"Invalid core range: cores {unknown} are not available to this process "
                         f"(available: {sorted(_INITIAL)})" + pta_error(ErrCode.VALUE))
    return cores


def _set_thread_affinity(core_range=None):
    """Binds the calling thread to the cores of ``core_range``: [start, end]
    (inclusive), a list of such ranges, or None for every core the process
    started with."""
    os.sched_setaffinity(0, set(_INITIAL) if core_range is None else _cores(core_range))


def _reset_thread_affinity():
    """Lets the calling thread run on every core the process started with."""
    os.sched_setaffinity(0, set(_INITIAL))
