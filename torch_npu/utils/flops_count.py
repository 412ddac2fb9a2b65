"""torch_npu.utils.flops_count.FlopsCounter: counts the floating-point operations
of the ATen ops that run between start() and stop(), with PyTorch's FLOP
formulas (torch.utils.flop_counter).

get_flops() returns (recorded, traversed): traversed counts every op, recorded
leaves out what ran while paused (MindSpeed pauses during activation
recomputation, so recorded is the model's useful work).
"""

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry


class _CountingMode(TorchDispatchMode):
    def __init__(self, counter):
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            flops = formula(*args, **kwargs, out_val=out)
            self.counter._traversed += flops
            if not self.counter._paused:
                self.counter._recorded += flops
        return out


class FlopsCounter:
    def __init__(self):
        self._mode = None
        self._paused = False
        self._recorded = 0
        self._traversed = 0

    def start(self):
        """Starts counting from zero (on this thread)."""
        if self._mode is not None:
            raise RuntimeError("FlopsCounter.start(): the counter is already running; call stop() first.")
        self._recorded = self._traversed = 0
        self._paused = False
        self._mode = _CountingMode(self)
        self._mode.__enter__()

    def stop(self):
        if self._mode is None:
            raise RuntimeError("FlopsCounter.stop(): the counter is not running; call start() first.")
        self._mode.__exit__(None, None, None)
        self._mode = None

    def pause(self):
        self._paused = True

    def resume(self):
        self._paused = False

    def get_flops(self):
        return [self._recorded, self._traversed]
