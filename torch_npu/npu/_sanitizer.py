"""NPU Sanitizer: finds kernels on different npu streams that race on a tensor.

The npu counterpart of ``torch.cuda._sanitizer`` (CSAN), enabled by
``TORCH_NPU_SANITIZER=1`` or :func:`enable_npu_sanitizer`. It reuses CSAN's
device-agnostic analysis (the access and stream-synchronisation bookkeeping of
``EventHandler``, the argument parsing of ``ArgumentHandler``, the error
classes and their report) and adds what is npu's: a dispatch mode that knows
npu streams, the feed of synchronisation and memory events from the C++ side
(Note [Sanitizer trace] in csrc/core/npu_trace.h), and one check CSAN lacks:
memory freed while another stream still used it (no ``record_stream``), then
handed out again and used before that stream was waited for.

A race is raised at the kernel that makes it, as ``CUDASanitizerErrors`` (what
torch_npu raises), after each error was printed to stderr with both stack
traces. Like newer torch_npu, the event handler also reports tensors used on
another stream without ``record_stream`` (``flush_record_stream_warnings()``).
docs/sanitizer.md explains the design.
"""

import sys
import traceback
import warnings
from dataclasses import dataclass, field

import torch
import torch.cuda._sanitizer as csan
from torch.utils._python_dispatch import TorchDispatchMode

from torch_npu import _C

aten = torch.ops.aten

# TraceKind (csrc/core/npu_trace.h), in its order.
(_EVENT_CREATION, _EVENT_DELETION, _EVENT_RECORD, _EVENT_WAIT, _EVENT_SYNCHRONIZATION, _STREAM_CREATION,
 _STREAM_SYNCHRONIZATION, _DEVICE_SYNCHRONIZATION, _MEMORY_ALLOCATION, _MEMORY_DEALLOCATION) = range(10)

_DEVICE_SHIFT = 16  # stream ids are small per-device indices (0 is the default stream)


def _stream_key(device_index, stream_id):
    """The id the analysis knows a stream by: unique over devices, and 0 for
    npu:0's default stream (CSAN's DEFAULT_STREAM_ID)."""
    return (device_index << _DEVICE_SHIFT) | stream_id


def _stream_device(key):
    return key >> _DEVICE_SHIFT


class UseOfFreedMemoryError(csan.UnsynchronizedAccessError):
    """An access to memory that an earlier tensor, freed while another stream
    still used it, left to the caching allocator: the previous access is that
    earlier tensor's, on the stream nobody waited for."""

    def __str__(self):
        return super().__str__() + (
            f"\nThe previous access was made to an earlier tensor in this memory, freed while stream "
            f"{self.previous_access.stream} could still be using it: the caching allocator then handed its memory "
            f"out again. Call tensor.record_stream(stream) for a tensor used on a stream other than the one it was "
            f"allocated on, or make the allocating stream wait for that stream before the tensor is freed.\n")


class MissingRecordStreamWarning:
    """A tensor used on a stream other than the one it was allocated on, with
    no record_stream for that stream and no wait of the allocating stream
    for that use: once freed, its memory could be handed out again while the
    use still runs (torch_npu's record_stream check)."""

    def __init__(self, data_ptr, allocation_stream, usage_stream, last_use):
        self.data_ptr = data_ptr
        self.allocation_stream = allocation_stream
        self.usage_stream = usage_stream
        self.last_use = last_use

    def __str__(self):
        return (f"NPU Sanitizer: the tensor with data pointer {self.data_ptr}, allocated on stream "
                f"{self.allocation_stream}, was used on stream {self.usage_stream} without "
                f"record_stream, and stream {self.allocation_stream} did not wait for that use: its memory can be "
                f"reused while stream {self.usage_stream} still uses it. Call tensor.record_stream(stream) for that "
                f"stream, or make stream {self.allocation_stream} wait for it before the tensor is freed.\n"
                f"Last use on stream {self.usage_stream} during kernel:\n{self.last_use.operator}\n"
                f"With stack trace:\n{''.join(self.last_use.stack_trace.format())}")

    __repr__ = __str__


