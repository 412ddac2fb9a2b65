"""What profiling costs: the MLP and transformer training steps of
bench_ops.py on npu, with no profiler, with torch.profiler recording host
ops only, with host ops + npu device activity, and with torch_npu.profiler
writing its output at the end (the writing itself is not timed), side by
side in one process. Prints ms per step and the ratios to no profiler
(targets: active <= 1.3x), and the trace size per step.

The inactive cost (tracing compiled in, no profiler) is one relaxed atomic
load per task and two clock reads per batch of tasks (utilization); it is
measured by bench_ops.py's add 1K case, which runs one tiny task per op.

    python benchmarks/bench_profiler.py [--steps N]
"""

import argparse
import os
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

import torch_npu  # noqa: F401
import torch_npu.profiler as npu_profiler

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import case_mlp_step, case_transformer_step  # noqa: E402
from step_timer import best_step_time as timed  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    print(f"ms per step (best of 5 x {args.steps}); ratio to no profiler; trace KB per step")
    print(f"{'case':<38} {'none':>8} {'cpu ops':>8} {'ratio':>6} {'+npu':>8} {'ratio':>6} {'npu api':>8} {'ratio':>6}"
          f" {'KB/step':>8}")
    for name, make, steps in (("MLP train step (784-256-10, b32)", case_mlp_step, args.steps),
                              ("transformer layer step (d128, b8x32)", case_transformer_step, max(10, args.steps // 5))):
        step = make("npu")
        base = timed(step, steps)
        with profile(activities=[ProfilerActivity.CPU]):
            cpu_only = timed(step, steps)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            with_npu = timed(step, steps)
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "trace.json")
            prof.export_chrome_trace(path)
            kb_per_step = os.path.getsize(path) / 1024 / (10 + 5 * steps)
            with npu_profiler.profile(activities=[npu_profiler.ProfilerActivity.CPU, npu_profiler.ProfilerActivity.NPU],
                                      on_trace_ready=npu_profiler.tensorboard_trace_handler(out)):
                api = timed(step, steps)
        print(f"{name:<38} {base * 1e3:>8.3f} {cpu_only * 1e3:>8.3f} {cpu_only / base:>6.2f} {with_npu * 1e3:>8.3f}"
              f" {with_npu / base:>6.2f} {api * 1e3:>8.3f} {api / base:>6.2f} {kb_per_step:>8.1f}")


if __name__ == "__main__":
    main()
