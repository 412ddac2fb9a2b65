"""torch.npu.mstx: MindStudio Tools Extension markers (like NVTX).

On Ascend a mark or a range goes into the msprof timeline. vNPU has no
msprof; its profiler is torch.profiler (torch_npu.profiler), so each marker
is a torch.profiler user annotation (record_function): a mark is a
zero-length range; range_start / range_end and range_push / range_pop open
and close one. They show up in the profiler's events and Chrome trace under
their message, with the domain as the event's argument when it is not
"default". Outside a profiling session they cost a call and record nothing,
as with msprof off. A range on a ``stream`` is a host range too (the virtual
NPU's device work shows in the trace as the stream workers' own events).

The front end (``mstx``, ``annotate``) checks its arguments as real
torch_npu's does (a bad message, domain or stream warns and returns the
"refused" value: 0 for range_start, -1 for range_push / range_pop) and calls
the back end through ``torch_npu._C._mstx`` at call time, as real torch_npu
does, so that code (and tests) may replace its functions.
"""

import functools
import itertools
import threading
import types
import warnings

import torch

__all__ = ["mstx", "annotate"]


class _Backend:
    """The annotations behind torch_npu._C._mstx's functions."""

    lock = threading.Lock()
    ids = itertools.count(1)
    open_ranges = {}  # range id -> entered record_function
    stacks = threading.local()  # per thread: domain -> entered record_functions

    @staticmethod
    def enter(message, domain):
        ctx = torch.autograd.profiler.record_function(message, None if domain == "default" else domain)
        ctx.__enter__()
        return ctx

    @staticmethod
    def mark_on_host(message, domain="default"):
        _Backend.enter(message, domain).__exit__(None, None, None)

    @staticmethod
    def mark(message, stream_id=0, device_index=0, device_type=0, domain="default"):
        _Backend.mark_on_host(message, domain)

    @staticmethod
    def range_start_on_host(message, domain="default"):
        ctx = _Backend.enter(message, domain)
        with _Backend.lock:
            range_id = next(_Backend.ids)
            _Backend.open_ranges[range_id] = ctx
        return range_id

    @staticmethod
    def range_start(message, stream_id=0, device_index=0, device_type=0, domain="default"):
        return _Backend.range_start_on_host(message, domain)

    @staticmethod
    def range_end(range_id, domain="default"):
        with _Backend.lock:
            ctx = _Backend.open_ranges.pop(range_id, None)
        if ctx is not None:
            ctx.__exit__(None, None, None)

    @staticmethod
    def stack(domain):
        stacks = _Backend.stacks.__dict__.setdefault("by_domain", {})
        return stacks.setdefault(domain, [])

    @staticmethod
    def range_push_on_host(message, domain="default"):
        stack = _Backend.stack(domain)
        stack.append(_Backend.enter(message, domain))
        return len(stack) - 1  # the depth of the new range

    @staticmethod
    def range_push(message, stream_id=0, device_index=0, device_type=0, domain="default"):
        return _Backend.range_push_on_host(message, domain)

    @staticmethod
    def range_pop(domain="default"):
        stack = _Backend.stack(domain)
        if not stack:
            return -1
        depth = len(stack) - 1
        stack.pop().__exit__(None, None, None)
        return depth


def _install_backend():
    """torch_npu._C._mstx, as real torch_npu's C++ module names it."""
    from torch_npu import _C
    if not hasattr(_C, "_mstx"):
        module = types.ModuleType("torch_npu._C._mstx", "mstx markers (torch_npu/npu/mstx.py)")
        for name in ("mark", "mark_on_host", "range_start", "range_start_on_host", "range_end", "range_push",
                     "range_push_on_host", "range_pop"):
            setattr(module, "_" + name, getattr(_Backend, name))
        _C._mstx = module
    return _C._mstx


def _backend():
    from torch_npu import _C
    return _C._mstx


def _is_npu_stream(stream):
    from torch_npu.npu.streams import Stream
    return isinstance(stream, Stream)


def _stream_args(stream):
    return stream.stream_id, stream.device_index, stream.device_type


