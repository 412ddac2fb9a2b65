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


# ---------------------------------------------------------------------------
# Back end: what torch_npu._C._mstx does on vNPU

class _ProfilerAnnotations:
    """Markers as torch.profiler annotations. Ranges by id may end on any
    thread (hence the lock); pushed ranges nest per thread and per domain."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._by_id = {}  # range id -> its open annotation
        self._per_thread = threading.local()

    @staticmethod
    def _begin(message, domain):
        # The domain travels as the event's argument; "default" is left out.
        annotation = torch.autograd.profiler.record_function(message, None if domain == "default" else domain)
        annotation.__enter__()
        return annotation

    @staticmethod
    def _end(annotation):
        annotation.__exit__(None, None, None)

    def _pushed(self, domain):
        if not hasattr(self._per_thread, "domains"):
            self._per_thread.domains = {}
        return self._per_thread.domains.setdefault(domain, [])

    def mark_on_host(self, message, domain="default"):
        self._end(self._begin(message, domain))

    def range_start_on_host(self, message, domain="default"):
        annotation = self._begin(message, domain)
        with self._lock:
            range_id = next(self._ids)
            self._by_id[range_id] = annotation
        return range_id

    def range_end(self, range_id, domain="default"):
        with self._lock:
            annotation = self._by_id.pop(range_id, None)
        if annotation is not None:  # an unknown or already ended id is ignored
            self._end(annotation)

    def range_push_on_host(self, message, domain="default"):
        """Returns the new range's depth: 0 for the outermost."""
        pushed = self._pushed(domain)
        pushed.append(self._begin(message, domain))
        return len(pushed) - 1

    def range_pop(self, domain="default"):
        """Returns the depth of the range it closed, -1 when there was none."""
        pushed = self._pushed(domain)
        if not pushed:
            return -1
        self._end(pushed.pop())
        return len(pushed)

    # A range on a stream is recorded on the host like any other.
    def mark(self, message, stream_id=0, device_index=0, device_type=0, domain="default"):
        self.mark_on_host(message, domain)

    def range_start(self, message, stream_id=0, device_index=0, device_type=0, domain="default"):
        return self.range_start_on_host(message, domain)

    def range_push(self, message, stream_id=0, device_index=0, device_type=0, domain="default"):
        return self.range_push_on_host(message, domain)


_ENTRY_POINTS = ("mark", "mark_on_host", "range_start", "range_start_on_host", "range_end",
                 "range_push", "range_push_on_host", "range_pop")


def _install_backend():
    """Publishes the back end as torch_npu._C._mstx, the extension module
    real torch_npu's markers call (kept when one is already there)."""
    from torch_npu import _C
    if hasattr(_C, "_mstx"):
        return _C._mstx
    annotations = _ProfilerAnnotations()
    module = types.ModuleType("torch_npu._C._mstx", "mstx markers (torch_npu/npu/mstx.py)")
    for name in _ENTRY_POINTS:
        setattr(module, f"_{name}", getattr(annotations, name))
    _C._mstx = module
    return module


def _call_backend(entry, message, stream, domain):
    """Calls _C._mstx's `entry` for `stream`, or its host variant when there
    is none; looked up each time so that a replaced function is used."""
    from torch_npu import _C
    if not stream:
        return getattr(_C._mstx, f"_{entry}_on_host")(message, domain)
    return getattr(_C._mstx, f"_{entry}")(message, stream.stream_id, stream.device_index, stream.device_type,
                                          domain)


# ---------------------------------------------------------------------------
# Front end

# torch_npu's warnings, word for word: each function words them its own way.
_WARNINGS = {
    "mark": {
        "message": "Invalid message for mstx.mark function. Please provide a valid message string.",
        "domain": "Invalid domain for mstx.mark function. Please provide a valid domain string.",
        "stream": "Invalid stream for mstx.mark function. Please provide a valid stream.",
    },
    "range_start": {
        "message": "Invalid message for mstx.range_start function. Please provide a valid message string.",
        "domain": "Invalid domain for mstx.range_start func. Please input valid domain string.",
        "stream": "Invalid stream for mstx.range_start func. Please input valid stream.",
    },
    "range_push": {
        "message": "Invalid message for mstx.range_push func. Please input valid message string.",
        "domain": "Invalid domain for mstx.range_push func. Please input valid domain string.",
        "stream": "Invalid stream for mstx.range_push func. Please input valid stream.",
    },
    "range_end": {
        "range_id": "Invalid message for mstx.range_end function. Please provide the return value from "
                    "mstx.range_start.",
        "domain": "Invalid domain for mstx.range_end func. Please input valid domain string.",
    },
    "range_pop": {
        "domain": "Invalid domain for mstx.range_pop func. Please input valid domain string.",
    },
}


