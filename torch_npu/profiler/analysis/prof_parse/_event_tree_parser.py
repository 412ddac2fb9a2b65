"""The framework's records as a tree of events per thread, in the shape PyTorch's memory profiler
(torch.profiler._memory_profiler) walks: each event has a tag (torch's _EventType), start/end
times, a parent and children, and tag-specific ``extra_fields``."""

import itertools
from dataclasses import dataclass, field
from enum import IntEnum
from queue import PriorityQueue

import torch
from torch._C._profiler import _EventType

from ..prof_common_func._constant import print_error_msg

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
