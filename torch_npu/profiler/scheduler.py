"""torch_npu.profiler.schedule: which profiler action each step takes.

A ``Schedule`` is torch.profiler's schedule (skip ``skip_first`` steps, then
cycles of ``wait``, ``warmup`` and ``active`` steps, ``repeat`` times or for
ever; ``skip_first_wait`` non-zero drops the first cycle's wait) with
torch_npu's surface: its parameters stay readable as attributes, and a bad
value warns and is reset instead of raising, as in real torch_npu.
"""

import warnings

import torch.profiler as _torch_profiler

__all__ = ["ProfilerAction", "Schedule"]

ProfilerAction = _torch_profiler.ProfilerAction


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class Schedule:
    """``Schedule(wait, active, warmup=0, repeat=0, skip_first=0, skip_first_wait=0)``;
    call it with a step number (>= 0) for that step's ProfilerAction."""

    def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0,
                 skip_first_wait: int = 0) -> None:
        self.wait = wait
        self.active = active
        self.warmup = warmup
        self.repeat = repeat
        self.skip_first = skip_first
        self.skip_first_wait = skip_first_wait
        self._reset_invalid()
        self._torch_schedule = _torch_profiler.schedule(
            wait=self.wait, warmup=self.warmup, active=self.active, repeat=self.repeat,
            skip_first=self.skip_first, skip_first_wait=self.skip_first_wait)

    def __call__(self, step: int) -> ProfilerAction:
        if not _is_int(step) or step < 0:
            raise ValueError(f"Invalid parameter step, which must be not less than 0, got {step!r}.")
        return self._torch_schedule(step)

    def __repr__(self):
        return (f"Schedule(wait={self.wait}, active={self.active}, warmup={self.warmup}, repeat={self.repeat}, "
                f"skip_first={self.skip_first}, skip_first_wait={self.skip_first_wait})")

    def _reset_invalid(self):
        # name -> (smallest valid value, value it is reset to)
        bounds = {"wait": (0, 0), "warmup": (0, 0), "active": (1, 1), "repeat": (0, 0), "skip_first": (0, 0)}
        for name, (minimum, default) in bounds.items():
            value = getattr(self, name)
            if not _is_int(value) or value < minimum:
                warnings.warn(f"Invalid parameter {name}, reset it to {default}.")
                setattr(self, name, default)
        if not _is_int(self.skip_first_wait):
            warnings.warn("Invalid parameter skip_first_wait, reset it to 0.")
            self.skip_first_wait = 0