@dataclass
class _StorageUses:
    """A live allocation: its stream, and the last use by each other stream."""

    allocation_stream: int
    uses: dict = field(default_factory=dict)  # stream key -> csan.Access


class NPUEventHandler(csan.EventHandler):
    """CSAN's analysis, plus the freed-while-in-use check and npu's device-wide
    synchronisation (streams of one device only)."""

    def __init__(self):
        super().__init__()
        self._recorded_streams = {}  # storage data_ptr -> stream keys given to record_stream
        self._freed_in_use = {}  # data_ptr -> bytes: freed with accesses nobody waited for
        self._reallocated_at = {}  # data_ptr -> seq_num when such memory was handed out again
        self._npu_tensors = {}  # storage data_ptr -> _StorageUses, for allocations seen
        self._record_stream_errors = []  # MissingRecordStreamWarning found when memory came back

    def feed_trace(self):
        """Analyses the trace records since the last call (Note [Sanitizer trace])."""
        for kind, a, b, c, d in _C._drain_npu_trace():
            if kind == _MEMORY_ALLOCATION:
                self._handle_memory_allocation(a, _stream_key(b, c), d)
            elif kind == _MEMORY_DEALLOCATION:
                self._handle_memory_deallocation(a, _stream_key(b, c), d)
            elif kind == _EVENT_RECORD:
                self._handle_event_record(a, _stream_key(b, c))
            elif kind == _EVENT_WAIT:
                self._handle_event_wait(a, _stream_key(b, c))
            elif kind == _EVENT_CREATION:
                self._handle_event_creation(a)
            elif kind == _EVENT_DELETION:
                self._handle_event_deletion(a)
            elif kind == _EVENT_SYNCHRONIZATION:
                self._handle_event_synchronization(a)
            elif kind == _STREAM_CREATION:
                self._handle_stream_creation(_stream_key(a, b))
            elif kind == _STREAM_SYNCHRONIZATION:
                self._handle_stream_synchronization(_stream_key(a, b))
            elif kind == _DEVICE_SYNCHRONIZATION:
                self._handle_device_synchronization(a)

    @property
    def record_stream_errors(self):
        """The missing-record_stream findings of memory that came back since
        the last flush (frees not yet analysed are analysed first)."""
        self.feed_trace()
        return self._record_stream_errors

    def flush_record_stream_warnings(self):
        """The missing-record_stream findings: those of memory that came back
        since the last flush, then those of live tensors as things stand."""
        self.feed_trace()
        found, self._record_stream_errors = self._record_stream_errors, []
        for data_ptr, tracked in self._npu_tensors.items():
            found += self._missing_record_streams(data_ptr, tracked)
        return found

    def _missing_record_streams(self, data_ptr, tracked):
        recorded = self._recorded_streams.get(data_ptr, ())
        return [MissingRecordStreamWarning(data_ptr, tracked.allocation_stream, stream, use)
                for stream, use in tracked.uses.items()
                if stream not in recorded
                and not self.syncs.is_ordered_after(tracked.allocation_stream, use.seq_num, stream)]

    def _handle_record_stream(self, data_ptr, stream):
        self._recorded_streams.setdefault(data_ptr, set()).add(stream)

    def _handle_memory_allocation(self, data_ptr, stream=None, nbytes=1):
        self._recorded_streams.pop(data_ptr, None)  # a new tensor: nobody recorded it yet
        if stream is not None:
            self._npu_tensors[data_ptr] = _StorageUses(stream)
        end = data_ptr + nbytes
        reused = sorted(p for p, n in self._freed_in_use.items() if p < end and data_ptr < p + n)
        self._reallocated_at.pop(data_ptr, None)
        if not reused:
            super()._handle_memory_allocation(data_ptr)
            return
        # The block covers memory of earlier tensors that other streams may
        # still use (blocks merge when freed, so not only at the same
        # address): the new tensor inherits their unsynchronised accesses,
        # and its next kernels are checked against them.
        accesses = self.tensors_accessed.accesses
        stack_trace = traceback.StackSummary.extract(traceback.walk_stack(None), lookup_lines=False)
        stack_trace.reverse()
        info = accesses.get(data_ptr) if data_ptr in self._freed_in_use else None
        if info is None:
            info = csan.TensorInfo(None)
        for p in reused:
            del self._freed_in_use[p]
            if p == data_ptr:
                continue
            old = accesses.pop(p, None)
            if old is None:
                continue
            info.reads += old.reads
            if old.write is not None:
                info.reads.append(old.write)  # a new write must be ordered after it too
                if info.write is None or old.write.seq_num > info.write.seq_num:
                    info.write = old.write
        info.allocation_stack_trace = stack_trace
        accesses[data_ptr] = info
        self._reallocated_at[data_ptr] = self.seq_num

    def _handle_memory_deallocation(self, data_ptr, stream=None, nbytes=1):
        """The block is back in the allocator, which hands it out again on
        ``stream`` (its allocation stream) with no further ordering: accesses
        on streams ``stream`` has not waited for may still be running, unless
        record_stream named them (the allocator then waited for them first)."""
        tracked = self._npu_tensors.pop(data_ptr, None)
        if tracked is not None:
            missing = self._missing_record_streams(data_ptr, tracked)
            if missing:
                self._record_stream_errors += missing
                warnings.warn(str(missing[0]), RuntimeWarning, stacklevel=2)
        recorded = self._recorded_streams.pop(data_ptr, set())
        self._reallocated_at.pop(data_ptr, None)
        self._freed_in_use.pop(data_ptr, None)
        info = self.tensors_accessed.accesses.get(data_ptr)
        if info is None or stream is None:
            super()._handle_memory_deallocation(data_ptr)
            return

        def may_still_run(access):
            return access is not None and access.stream not in recorded and not self.syncs.is_ordered_after(
                stream, access.seq_num, access.stream)

        info.reads = [r for r in info.reads if may_still_run(r)]
        if not may_still_run(info.write):
            info.write = None
        if info.reads or info.write is not None:
            self._freed_in_use[data_ptr] = nbytes
        else:
            self.tensors_accessed.delete_tensor(data_ptr)

    def _handle_kernel_launch(self, stream, read_only, read_write, outputs, operator, tensor_aliases, storages=()):
        """CSAN's check; ``storages`` (the data pointers of the storages the
        kernel reads or writes, views included) feed the record_stream check."""
        errors = super()._handle_kernel_launch(stream, read_only, read_write, outputs, operator, tensor_aliases)
        if storages:
            # This launch's Access (its seq_num, operator and stack), as CSAN stored it.
            data_ptr = next(iter(read_write or read_only))
            info = self.tensors_accessed.accesses[data_ptr]
            use = info.write if data_ptr in read_write else info.reads[-1]
            for storage in storages:
                tracked = self._npu_tensors.get(storage)
                if tracked is not None and tracked.allocation_stream != stream:
                    tracked.uses[stream] = use
        for i, error in enumerate(errors):
            reallocated = self._reallocated_at.get(error.data_ptr)
            if reallocated is not None and error.previous_access.seq_num <= reallocated:
                errors[i] = UseOfFreedMemoryError(error.data_ptr, error.allocation_stack_trace,
                                                  error.current_access, error.previous_access)
        return errors

    def _handle_device_synchronization(self, device=-1):
        if device < 0:
            super()._handle_device_synchronization()
            return
        for key in list(self.syncs.current_sync_states):
            if _stream_device(key) == device:
                self.syncs.all_streams_wait_for_stream(key)


