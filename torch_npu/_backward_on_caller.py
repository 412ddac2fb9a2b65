"""Backward passes of npu tensors run on the thread that calls them.

Note [npu backward on the calling thread]
PyTorch's autograd engine runs the part of a backward pass that belongs to
an accelerator on a worker thread of that device, and the calling thread
waits for it: on a GPU that thread keeps the device fed while the caller's
CPU work goes on. On the virtual NPU the device's kernels already run on
the stream workers, so the engine's npu thread only queues them, and each
backward pass paid two cross-thread wake-ups (the caller waking the npu
thread, the npu thread waking the caller at the end), plus a GIL hand-off
for every Python hook on the way. On the 2-core machine that was most of a
small backward pass (benchmarks/bench_ops.py's "fwd+bwd of 16 elements" case).

So every backward pass started from Python (``Tensor.backward``,
``torch.autograd.backward``, ``torch.autograd.grad``: all go through
``Variable._execution_engine.run_backward``) runs with PyTorch's own
``torch.autograd.set_multithreading_enabled(False)`` semantics, as CPU
autograd always runs: on the calling thread. The results, the streams each
backward op runs on and the stream synchronisation at the end are the
engine's, unchanged (the engine picks streams per node, not per thread).
``torch.autograd.is_multithreading_enabled()`` still reports the caller's
setting outside backward passes. Backward passes started from C++
(``torch::autograd::backward``) keep the engine's device threads, as does
a process that sets ``VNPU_AUTOGRAD_DEVICE_THREADS=1``.
"""

import torch
from torch.autograd.variable import Variable

_is_multithreading_enabled = torch._C._is_multithreading_enabled
_set_multithreading_enabled = torch._C._set_multithreading_enabled


class _CallerThreadEngine(torch._C._ImperativeEngine):
    """The Python-facing autograd engine, running each backward pass on its caller."""

    def run_backward(self, *args, **kwargs):
        if not _is_multithreading_enabled():
            return super().run_backward(*args, **kwargs)
        _set_multithreading_enabled(False)
        try:
            return super().run_backward(*args, **kwargs)
        finally:
            _set_multithreading_enabled(True)


def install():
    if not installed():
        Variable._execution_engine = _CallerThreadEngine()


def install_from_environment(value):
    """VNPU_AUTOGRAD_DEVICE_THREADS: "1" keeps autograd's device threads, "0" installs the engine."""
    if value not in ("0", "1"):
        raise ValueError(f"VNPU_AUTOGRAD_DEVICE_THREADS must be 0 or 1, but got {value!r}")
    if value == "0":
        install()


def installed():
    return isinstance(Variable._execution_engine, _CallerThreadEngine)
