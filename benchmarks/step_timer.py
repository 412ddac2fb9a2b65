"""Timing of training steps on npu, shared by the benchmarks that compare a
step with and without something (the profiler, strict chip mode)."""

import time

import torch


def window_step_time(step, steps):
    """Seconds per call of ``step`` over ``steps`` calls, to the end of their device work."""
    torch.npu.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.npu.synchronize()
    return (time.perf_counter() - t0) / steps


def best_step_time(step, steps, repeats=5):
    """Best-of-``repeats`` window_step_time, after 10 warm-up calls."""
    for _ in range(10):
        step()
    return min(window_step_time(step, steps) for _ in range(repeats))