class NPUArgumentHandler(csan.ArgumentHandler):
    """CSAN's argument parsing for npu tensors; also notes the device of the
    first one (the device whose current stream runs the kernel)."""

    def __init__(self):
        super().__init__()
        self.device_index = None
        self.storages = set()  # data pointers of the storages read or written

    def _handle_argument(self, value, is_write, metadata_only, name=None, is_output=False):
        if not (isinstance(value, torch.Tensor) and value.device.type == "npu"):
            return
        if self.device_index is None:
            self.device_index = value.device.index
        # Tensors without storage (empty ones) are told apart by identity, as in CSAN.
        data_ptr = value.data_ptr() or id(value)
        if is_write:
            self.dataptrs_written.add(data_ptr)
        elif not metadata_only:
            self.dataptrs_read.add(data_ptr)
        if (is_write or not metadata_only) and value.data_ptr():
            self.storages.add(value.untyped_storage().data_ptr())
        self.tensor_aliases.setdefault(data_ptr, [])
        if name is not None:
            self.tensor_aliases[data_ptr].append(name)
        if is_output:
            self.outputs.add(data_ptr)


class NPUSanitizerDispatchMode(TorchDispatchMode):
    """Feeds every aten op on npu tensors, on the current npu stream, to the
    event handler, after the trace records that came before its launch."""

    def __init__(self, event_handler):
        super().__init__()
        self.event_handler = event_handler

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is aten.record_stream.default:
            # Not a kernel: it tells the allocator (and us) who else uses the memory.
            outputs = func(*args, **kwargs)
            tensor, stream = args[0], args[1]
            if tensor.device.type == "npu":
                self.event_handler.feed_trace()
                self.event_handler._handle_record_stream(
                    tensor.untyped_storage().data_ptr(), _stream_key(stream.device_index, stream.stream_id))
            return outputs

        is_factory = bool(csan.FACTORY_FUNCTION_REGEX.match(func._schema.name))
        arguments = NPUArgumentHandler()
        arguments.parse_inputs(func._schema, args, kwargs, is_factory=is_factory)
        outputs = func(*args, **kwargs)
        arguments.parse_outputs(func._schema, outputs, is_factory=is_factory)
        self.event_handler.feed_trace()  # the outputs' allocations, and what came before
        if arguments.device_index is None:
            return outputs
        stream_id, device_index, _ = _C._current_stream(arguments.device_index)
        errors = self.event_handler._handle_kernel_launch(
            _stream_key(device_index, stream_id),
            arguments.dataptrs_read - arguments.dataptrs_written,
            arguments.dataptrs_written,
            arguments.outputs,
            func._schema,
            arguments.tensor_aliases,
            arguments.storages,
        )
        if errors:
            for error in errors:
                print(error, file=sys.stderr)
            raise csan.CUDASanitizerErrors(errors)
        return outputs


