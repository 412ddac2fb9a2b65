"""torch.npu.mstx: MindStudio Tools Extension markers (like NVTX).

On Ascend a mark or a range goes into the msprof timeline. vNPU has no
msprof; its profiler is torch.profiler (torch_npu.profiler), so each marker
is a torch.profiler user annotation (record_function): a mark is a
zero-length range, range_start / range_end open and close one, and they show
up in the profiler's events and its Chrome trace under their message.
Outside a profiling session they cost a call and record nothing, as with
msprof off. ``stream`` is accepted for compatibility: the range is a host
range (the virtual NPU's device work shows in the trace as the stream
workers' own events).
"""

import itertools
import threading
import warnings

import torch


class mstx:
    _lock = threading.Lock()
    _ids = itertools.count(1)
    _open = {}  # range id -> entered record_function

    @staticmethod
    def mark(message: str = "", stream=None):
        """A zero-length annotation named ``message``."""
        with torch.autograd.profiler.record_function(message):
            pass

    @staticmethod
    def range_start(message: str, stream=None) -> int:
        """Opens an annotation named ``message``; returns its id for range_end (0 when refused)."""
        if not message:
            warnings.warn("Invalid message for mstx.range_start func. Please input valid message string.")
            return 0
        if stream is not None and not isinstance(stream, torch.Stream):
            warnings.warn("Invalid type for stream argument, must be `torch_npu.npu.Stream`")
            return 0
        ctx = torch.autograd.profiler.record_function(message)
        ctx.__enter__()
        with mstx._lock:
            range_id = next(mstx._ids)
            mstx._open[range_id] = ctx
        return range_id

    @staticmethod
    def range_end(range_id: int):
        """Closes the annotation range_start returned ``range_id`` for."""
        if not isinstance(range_id, int):
            warnings.warn("Invalid message for mstx.range_start func. Please input return value from "
                          "mstx.range_start().")
            return
        with mstx._lock:
            ctx = mstx._open.pop(range_id, None)
        if ctx is not None:
            ctx.__exit__(None, None, None)

    @staticmethod
    def mstx_range(message: str, stream=None):
        """Decorator: the call runs inside a range named ``message``."""
        def wrapper(func):
            def inner(*args, **kwargs):
                range_id = mstx.range_start(message, stream)
                try:
                    return func(*args, **kwargs)
                finally:
                    mstx.range_end(range_id)
            return inner
        return wrapper
