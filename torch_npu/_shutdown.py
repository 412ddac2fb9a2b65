"""Clean interpreter exit after backward passes on npu.

PyTorch's autograd runs the npu part of a backward pass on a per-device
engine thread. torch.autograd.backward stashes a Python object (the
contextvars context) in the thread-local state that the graph task
captures; if the device thread drops the last reference to that graph task
after the interpreter started finalising, releasing the Python object tries
to take the GIL and the process aborts ("terminate called without an active
exception"). CUDA has the same engine threads; the virtual NPU is just fast
enough to hit the window often.

At exit we run one trivial backward per device that ran autograd work,
straight through the engine (no stashed context), which makes every device
thread finish with, and release, the previous graph task first.

Only where backward passes from Python reach the device threads at all,
under VNPU_AUTOGRAD_DEVICE_THREADS=1: by default they run on their calling
thread (Note [npu backward on the calling thread], _backward_on_caller.py),
and a backward started from C++ stashes no Python object.
"""

import atexit

import torch

from torch_npu import _C


def _flush_autograd_device_threads():
    from torch_npu import _backward_on_caller

    if not _C._is_initialized() or _backward_on_caller.installed():
        return
    # The trivial backward below is no operator of the user's (TORCH_NPU_LOGS).
    _C._logging._LogContext.GetInstance().setLogs({"torch_npu.op_plugin": 50})
    engine = torch.autograd.variable.Variable._execution_engine
    try:
        for index in range(_C._device_count()):
            if not _C._device_was_used(index):
                continue
            x = torch.ones((), device=f"npu:{index}", requires_grad=True)
            y = x * 1
            engine.run_backward((y,), (torch.ones((), device=f"npu:{index}"),), False, False, (), True, True)
        _C._synchronize(-1)
    except Exception:
        # The process is exiting: a kernel error nobody synchronised on is
        # no longer reportable to anyone.
        pass


atexit.register(_flush_autograd_device_threads)
