"""The FLOP counter of torch_npu.utils (FlopsCounter): counts the floating-point
operations of the ATen ops that run between start() and stop(), with PyTorch's
FLOP formulas (torch.utils.flop_counter).

As in real torch_npu, the counts belong to the process (one context that every
counter reads and drives): start() switches counting on without clearing,
stop() switches it off and clears the counts, pause()/resume() stop and resume
the recorded count only. get_flops() returns [recorded, traversed]: traversed
counts every op, recorded leaves out what ran while paused (MindSpeed pauses
during activation recomputation, so recorded is the model's useful work).
Ops are seen on the thread that called start().

`torch_npu.utils.FlopsCounter` is the class; this module's `FlopsCounter` is the
same with real torch_npu's FutureWarning (its old import path).
"""

import warnings

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

__all__ = []


class _Context:
    """The process's counts, as real torch_npu's FlopCountContext."""

    def __init__(self):
        self.mode = None  # the dispatch mode while counting is on
        self.paused = False
        self.recorded = 0
        self.traversed = 0

    def reset(self):
        self.paused = False
        self.recorded = self.traversed = 0


_CONTEXT = _Context()


class _CountingMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            flops = formula(*args, **kwargs, out_val=out)
            _CONTEXT.traversed += flops
            if not _CONTEXT.paused:
                _CONTEXT.recorded += flops
        return out


class _FlopsCounter:
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        """Switches counting on (the counts so far are kept)."""
        if _CONTEXT.mode is None:
            _CONTEXT.mode = _CountingMode()
            _CONTEXT.mode.__enter__()

    def stop(self):
        """Switches counting off and clears the counts; nothing when it is off."""
        if _CONTEXT.mode is not None:
            mode, _CONTEXT.mode = _CONTEXT.mode, None
            mode.__exit__(None, None, None)
        _CONTEXT.reset()

    def pause(self):
        _CONTEXT.paused = True

    def resume(self):
        _CONTEXT.paused = False

    def get_flops(self):
        return [_CONTEXT.recorded, _CONTEXT.traversed]


class FlopsCounter(_FlopsCounter):
    def __init__(self):
        super().__init__()
        warnings.warn("torch_npu.utils.flops_count.FlopsCounter() will be deprecated. "
                      "If necessary, please use torch_npu.utils.FlopsCounter().", FutureWarning, stacklevel=2)
