"""Timing of training steps on npu, shared by the benchmarks that compare a
step with and without something (the profiler, strict chip mode)."""

import time

import torch


def best_step_time(step, steps, repeats=5):
    """Best-of-``repeats`` seconds per call of ``step`` over ``steps`` calls,
    to the end of their device work, after 10 warm-up calls."""
    for _ in range(10):
        step()
    torch.npu.synchronize()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.npu.synchronize()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best
