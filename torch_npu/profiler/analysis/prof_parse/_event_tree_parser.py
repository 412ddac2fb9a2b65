"""The framework's records as a tree of events per thread, in the shape PyTorch's memory profiler
(torch.profiler._memory_profiler) walks: each event has a tag (torch's _EventType), start/end
times, a parent and children, and tag-specific ``extra_fields``."""

import itertools
import os
from dataclasses import dataclass, field
from enum import IntEnum
from queue import PriorityQueue

import torch
from torch._C._profiler import _EventType

from torch_npu.profiler.analysis.prof_common_func._constant import print_error_msg

__all__ = []


class _DeviceType(IntEnum):
    """The device of a memory record (c10's numbering; the NPU is PrivateUse1)."""
    CPU = 0
    CUDA = 1
    NPU = 20


@dataclass
class _TensorMetadata:
    impl_ptr: int
    storage_data_ptr: int
    dtype: torch.dtype
    itemsize: int
    sizes: list
    strides: list
    device_index: int
    allocation_id: int = None


@dataclass(eq=False)
class _ProfilerEvent:
    tag: _EventType
    tid: int
    start_time_ns: int
    end_time_ns: int
    name: str = ""
    extra_fields: object = None
    parent: "_ProfilerEvent" = None
    children: list = field(default_factory=list)
    finished: bool = False

    @property
    def typed(self):
        return self.tag, self.extra_fields


def _ints(text: str) -> list:
    return [int(part) for part in text.split(",") if part != ""]


def parse_tensor_metadata(tensor_str: str):
    """"impl;storage;dtype;itemsize;sizes;strides;device" (pointers in hex, sizes and strides
    comma-separated) as a _TensorMetadata, None if a field does not parse."""
    parts = (tensor_str or "").split(";")
    if len(parts) != 7:
        return None
    dtype = getattr(torch, parts[2], None)
    if not isinstance(dtype, torch.dtype):
        return None
    try:
        return _TensorMetadata(int(parts[0], 16), int(parts[1], 16), dtype, int(parts[3]),
                               _ints(parts[4]), _ints(parts[5]), int(parts[6]))
    except ValueError:
        return None


def parse_input_from_string(input_tensors, input_tensor_lists, input_scalars, input_order) -> list:
    """An op's inputs in call order. ``input_order`` spells each input's kind ("T" tensor, "L"
    tensor list, "S" scalar, "-" none), the other three give the tensors ("|"-separated), the tensor
    lists ("|" between lists, "&" inside one) and the scalars ("|"-separated)."""
    if not input_order:
        return []
    tensors = iter((input_tensors or "").split("|"))
    lists = iter((input_tensor_lists or "").split("|"))
    scalars = iter((input_scalars or "").split("|"))
    inputs = []
    for kind in input_order:
        if kind == "T":
            inputs.append(parse_tensor_metadata(next(tensors, "")))
        elif kind == "L":
            inputs.append([parse_tensor_metadata(item) for item in next(lists, "").split("&") if item])
        elif kind == "S":
            inputs.append(next(scalars, None))
        else:
            inputs.append(None)
    return inputs


def mark_finished(event) -> bool:
    if event.finished:
        print_error_msg(f"Event tree: an event finished twice (tid {event.tid}, start {event.start_time_ns}).")
        return False
    event.finished = True
    return True


def push_event(event, thread_event: dict, unfinished_events) -> bool:
    """Hangs ``event`` under the innermost open event of its thread; a torch op becomes that
    thread's innermost open event until it ends. False (and a message) for an inconsistent event."""
    if event.parent is not None:
        print_error_msg("Event tree: an event pushed twice already has a parent.")
        return False
    if any(not child.finished for child in event.children):
        print_error_msg("Event tree: an event is pushed before its children finished.")
        return False
    parent = thread_event.get(event.tid)
    while parent is not None and parent.finished:
        parent = parent.parent
    if parent is not None:
        event.parent = parent
        parent.children.append(event)
    if event.tag == _EventType.TorchOp:
        thread_event[event.tid] = event
        unfinished_events.put((event.end_time_ns, next(_ORDER), event))
    return True


_ORDER = itertools.count()  # breaks ties between events ending together


def build_event_tree(sorted_events: list) -> None:
    """Links ``sorted_events`` (in start order) into trees: parents, children, finished flags."""
    thread_event, unfinished = {}, PriorityQueue()

    def finish_until(time_ns):
        while not unfinished.empty():
            end_ns, order, event = unfinished.get()
            if end_ns > time_ns:
                unfinished.put((end_ns, order, event))
                return True
            if not mark_finished(event):
                return False
            if thread_event.get(event.tid) is event:
                thread_event[event.tid] = event.parent
        return True

    for event in sorted_events:
        if not finish_until(event.start_time_ns) or not push_event(event, thread_event, unfinished):
            return None
    finish_until(float("inf"))
    return None


@dataclass
class _AllocationFields:
    """An allocator record as torch's memory profiler reads an Allocation event's extra fields."""
    ptr: int
    id: int
    allocation_id: int
    alloc_size: int
    total_allocated: int
    total_reserved: int
    total_active: int
    device_type: int
    device_index: int

    @property
    def device(self) -> torch.device:
        if self.device_type == _DeviceType.NPU:
            return torch.device("npu", max(self.device_index, 0))
        return torch.device("cpu")


@dataclass
class _TorchOpFields:
    name: str
    forward_tid: int
    end_time_ns: int
    inputs: list = field(default_factory=list)
    allow_tf32_cublas: bool = False


class EventTree:
    """The profile's torch ops and allocator records, linked per thread (build_event_tree)."""

    def __init__(self, profiler_path: str):
        self.sorted_events = sorted(self._load(profiler_path), key=lambda event: event.start_time_ns)
        build_event_tree(self.sorted_events)

    @staticmethod
    def _load(profiler_path: str) -> list:
        from torch_npu.profiler.analysis.prof_parse._fwk_file_parser import FwkFileParser, FwkFileTag
        from torch_npu.profiler.analysis.prof_bean._memory_use_bean import MemoryUseBean
        parser = FwkFileParser(profiler_path)
        events = []
        for op in parser.get_file_data_by_tag(FwkFileTag.TORCH_OP):
            events.append(_ProfilerEvent(_EventType.TorchOp, op.tid, op.ts, op.end_ns, op.name,
                                         _TorchOpFields(op.name, getattr(op, "fwd_tid", 0) or 0, op.end_ns)))
        path = os.path.join(parser._fwk_path or "", "torch.memory_usage")
        if os.path.isfile(path):
            from torch_npu.profiler.analysis.prof_common_func._tlv_decoder import TLVDecoder
            with open(path, "rb") as handle:
                records = TLVDecoder.decode(handle.read(), MemoryUseBean, MemoryUseBean.record_size())
            blocks = {}  # ptr -> allocation id, while the block lives
            for number, record in enumerate(records):
                size = record.alloc_size_for_db
                allocation_id = blocks.setdefault(record.ptr, number) if size > 0 else blocks.pop(record.ptr, number)
                fields = _AllocationFields(record.ptr, allocation_id, allocation_id, size,
                                           record.total_allocated_for_db, record.total_reserved_for_db,
                                           record.total_active_for_db, record.device_type, record.device_index)
                events.append(_ProfilerEvent(_EventType.Allocation, record.tid, record.time_ns, record.time_ns,
                                             "[memory]", fields))
        return events

    def get_root_nodes(self) -> list:
        return [event for event in self.sorted_events if event.parent is None]