def _is_text(value, may_be_empty=False):
    return isinstance(value, str) and (may_be_empty or value != "")


def _is_npu_stream(stream):
    from torch_npu.npu.streams import Stream
    return isinstance(stream, Stream)


def _refuse(entry, argument):
    """Warns that `argument` of mstx.`entry` was unusable; the caller then
    returns its refused value."""
    warnings.warn(_WARNINGS[entry][argument])


def _bad_marker_argument(entry, message, stream, domain):
    """The first unusable argument of mark / range_start / range_push
    (checked in this order), or None. Only mark accepts an empty domain."""
    if not _is_text(message):
        return "message"
    if not _is_text(domain, may_be_empty=entry == "mark"):
        return "domain"
    if stream and not _is_npu_stream(stream):
        return "stream"
    return None


def _open_marker(entry, message, stream, domain, refused):
    bad = _bad_marker_argument(entry, message, stream, domain)
    if bad is not None:
        _refuse(entry, bad)
        return refused
    return _call_backend(entry, message, stream, domain)


def _in_range(func, message, stream, domain):
    """`func`, each call of it inside a range_start / range_end pair."""

    @functools.wraps(func)
    def ranged(*args, **kwargs):
        range_id = mstx.range_start(message, stream, domain)
        try:
            return func(*args, **kwargs)
        finally:
            mstx.range_end(range_id, domain)

    return ranged


class mstx:
    @staticmethod
    def mark(message: str = "", stream=None, domain: str = "default"):
        """A zero-length annotation named ``message``."""
        _open_marker("mark", message, stream, domain, refused=None)

    @staticmethod
    def range_start(message: str, stream=None, domain: str = "default") -> int:
        """Opens an annotation named ``message``; returns its id for range_end (0 when refused)."""
        return _open_marker("range_start", message, stream, domain, refused=0)

    @staticmethod
    def range_end(range_id: int, domain: str = "default"):
        """Closes the annotation range_start returned ``range_id`` for."""
        if not isinstance(range_id, int):
            _refuse("range_end", "range_id")
        elif not _is_text(domain):
            _refuse("range_end", "domain")
        else:
            from torch_npu import _C
            _C._mstx._range_end(range_id, domain)

    @staticmethod
    def range_push(message: str, stream=None, domain: str = "default") -> int:
        """Opens a nested annotation; returns its depth in ``domain`` (-1 when refused)."""
        return _open_marker("range_push", message, stream, domain, refused=-1)

    @staticmethod
    def range_pop(domain: str = "default") -> int:
        """Closes the innermost range_push of ``domain``; returns its depth (-1 when none)."""
        if _is_text(domain):
            from torch_npu import _C
            return _C._mstx._range_pop(domain)
        _refuse("range_pop", "domain")
        return -1

    @staticmethod
    def mstx_range(message: str, stream=None, domain: str = "default"):
        """Decorator: the call runs inside a range named ``message``."""
        return lambda func: _in_range(func, message, stream, domain)


class annotate:
    """A range as a context manager, or as a decorator: each call of the
    function in a range named ``message``, or the function's name."""

    def __init__(self, message: str = "", stream=None, domain: str = "default"):
        self.message = message
        self.stream = stream
        self.domain = domain
        self.range_id = None

    def __enter__(self):
        self.range_id = mstx.range_start(self.message, self.stream, self.domain)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        opened, self.range_id = self.range_id, None
        if opened is not None:
            mstx.range_end(opened, self.domain)

    def __call__(self, func):
        return _in_range(func, self.message or func.__name__, self.stream, self.domain)


mstx.annotate = annotate
_install_backend()
