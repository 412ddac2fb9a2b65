"""Binding the calling thread to CPU cores (torch_npu.utils.set_thread_affinity
/ reset_thread_affinity), as real torch_npu offers to keep a training
process's host threads off each other's cores."""

import torch_npu

__all__ = []

# glibc's cpu_set_t holds cores 0-1023: no thread can be bound beyond, and a
# range reaching further is refused before it is enumerated.
_CPU_SETSIZE = 1024


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
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end < _CPU_SETSIZE):
            raise ValueError(f"Invalid core range values: [{start}, {end}]" + pta_error(ErrCode.VALUE))
    return sorted({core for start, end in ranges for core in range(start, end + 1)})


def _set_thread_affinity(core_range=None):
    """Binds the calling thread to the cores of ``core_range``: [start, end]
    (inclusive), a list of such ranges, or None for every core the process
    started with. Cores this process may not use raise ValueError (from
    ``torch_npu._C._npu_set_thread_affinity``, which does the binding)."""
    if core_range is None:
        torch_npu._C._npu_set_thread_affinity(-1, -1)
        return
    torch_npu._C._npu_set_thread_affinity(_cores(core_range))


def _reset_thread_affinity():
    """Lets the calling thread run on every core the process started with."""
    torch_npu._C._npu_reset_thread_affinity()
