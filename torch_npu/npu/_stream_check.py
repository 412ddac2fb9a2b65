"""The NPU Sanitizer's stream check: finds kernels on different npu streams
that race on a tensor (docs/sanitizer.md; the sanitizer itself is
torch_npu/npu/_sanitizer.py).

It reuses CSAN's device-agnostic analysis (``torch.cuda._sanitizer``: the
access and stream-synchronisation bookkeeping of ``EventHandler``, the
argument parsing of ``ArgumentHandler``, the error classes and their report)
and adds what is npu's: a dispatch mode that knows npu streams, the runtime
events of the C++ side (delivered through torch_npu.utils._npu_trace), and
two checks CSAN lacks: memory freed while another stream still used it (no
``record_stream``), then handed out again and used before that stream was
waited for; and tensors used on another stream without ``record_stream``
(``flush_record_stream_warnings()``, as newer torch_npu reports).
"""

import functools
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.cuda._sanitizer as csan
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import torch_npu.utils._npu_trace as _npu_trace
from torch_npu import _C

aten = torch.ops.aten


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


def _stream_handle(key):
    """The aclrtStream handle (``int(stream.npu_stream)``) of the stream the
    analysis knows by ``key``: findings name streams as real torch_npu's do."""
    device = _npu_trace.stream_device(key)
    stream_id = key - (device << _npu_trace._DEVICE_SHIFT)
    device_type = torch.npu.default_stream(device).device_type
    return int(torch.npu.Stream(stream_id=stream_id, device_index=device, device_type=device_type).npu_stream)


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
class NPUTensorInfo:
    """What the record_stream check knows of a live allocation: its stream
    (None when the trace did not say), the streams record_stream named for
    it, and the last use by each other stream."""

    allocation_stream: Optional[int] = None
    recorded_streams: set = field(default_factory=set)
    cross_stream_usages: dict = field(default_factory=dict)  # stream key -> csan.Access


class NPURecordStreamHandler(csan.EventHandler):
    """CSAN's analysis, plus the freed-while-in-use check and npu's device-wide
    synchronisation (streams of one device only)."""

    def __init__(self):
        super().__init__()
        self._freed_in_use = {}  # data_ptr -> bytes: freed with accesses nobody waited for
        self._reallocated_at = {}  # data_ptr -> seq_num when such memory was handed out again
        self._npu_tensors = {}  # storage data_ptr -> NPUTensorInfo, for allocations seen
        self._record_stream_errors = []  # MissingRecordStreamWarning found when memory came back

    def feed_trace(self):
        """Analyses the runtime events since the last call: delivers them to
        the callbacks registered with torch_npu.utils._npu_trace (this
        handler's, once the sanitizer is enabled)."""
        _npu_trace.deliver_pending_events()

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
        if tracked.allocation_stream is None:
            return []
        return [MissingRecordStreamWarning(data_ptr, _stream_handle(tracked.allocation_stream), _stream_handle(stream),
                                           use)
                for stream, use in tracked.cross_stream_usages.items()
                if stream not in tracked.recorded_streams
                and not self.syncs.is_ordered_after(tracked.allocation_stream, use.seq_num, stream)]

    def _handle_record_stream(self, data_ptr, stream):
        self._npu_tensors.setdefault(data_ptr, NPUTensorInfo()).recorded_streams.add(stream)

    def _handle_erase_stream(self, data_ptr, stream):
        """torch_npu.erase_stream takes back a record_stream. (vNPU's runtime
        does not trace it yet: the check then sees the stream as recorded,
        which can hide a finding but never makes one up.)"""
        tracked = self._npu_tensors.get(data_ptr)
        if tracked is not None:
            tracked.recorded_streams.discard(stream)

    def _handle_memory_allocation(self, data_ptr, stream=None, nbytes=1):
        self._npu_tensors[data_ptr] = NPUTensorInfo(stream)  # a new tensor: nobody recorded it yet
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
        recorded = tracked.recorded_streams if tracked is not None else set()
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
                if tracked is not None and tracked.allocation_stream not in (None, stream):
                    tracked.cross_stream_usages[stream] = use
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
            if _npu_trace.stream_device(key) == device:
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

    def parse_outputs(self, schema, outputs, *, is_factory=False):
        """As CSAN's, except that a factory's outputs (empty_like, new_*) are
        fresh allocations the kernel's stream writes, as real torch_npu's
        sanitizer counts them: CSAN counts them as metadata only."""
        if not is_factory:
            super().parse_outputs(schema, outputs, is_factory=False)
            return
        if schema.returns:
            pytree.tree_map_(functools.partial(self._handle_argument, is_write=True, is_output=True,
                                               metadata_only=False), outputs)


class NPUSanitizerDispatchMode(TorchDispatchMode):
    """Feeds every aten op on npu tensors, on the current npu stream, to the
    event handler, after the runtime events that came before its launch."""

    def __init__(self, event_handler):
        super().__init__()
        self.event_handler = event_handler
        self.args_handler = None  # the arguments of the op being dispatched

    def parse_inputs(self, schema, args, kwargs, is_factory=False):
        self.args_handler.parse_inputs(schema, args, kwargs, is_factory=is_factory)

    def parse_outputs(self, schema, outputs, is_factory=False):
        self.args_handler.parse_outputs(schema, outputs, is_factory=is_factory)

    def check_errors(self, func, stream):
        """Analyses the launch of ``func`` on ``stream`` (a stream key): races
        are printed to stderr and raised as CUDASanitizerErrors."""
        arguments = self.args_handler
        errors = self.event_handler._handle_kernel_launch(
            stream,
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

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is aten.record_stream.default:
            return self._record_stream(func, args, kwargs)
        is_factory = bool(csan.FACTORY_FUNCTION_REGEX.match(func._schema.name))
        self.args_handler = NPUArgumentHandler()
        self.parse_inputs(func._schema, args, kwargs, is_factory=is_factory)
        outputs = func(*args, **kwargs)
        self.parse_outputs(func._schema, outputs, is_factory=is_factory)
        self.event_handler.feed_trace()  # the outputs' allocations, and what came before
        device_index = self.args_handler.device_index
        if device_index is not None:
            stream_id, device_index, _ = _C._current_stream(device_index)
            self.check_errors(func, _npu_trace.stream_key(device_index, stream_id))
        return outputs

    def _record_stream(self, func, args, kwargs):
        # Not a kernel: it tells the allocator (and us) who else uses the memory.
        outputs = func(*args, **kwargs)
        tensor, stream = args[0], args[1]
        if tensor.device.type == "npu":
            self.event_handler.feed_trace()
            self.event_handler._handle_record_stream(
                tensor.untyped_storage().data_ptr(), _npu_trace.stream_key(stream.device_index, stream.stream_id))
        return outputs


NPUEventHandler = NPURecordStreamHandler  # vNPU's earlier name
