"""The FLOP counter of torch_npu.utils (FlopsCounter): counts the floating-point
operations of the ATen ops that run between start() and stop(), with PyTorch's
FLOP formulas (torch.utils.flop_counter).

As in real torch_npu, the counts belong to the process: every counter reads
and drives the one tally. start() switches counting on without clearing,
stop() switches it off and clears the tally, pause()/resume() stop and resume
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


def _flops_of(func, args, kwargs, result):
    """PyTorch's count for one op call; 0 for an op it has no formula for."""
    formula = flop_registry.get(func._overloadpacket)
    if formula is None:
        return 0
    return formula(*args, **kwargs, out_val=result)


class _Tally:
    """The process's FLOP counts (real torch_npu's FlopCountContext)."""

    def __init__(self):
        self.recorded = 0
        self.traversed = 0
        self.recording = True  # False while paused
        self._watch = None     # the dispatch mode that sees the ops, while counting

    def add(self, flops):
        self.traversed += flops
        if self.recording:
            self.recorded += flops

    def switch_on(self):
        if self._watch is not None:
            return  # already counting: the counts so far stay
        self._watch = _OpWatch()
        self._watch.__enter__()

    def switch_off(self):
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.__exit__(None, None, None)
        self.recorded, self.traversed, self.recording = 0, 0, True


_TALLY = _Tally()


class _OpWatch(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        _TALLY.add(_flops_of(func, args, kwargs, result))
        return result


class _FlopsCounter:
    """A handle on the process's tally; usable as a context manager that
    starts counting on entry and stops on exit."""

    def start(self):
        """Switches counting on (the counts so far are kept)."""
        _TALLY.switch_on()

    def stop(self):
        """Switches counting off and clears the counts; nothing when it is off."""
        _TALLY.switch_off()

    def pause(self):
        _TALLY.recording = False

    def resume(self):
        _TALLY.recording = True

    def get_flops(self):
        return [_TALLY.recorded, _TALLY.traversed]

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()


class FlopsCounter(_FlopsCounter):
    def __init__(self):
        super().__init__()
        warnings.warn("torch_npu.utils.flops_count.FlopsCounter() will be deprecated. "
                      "If necessary, please use torch_npu.utils.FlopsCounter().", FutureWarning, stacklevel=2)
