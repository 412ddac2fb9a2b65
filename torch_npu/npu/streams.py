"""NPU streams and events (torch.npu.Stream / Event / stream()).

They subclass PyTorch's generic torch.Stream / torch.Event, whose methods
(query, synchronize, wait_event, wait_stream, record, elapsed_time) reach the
virtual NPU through its device guard.
"""

import torch

from torch_npu import _C
from torch_npu.npu.device import _index, _lazy_init

# c10::DeviceType::PrivateUse1 as an int: the device_type of every npu stream.
_NPU_DEVICE_TYPE = _C._npu_device_type()
# stream_id >> 5 of the high-priority pool's streams (csrc/core/npu_stream.cpp).
_HIGH_PRIORITY_POOL = 4
_SYNC_LAUNCH = 2


class Stream(torch.Stream):
    """An in-order queue of work on an NPU (a worker thread on the virtual NPU).

    ``Stream(device=None, priority=0)`` takes a stream from the device's pool
    for that priority (high for priority < 0); ``is_sync_launch=True`` takes
    one of its sync-launch streams instead, whose work runs as it is launched.
    A stream's id has real torch_npu's layout: ``stream_id >> 5`` is 3 for the
    normal pool, 4 for the high-priority one, 2 for sync-launch streams.
    """

    def __new__(cls, device=None, priority=0, **kwargs):
        _lazy_init()
        # is_sync_launch comes with the keywords, as in real torch_npu's signature.
        if kwargs.pop("is_sync_launch", False) and "stream_id" not in kwargs:
            index = _index(device)
            stream_id, device_index, device_type = _C._npu_sync_launch_stream(index)
            kwargs = dict(kwargs, stream_id=stream_id, device_index=device_index, device_type=device_type)
        if "stream_id" in kwargs:
            # Rebuilding a stream from its parts (torch.Stream's fields): they
            # must name an npu stream that exists.
            # RuntimeError, as torch_npu's stream unpacking raises for parts
            # that name no stream.
            device_type = kwargs.get("device_type", _NPU_DEVICE_TYPE)
            if device_type != _NPU_DEVICE_TYPE:
                raise RuntimeError(f"torch.npu.Stream needs device_type={_NPU_DEVICE_TYPE} (npu), got {device_type}")
            try:
                _C._check_stream(kwargs["stream_id"], kwargs.get("device_index", _C._current_device()))
            except ValueError as e:
                raise RuntimeError(str(e)) from None
            stream = super().__new__(cls, **kwargs)
            stream._priority = -1 if kwargs["stream_id"] >> 5 == _HIGH_PRIORITY_POOL else 0
            return stream
        if not isinstance(priority, int):
            raise TypeError(f"priority must be an int, got {type(priority).__name__}")
        # As torch.cuda.Stream, which enters its device as a context: a
        # negative index is ignored and a float names no device, so both
        # give the current device (real torch_npu's test_with_device).
        negative = isinstance(device, int) and not isinstance(device, bool) and device < 0
        index = -1 if negative or isinstance(device, float) else _index(device)
        if index < 0:
            index = _C._current_device()
        _C._check_device(index)  # before torch.device narrows it to 8 bits
        stream = super().__new__(cls, device=torch.device("npu", index), priority=priority)
        # The virtual NPU schedules all streams alike; the priority is kept
        # for code that reads it (high priority is -1, as in torch_npu).
        stream._priority = -1 if priority < 0 else 0
        return stream

    @property
    def priority(self):
        return self._priority

    @property
    def is_sync_launch(self):
        """True for a sync-launch stream (``Stream(is_sync_launch=True)``)."""
        return self.stream_id >> 5 == _SYNC_LAUNCH

    def __repr__(self):
        return f"<torch_npu.npu.Stream device=npu:{self.device_index} npu_stream={self.npu_stream:#x}>"

    def record_event(self, event=None):
        """Records ``event`` (a new torch.npu.Event when None) on this stream and returns it."""
        # torch.Stream.record_event accepts only a plain torch.Event and makes
        # plain ones: this keeps torch.npu.Event, as real torch_npu does.
        if event is None:
            event = Event()
        event.record(self)
        return event

    @property
    def npu_stream(self):
        """The stream's aclrtStream handle (an int), as C++ extensions and the
        ACL runtime API (aclrtSynchronizeStream, ...) take it."""
        return self.native_handle


class Event(torch.Event):
    """A marker in a stream, for synchronisation and timing."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        _lazy_init()
        if interprocess:
            raise NotImplementedError(
                "torch.npu.Event(interprocess=True) is not supported on the virtual NPU: there are no IPC "
                "event handles to share between processes. Use interprocess=False.")
        return super().__new__(cls, device=torch.device("npu", _C._current_device()),
                               enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)

    def record(self, stream=None):
        super().record(stream if stream is not None else current_stream())

    def wait(self, stream=None):
        super().wait(stream if stream is not None else current_stream())

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded
        with enable_timing=True, and ``end_event`` completed)."""
        if not isinstance(end_event, torch.Event):
            raise TypeError(f"expected a torch.npu.Event, got {type(end_event).__name__}")
        return _C._event_elapsed_time(self.event_id, end_event.event_id)

    def recorded_time(self) -> int:
        """When the event's marker ran on its stream, in nanoseconds of the
        host's monotonic clock; waits for it first. The event needs
        enable_timing=True."""
        return _C._event_recorded_time(self.event_id)

    @property
    def npu_event(self) -> int:
        """The event's aclrtEvent handle (an int; 0 until first recorded)."""
        return self.event_id

    def __repr__(self):
        if self.event_id:
            return f"<torch_npu.npu.Event {self.event_id:#x}>"
        return "<torch_npu.npu.Event uninitialized>"


