"""NPU Sanitizer: the switch for torch_npu's two checks of npu kernels.

Turned on by ``TORCH_NPU_SANITIZER=1`` (read at ``import torch_npu``) or by
:func:`enable_npu_sanitizer`. Which check runs is decided by the environment
at that moment:

- ``ASCEND_OPP_DEBUG_PATH`` names CANN's debug kernels: the kernel check
  (torch_npu/npu/_kernel_check.py). On Ascend it swaps the operator package
  for the debug one and reports every operator with its Python stack. vNPU's
  kernels are ATen's, so the debug package is built but never read; what is
  left is the operator trace below, run synchronously so an error surfaces at
  the operator that caused it.
- otherwise: the stream check (torch_npu/npu/_stream_check.py), CSAN's race
  analysis fed by the npu runtime's events. A race raises
  ``torch.cuda._sanitizer.CUDASanitizerErrors`` at the kernel that makes it,
  after both stack traces went to stderr.

This module only owns the lifetime: what listens to the runtime's events,
which dispatch mode is entered, and undoing both. docs/sanitizer.md has the
design of the checks themselves.
"""

import atexit
import enum
import os
import sys
import warnings

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import torch_npu.npu._stream_check as stream_check
import torch_npu.utils._npu_trace as npu_trace
from torch_npu import _C

# Names that lived here before the stream check got its own module; code
# still imports them from torch_npu.npu._sanitizer.
from torch_npu.npu._stream_check import (
    MissingRecordStreamWarning, NPUArgumentHandler, NPUEventHandler, NPURecordStreamHandler,
    NPUSanitizerDispatchMode, UseOfFreedMemoryError)

__all__ = ["enable_npu_sanitizer", "npu_sanitizer", "NPUSanitizer", "SanitizerMode",
           "MissingRecordStreamWarning", "NPUArgumentHandler", "NPUEventHandler", "NPURecordStreamHandler",
           "NPUSanitizerDispatchMode", "UseOfFreedMemoryError"]

_stream_key = npu_trace.stream_key

_DEBUG_KERNELS_ENV = "ASCEND_OPP_DEBUG_PATH"

# The runtime events each check listens to. For an event E, _npu_trace offers
# `<prefix>E` to register a listener and the check's handler has `_handle_E`.
_STREAM_CHECK_EVENTS = (
    "stream_creation", "event_creation", "event_deletion", "event_record", "event_wait",
    "event_synchronization", "stream_synchronization", "device_synchronization",
    "memory_allocation", "memory_deallocation", "record_stream", "erase_stream")
_KERNEL_CHECK_EVENTS = ("acl_start_execution", "acl_finish_execution")


class SanitizerMode(enum.Enum):
    STREAM = 0
    KERNEL = 1


def _listen(handler, registrar_prefix, events):
    """Starts `handler` hearing `events`, and nothing else.

    Both names are resolved late on purpose: the registrar when the check
    starts and the handler's method on each event, so a test that patches a
    registrar or swaps a handler method in place sees its version used.
    """
    npu_trace.clear_callbacks()
    for event in events:
        register = getattr(npu_trace, registrar_prefix + event)
        method = "_handle_" + event
        register(lambda *args, _method=method: getattr(handler, _method)(*args), event)


class NPUSanitizer:
    """The process's one sanitizer.

    Its dispatch mode is entered on the thread that enables it and stays
    until disable() or the end of the program. Real torch_npu's tests reset
    it by hand through `dispatch`, `event_handler` and `enabled`.
    """

    def __init__(self):
        self.enabled = False
        self.mode = SanitizerMode.STREAM
        self.event_handler = None  # what the running check reports to
        self.dispatch = None       # the entered TorchDispatchMode

    def enable(self):
        if self.enabled:
            return
        if os.getenv(_DEBUG_KERNELS_ENV):
            self.mode = SanitizerMode.KERNEL
            self.enabled = self.enable_kernel_check()
        else:
            self.mode = SanitizerMode.STREAM
            self.enabled = self.enable_stream_check()

    def enable_stream_check(self) -> bool:
        handler = stream_check.NPURecordStreamHandler()
        _listen(handler, "register_callback_for_npu_", _STREAM_CHECK_EVENTS)
        # Off then on: a trace left by an earlier run of the check holds
        # events this new analysis must not see.
        _C._set_npu_trace(False)
        _C._set_npu_trace(True)
        self._start(handler, stream_check.NPUSanitizerDispatchMode(handler))
        return True

    def enable_kernel_check(self) -> bool:
        """Reports each npu operator as it starts ("====== Start acl operator
        <op>") and as it ends (with its Python stack), and waits for it before
        the next one runs. Without a debug kernel path this warns and returns
        False: there is nothing to check against."""
        if not os.getenv(_DEBUG_KERNELS_ENV):
            warnings.warn("ASCEND_OPP_DEBUG_PATH is not set! TORCH_NPU_SANITIZER takes no effect!")
            return False
        from torch_npu.npu import _kernel_check  # it builds ./opp_debug_path: only when asked

        debug_package = _kernel_check.KernelPathManager()
        atexit.register(debug_package.clear_debug_env)
        # atexit runs the last registration first, so the trace stops before
        # the debug package goes and before torch_npu's own exit work, whose
        # operators are not the program's.
        atexit.register(self.disable)
        handler = _kernel_check.EventHandler()
        _listen(handler, "register_callback_for_", _KERNEL_CHECK_EVENTS)
        self._start(handler, _OperatorTrace())
        return True

    def _start(self, handler, dispatch):
        self.event_handler = handler
        self.dispatch = dispatch
        dispatch.__enter__()

    def _leave_dispatch(self):
        dispatch, self.dispatch = self.dispatch, None
        if dispatch is not None:
            dispatch.__exit__(None, None, None)

    def disable(self):
        if not self.enabled:
            return
        self._leave_dispatch()
        npu_trace.clear_callbacks()
        _C._set_npu_trace(False)
        self.enabled = False

    def __del__(self):
        # When the interpreter shuts down, the modules leaving the mode needs
        # may be gone already; then there is nothing worth restoring.
        if sys is None or sys.is_finalizing():
            return
        try:
            if self.dispatch is not None:
                self.dispatch.__exit__(None, None, None)
        except Exception:
            pass


def _runs_on_npu(args, kwargs):
    if any(isinstance(leaf, torch.Tensor) and leaf.device.type == "npu"
           for leaf in pytree.tree_leaves((args, kwargs))):
        return True
    # A factory has no tensor argument; its target device says where it runs.
    target = kwargs.get("device")
    return target is not None and torch.device(target).type == "npu"


class _OperatorTrace(TorchDispatchMode):
    """The kernel check's view of the program: every aten operator that runs
    on npu is announced, run, waited for, and announced as finished, under
    the name torch prints for its overload (e.g. "aten.add.Tensor")."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not _runs_on_npu(args, kwargs):
            return func(*args, **kwargs)
        operator = str(func)
        npu_trace.NPUACLStartExecuteCallbacks.fire_callbacks(operator)
        result = func(*args, **kwargs)
        torch.npu.synchronize()  # an asynchronous failure belongs to this operator
        npu_trace.NPUACLFinishExecuteCallbacks.fire_callbacks(operator)
        return result


def enable_npu_sanitizer():
    """Starts checking every npu kernel for races with kernels on other
    streams. Races are printed to stderr with the stack traces of both
    accesses and raised as ``torch.cuda._sanitizer.CUDASanitizerErrors``.
    Enable it at the start of the program: work launched before is not seen."""
    npu_sanitizer.enable()


npu_sanitizer = NPUSanitizer()
