"""NPU Sanitizer: finds kernels on different npu streams that race on a tensor.

The npu counterpart of ``torch.cuda._sanitizer`` (CSAN), enabled by
``TORCH_NPU_SANITIZER=1`` or :func:`enable_npu_sanitizer`. Real torch_npu
has two modes: the stream check (torch_npu/npu/_stream_check.py: races
between streams, memory reused while another stream still used it, missing
``record_stream``) and, when ``ASCEND_OPP_DEBUG_PATH`` names CANN debug
kernels, a kernel check that runs those instead of the operator package's
and reports every operator with its Python stack. vNPU runs both; its
kernels are ATen's, so the kernel check's debug package is built but not
read, and the check is the operator trace run synchronously
(torch_npu/npu/_kernel_check.py).

A race is raised at the kernel that makes it, as ``CUDASanitizerErrors`` (what
torch_npu raises), after each error was printed to stderr with both stack
traces. docs/sanitizer.md explains the design.
"""

import os
import sys
import warnings

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import torch_npu.npu._stream_check as stream_check
import torch_npu.utils._npu_trace as npu_trace
from torch_npu import _C

# What the earlier single-module sanitizer exported, for code that imports it from here.
from torch_npu.npu._stream_check import (
    MissingRecordStreamWarning, NPUArgumentHandler, NPUEventHandler, NPURecordStreamHandler,
    NPUSanitizerDispatchMode, UseOfFreedMemoryError)

__all__ = ["MissingRecordStreamWarning", "NPUArgumentHandler", "NPUEventHandler", "NPURecordStreamHandler",
           "NPUSanitizer", "NPUSanitizerDispatchMode", "SanitizerMode", "UseOfFreedMemoryError",
           "enable_npu_sanitizer", "npu_sanitizer"]

_stream_key = npu_trace.stream_key


class SanitizerMode:
    STREAM = 0
    KERNEL = 1


class NPUSanitizer:
    """The sanitizer of this process: its dispatch mode lives from enable()
    to disable() (or the end of the program), on the thread that enabled it."""

    def __init__(self):
        self.event_handler = None
        self.dispatch = None
        self.mode = SanitizerMode.STREAM
        self.enabled = False

    def enable(self):
        if self.enabled:
            return
        if os.getenv("ASCEND_OPP_DEBUG_PATH"):
            self.mode = SanitizerMode.KERNEL
            success = self.enable_kernel_check()
        else:
            self.mode = SanitizerMode.STREAM
            success = self.enable_stream_check()
        self.enabled = success

    def enable_kernel_check(self) -> bool:
        """Every npu operator from now on is reported as it starts ("====== Start
        acl operator <op>") and finishes (its Python stack), and runs to
        completion before the next, so an error raises at its operator. The
        debug operator package of ASCEND_OPP_DEBUG_PATH is built as on Ascend
        (./opp_debug_path, removed at exit), though vNPU's ATen kernels do not
        read it."""
        if not os.getenv("ASCEND_OPP_DEBUG_PATH"):
            warnings.warn("ASCEND_OPP_DEBUG_PATH is not set! TORCH_NPU_SANITIZER takes no effect!")
            return False
        import atexit

        from torch_npu.npu import _kernel_check

        paths = _kernel_check.KernelPathManager()
        atexit.register(paths.clear_debug_env)
        atexit.register(self.disable)  # before torch_npu's own exit work, which is not the program's
        handler = _kernel_check.EventHandler()
        self.event_handler = handler
        npu_trace.clear_callbacks()
        npu_trace.register_callback_for_acl_start_execution(
            lambda name: handler._handle_acl_start_execution(name), "acl_start_execution")
        npu_trace.register_callback_for_acl_finish_execution(
            lambda name: handler._handle_acl_finish_execution(name), "acl_finish_execution")
        self.dispatch = _KernelCheckDispatchMode()
        self.dispatch.__enter__()
        return True

    def enable_stream_check(self) -> bool:
        handler = stream_check.NPURecordStreamHandler()
        self.event_handler = handler
        self.dispatch = stream_check.NPUSanitizerDispatchMode(handler)
        npu_trace.clear_callbacks()
        # Each callback looks the handler's method up when called, so a
        # replaced method (a test's spy) is the one that runs.
        for register, method in (
                (npu_trace.register_callback_for_npu_event_creation, "_handle_event_creation"),
                (npu_trace.register_callback_for_npu_event_deletion, "_handle_event_deletion"),
                (npu_trace.register_callback_for_npu_event_record, "_handle_event_record"),
                (npu_trace.register_callback_for_npu_event_wait, "_handle_event_wait"),
                (npu_trace.register_callback_for_npu_memory_allocation, "_handle_memory_allocation"),
                (npu_trace.register_callback_for_npu_memory_deallocation, "_handle_memory_deallocation"),
                (npu_trace.register_callback_for_npu_stream_creation, "_handle_stream_creation"),
                (npu_trace.register_callback_for_npu_device_synchronization, "_handle_device_synchronization"),
                (npu_trace.register_callback_for_npu_stream_synchronization, "_handle_stream_synchronization"),
                (npu_trace.register_callback_for_npu_event_synchronization, "_handle_event_synchronization"),
                (npu_trace.register_callback_for_npu_record_stream, "_handle_record_stream"),
                (npu_trace.register_callback_for_npu_erase_stream, "_handle_erase_stream")):
            register(lambda *args, _m=method: getattr(handler, _m)(*args), method.lstrip("_"))
        _C._set_npu_trace(False)  # a new analysis: drop records an earlier one left
        _C._set_npu_trace(True)
        self.dispatch.__enter__()
        return True

    def disable(self):
        if not self.enabled:
            return
        if self.dispatch is not None:
            self.dispatch.__exit__(None, None, None)
            self.dispatch = None
        npu_trace.clear_callbacks()
        _C._set_npu_trace(False)
        self.enabled = False

    def __del__(self):
        # At interpreter exit the mode may outlive the modules it needs.
        if sys is None or sys.is_finalizing():
            return
        try:
            if self.dispatch is not None:
                self.dispatch.__exit__(None, None, None)
        except Exception:
            pass


class _KernelCheckDispatchMode(TorchDispatchMode):
    """The kernel check's operator trace: each aten operator on npu tensors
    fires the acl start callbacks, runs, is waited for, then fires the finish
    callbacks (named as torch prints the overload, e.g. "aten.add.Tensor")."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        on_npu = any(isinstance(t, torch.Tensor) and t.device.type == "npu"
                     for t in pytree.tree_leaves((args, kwargs)))
        on_npu = on_npu or torch.device(kwargs.get("device") or "cpu").type == "npu"  # factories
        if not on_npu:
            return func(*args, **kwargs)
        name = str(func)
        npu_trace.NPUACLStartExecuteCallbacks.fire_callbacks(name)
        out = func(*args, **kwargs)
        torch.npu.synchronize()
        npu_trace.NPUACLFinishExecuteCallbacks.fire_callbacks(name)
        return out


def enable_npu_sanitizer():
    """Starts checking every npu kernel for races with kernels on other
    streams. Races are printed to stderr with the stack traces of both
    accesses and raised as ``torch.cuda._sanitizer.CUDASanitizerErrors``.
    Enable it at the start of the program: work launched before is not seen."""
    npu_sanitizer.enable()


npu_sanitizer = NPUSanitizer()