class ExternalEvent:
    """An event a stream may wait for before it is recorded (real
    torch_npu's ``graph_external`` event): ``wait(s)`` holds ``s``'s later
    work until some stream's ``record`` has set it, and ``reset(s)`` clears
    it for reuse. In a graph capture, each call is captured and acts at every
    replay. See csrc/graph/external_event.h."""

    def __init__(self):
        _lazy_init()
        self._event = _C._ExternalEvent()

    def record(self, stream=None):
        """Sets the event when ``stream`` (default: the current one) reaches this point."""
        self._event.record(stream if stream is not None else current_stream())

    def wait(self, stream=None):
        """Makes ``stream``'s later work wait until the event is set."""
        self._event.wait(stream if stream is not None else current_stream())

    def reset(self, stream=None):
        """Clears the event when ``stream`` reaches this point. Make sure the
        waits it should release have been released first."""
        self._event.reset(stream if stream is not None else current_stream())

    def query(self):
        """True when the event is set now."""
        return self._event._is_set()


def _wrap(stream_tuple):
    stream_id, device_index, device_type = stream_tuple
    return Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


def current_stream(device=None) -> Stream:
    _lazy_init()
    return _wrap(_C._current_stream(_index(device)))


def default_stream(device=None) -> Stream:
    _lazy_init()
    return _wrap(_C._default_stream(_index(device)))


def set_stream(stream) -> None:
    if stream is None:
        return
    _C._set_stream(stream.stream_id, stream.device_index)


class StreamContext:
    """Makes ``stream`` current for the block (on its device), then restores."""

    def __init__(self, stream_ctx):  # real torch_npu's parameter name (torch.cuda's is `stream`)
        self.stream = stream_ctx
        self.prev = None

    def __enter__(self):
        if self.stream is None:
            return None
        self.prev = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *args):
        if self.stream is not None:
            set_stream(self.prev)
        return False


def stream(stream) -> StreamContext:
    """``with torch.npu.stream(s):`` runs the block's kernels on ``s``."""
    return StreamContext(stream)


class ExternalStream(Stream):
    """Wraps a stream created outside PyTorch: an aclrtStream handle from
    aclrtCreateStream (C++ extensions) or ``torch.npu.npurt().npuStreamCreate``.
    Work runs on it as on any stream; as in real torch_npu, the caller owns
    its completion, so ``synchronize()`` and ``query()`` refuse (use
    ``torch.npu.synchronize()``, or an event the caller records)."""

    def __new__(cls, stream_ptr, device=None, **kwargs):
        _lazy_init()
        if kwargs.get("priority", 0) != 0:
            raise RuntimeError("ExternalStream: priority must keep its default (0) when wrapping an external stream")
        stream_id, device_index = _C._npu_stream_of_handle(int(stream_ptr))
        if device is not None and _index(device) not in (-1, device_index):
            raise RuntimeError(f"ExternalStream: the stream belongs to npu:{device_index}, not to {device}")
        return super().__new__(cls, stream_id=stream_id, device_index=device_index, device_type=_NPU_DEVICE_TYPE)

    def synchronize(self):
        from torch_npu.utils._error_code import ErrCode, pta_error
        raise RuntimeError("External NPU stream is not supported in NPUStream::synchronize. The caller is "
                           "responsible for synchronization of external streams." + pta_error(ErrCode.NOT_SUPPORT))

    def query(self):
        from torch_npu.utils._error_code import ErrCode, pta_error
        raise RuntimeError("Cannot query external NPU stream status. The caller must track stream completion "
                           "externally." + pta_error(ErrCode.NOT_SUPPORT))


def _launch_host_func(op_stream, fn, user_data):
    """Calls ``fn(user_data)`` on the host when ``op_stream`` reaches this point:
    after the work queued on it before, before the work queued after (inside a
    graph capture, at that point of every replay). An exception ``fn`` raises
    is reported as unraisable and does not fail the stream."""
    _C._launch_host_func(op_stream, fn, user_data)


def _subscribe_report(op_stream):
    """Real torch_npu needs a thread subscribed to ``op_stream`` to run its host
    functions; vNPU runs them on the stream itself, so this only checks the stream."""
    _C._subscribe_report(op_stream)


def _unsubscribe_report(op_stream):
    """Undoes _subscribe_report (nothing to undo on vNPU beyond checking the stream)."""
    _C._unsubscribe_report(op_stream)


class SyncLaunchStream(Stream):
    """A sync-launch NPU stream: work launched on it runs before the launch
    returns (real torch_npu's stream without its task queue), so a host
    reading its results needs no synchronize. One of the device's 4 such
    streams, handed out round-robin."""

    def __new__(cls, device=None, priority=0, **kwargs):
        return super().__new__(cls, device=device, priority=priority, is_sync_launch=True, **kwargs)