class NPUSanitizer:
    """The sanitizer of this process: its dispatch mode lives from enable()
    to disable() (or the end of the program), on the thread that enabled it."""

    def __init__(self):
        self.event_handler = None
        self.dispatch = None
        self.enabled = False

    def enable(self):
        if self.enabled:
            return
        self.event_handler = NPUEventHandler()
        self.dispatch = NPUSanitizerDispatchMode(self.event_handler)
        _C._set_npu_trace(False)  # a new analysis: drop records an earlier one left
        _C._set_npu_trace(True)
        self.dispatch.__enter__()
        self.enabled = True

    def disable(self):
        if not self.enabled:
            return
        self.dispatch.__exit__(None, None, None)
        _C._set_npu_trace(False)
        self.enabled = False

    def __del__(self):
        # At interpreter exit the mode may outlive the modules it needs.
        if sys is not None and not sys.is_finalizing() and self.enabled:
            self.disable()


def enable_npu_sanitizer():
    """Starts checking every npu kernel for races with kernels on other
    streams. Races are printed to stderr with the stack traces of both
    accesses and raised as ``torch.cuda._sanitizer.CUDASanitizerErrors``.
    Enable it at the start of the program: work launched before is not seen."""
    npu_sanitizer.enable()


npu_sanitizer = NPUSanitizer()
