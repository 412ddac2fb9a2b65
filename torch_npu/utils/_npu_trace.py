"""Callbacks on npu runtime events, for tools that analyse them (the NPU
Sanitizer's stream check): torch_npu's counterpart of ``torch.cuda._gpu_trace``.

A tool registers a callback per kind of event (``register_callback_for_*``);
the C++ side records the events in order while tracing is on (Note
[Sanitizer trace] in csrc/core/npu_trace.h), and ``deliver_pending_events()``
hands the records made since its last call to the callbacks, in order. The
sanitizer's dispatch mode delivers before analysing each kernel, so every
callback has seen what happened before that kernel's launch.

Arguments: events ``(event_id)``, event record/wait ``(event_id, stream)``,
memory ``(data_ptr, stream, nbytes)``, streams ``(stream)``, device
synchronisation ``(device)``, record/erase stream ``(data_ptr, stream)``, acl
start/finish ``(operator_name)``; ``stream`` is the analysis' stream key
(``stream_key``).
"""

from typing import Callable

from torch._utils import CallbackRegistry

from torch_npu import _C

__all__ = []

# TraceKind (csrc/core/npu_trace.h), in its order.
(_EVENT_CREATION, _EVENT_DELETION, _EVENT_RECORD, _EVENT_WAIT, _EVENT_SYNCHRONIZATION, _STREAM_CREATION,
 _STREAM_SYNCHRONIZATION, _DEVICE_SYNCHRONIZATION, _MEMORY_ALLOCATION, _MEMORY_DEALLOCATION) = range(10)

# Above every stream id: pool ids are (type << 5) | index, external streams'
# carry bit 30 (csrc/core/npu_stream.h); 0 is the default stream.
_DEVICE_SHIFT = 32


def stream_key(device_index, stream_id):
    """The id the analysis knows a stream by: unique over devices, and 0 for
    npu:0's default stream (CSAN's DEFAULT_STREAM_ID)."""
    return (device_index << _DEVICE_SHIFT) | stream_id


def stream_device(key):
    return key >> _DEVICE_SHIFT


def print_check_msg(msg: str):
    """How the kernel check reports an operator (real torch_npu's format)."""
    print(msg, flush=True)


NPUACLStartExecuteCallbacks = CallbackRegistry("NPU acl operator start")
NPUACLFinishExecuteCallbacks = CallbackRegistry("NPU acl operator finish")
NPUEventCreationCallbacks = CallbackRegistry("NPU event creation")
NPUEventDeletionCallbacks = CallbackRegistry("NPU event deletion")
NPUEventRecordCallbacks = CallbackRegistry("NPU event record")
NPUEventWaitCallbacks = CallbackRegistry("NPU event wait")
NPUMemoryAllocationCallbacks = CallbackRegistry("NPU memory allocation")
NPUMemoryDeallocationCallbacks = CallbackRegistry("NPU memory deallocation")
NPUStreamCreationCallbacks = CallbackRegistry("NPU stream creation")
NPUDeviceSynchronizationCallbacks = CallbackRegistry("NPU device synchronization")
NPUStreamSynchronizationCallbacks = CallbackRegistry("NPU stream synchronization")
NPUEventSynchronizationCallbacks = CallbackRegistry("NPU event synchronization")
NPURecordStreamCallbacks = CallbackRegistry("NPU record stream")
NPUEraseStreamCallbacks = CallbackRegistry("NPU erase stream")

_ALL = (NPUACLStartExecuteCallbacks, NPUACLFinishExecuteCallbacks, NPUEventCreationCallbacks,
        NPUEventDeletionCallbacks, NPUEventRecordCallbacks, NPUEventWaitCallbacks, NPUMemoryAllocationCallbacks,
        NPUMemoryDeallocationCallbacks, NPUStreamCreationCallbacks, NPUDeviceSynchronizationCallbacks,
        NPUStreamSynchronizationCallbacks, NPUEventSynchronizationCallbacks, NPURecordStreamCallbacks,
        NPUEraseStreamCallbacks)


def _registrar(registry):
    def register(cb: Callable, cb_name: str) -> None:
        registry.add_callback(cb)
    return register


register_callback_for_acl_start_execution = _registrar(NPUACLStartExecuteCallbacks)
register_callback_for_acl_finish_execution = _registrar(NPUACLFinishExecuteCallbacks)
register_callback_for_npu_event_creation = _registrar(NPUEventCreationCallbacks)
register_callback_for_npu_event_deletion = _registrar(NPUEventDeletionCallbacks)
register_callback_for_npu_event_record = _registrar(NPUEventRecordCallbacks)
register_callback_for_npu_event_wait = _registrar(NPUEventWaitCallbacks)
register_callback_for_npu_memory_allocation = _registrar(NPUMemoryAllocationCallbacks)
register_callback_for_npu_memory_deallocation = _registrar(NPUMemoryDeallocationCallbacks)
register_callback_for_npu_stream_creation = _registrar(NPUStreamCreationCallbacks)
register_callback_for_npu_device_synchronization = _registrar(NPUDeviceSynchronizationCallbacks)
register_callback_for_npu_stream_synchronization = _registrar(NPUStreamSynchronizationCallbacks)
register_callback_for_npu_event_synchronization = _registrar(NPUEventSynchronizationCallbacks)
register_callback_for_npu_record_stream = _registrar(NPURecordStreamCallbacks)
register_callback_for_npu_erase_stream = _registrar(NPUEraseStreamCallbacks)


def clear_callbacks():
    """Forgets every registered callback (a tool that stops)."""
    for registry in _ALL:
        registry.callback_list.clear()


def deliver_pending_events():
    """Hands the runtime events recorded since the last call to the callbacks."""
    for kind, a, b, c, d in _C._drain_npu_trace():
        if kind == _MEMORY_ALLOCATION:
            NPUMemoryAllocationCallbacks.fire_callbacks(a, stream_key(b, c), d)
        elif kind == _MEMORY_DEALLOCATION:
            NPUMemoryDeallocationCallbacks.fire_callbacks(a, stream_key(b, c), d)
        elif kind == _EVENT_RECORD:
            NPUEventRecordCallbacks.fire_callbacks(a, stream_key(b, c))
        elif kind == _EVENT_WAIT:
            NPUEventWaitCallbacks.fire_callbacks(a, stream_key(b, c))
        elif kind == _EVENT_CREATION:
            NPUEventCreationCallbacks.fire_callbacks(a)
        elif kind == _EVENT_DELETION:
            NPUEventDeletionCallbacks.fire_callbacks(a)
        elif kind == _EVENT_SYNCHRONIZATION:
            NPUEventSynchronizationCallbacks.fire_callbacks(a)
        elif kind == _STREAM_CREATION:
            NPUStreamCreationCallbacks.fire_callbacks(stream_key(a, b))
        elif kind == _STREAM_SYNCHRONIZATION:
            NPUStreamSynchronizationCallbacks.fire_callbacks(stream_key(a, b))
        elif kind == _DEVICE_SYNCHRONIZATION:
            NPUDeviceSynchronizationCallbacks.fire_callbacks(a)