class mstx:
    @staticmethod
    def mark(message: str = "", stream=None, domain: str = "default"):
        """A zero-length annotation named ``message``."""
        if not message or not isinstance(message, str):
            warnings.warn("Invalid message for mstx.mark function. Please provide a valid message string.")
            return
        if not isinstance(domain, str):
            warnings.warn("Invalid domain for mstx.mark function. Please provide a valid domain string.")
            return
        if stream:
            if not _is_npu_stream(stream):
                warnings.warn("Invalid stream for mstx.mark function. Please provide a valid stream.")
                return
            _backend()._mark(message, *_stream_args(stream), domain)
        else:
            _backend()._mark_on_host(message, domain)

    @staticmethod
    def range_push(message: str, stream=None, domain: str = "default") -> int:
        """Opens a nested annotation; returns its depth in ``domain`` (-1 when refused)."""
        if not message or not isinstance(message, str):
            warnings.warn("Invalid message for mstx.range_push func. Please input valid message string.")
            return -1
        if not domain or not isinstance(domain, str):
            warnings.warn("Invalid domain for mstx.range_push func. Please input valid domain string.")
            return -1
        if stream:
            if not _is_npu_stream(stream):
                warnings.warn("Invalid stream for mstx.range_push func. Please input valid stream.")
                return -1
            return _backend()._range_push(message, *_stream_args(stream), domain)
        return _backend()._range_push_on_host(message, domain)

    @staticmethod
    def range_pop(domain: str = "default") -> int:
        """Closes the innermost range_push of ``domain``; returns its depth (-1 when none)."""
        if not domain or not isinstance(domain, str):
            warnings.warn("Invalid domain for mstx.range_pop func. Please input valid domain string.")
            return -1
        return _backend()._range_pop(domain)

    @staticmethod
    def range_start(message: str, stream=None, domain: str = "default") -> int:
        """Opens an annotation named ``message``; returns its id for range_end (0 when refused)."""
        if not message or not isinstance(message, str):
            warnings.warn("Invalid message for mstx.range_start function. Please provide a valid message string.")
            return 0
        if not domain or not isinstance(domain, str):
            warnings.warn("Invalid domain for mstx.range_start func. Please input valid domain string.")
            return 0
        if stream:
            if not _is_npu_stream(stream):
                warnings.warn("Invalid stream for mstx.range_start func. Please input valid stream.")
                return 0
            return _backend()._range_start(message, *_stream_args(stream), domain)
        return _backend()._range_start_on_host(message, domain)

    @staticmethod
    def range_end(range_id: int, domain: str = "default"):
        """Closes the annotation range_start returned ``range_id`` for."""
        if not isinstance(range_id, int):
            warnings.warn("Invalid message for mstx.range_end function. Please provide the return value from "
                          "mstx.range_start.")
            return
        if not domain or not isinstance(domain, str):
            warnings.warn("Invalid domain for mstx.range_end func. Please input valid domain string.")
            return
        _backend()._range_end(range_id, domain)

    @staticmethod
    def mstx_range(message: str, stream=None, domain: str = "default"):
        """Decorator: the call runs inside a range named ``message``."""
        def wrapper(func):
            def inner(*args, **kwargs):
                range_id = mstx.range_start(message, stream, domain)
                try:
                    return func(*args, **kwargs)
                finally:
                    mstx.range_end(range_id, domain)
            return inner
        return wrapper


class annotate:
    """A range as a context manager or a decorator (the function's name when no message)."""

    def __init__(self, message: str = "", stream=None, domain: str = "default"):
        self.message = message
        self.stream = stream
        self.domain = domain
        self.range_id = None

    def __enter__(self):
        self.range_id = mstx.range_start(self.message, self.stream, self.domain)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if self.range_id is not None:
            mstx.range_end(self.range_id, self.domain)
            self.range_id = None

    def __call__(self, func):
        message = self.message or func.__name__

        @functools.wraps(func)
        def inner(*args, **kwargs):
            range_id = mstx.range_start(message, self.stream, self.domain)
            try:
                return func(*args, **kwargs)
            finally:
                mstx.range_end(range_id, self.domain)
        return inner


mstx.annotate = annotate
_install_backend()
