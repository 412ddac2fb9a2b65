"""What strict chip mode costs: bench_ops.py's MLP and transformer training
steps on npu with torch.npu.set_check_mode(False) and (True), side by side.

Paired windows, because the machine's speed drifts more than strict mode
costs: each round times N steps off, N steps on, N steps off, and its ratio
is on / mean(off). Prints the median round's ratio (target <= 1.05) and
the ratio of the best windows.

    python benchmarks/bench_strict.py [--rounds R] [--steps N]
"""

import argparse
import os
import statistics
import sys

import torch

import torch_npu  # noqa: F401

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import case_mlp_step, case_transformer_step  # noqa: E402
from step_timer import window_step_time as window  # noqa: E402


def paired(step, steps, rounds):
    for _ in range(10):
        step()
    ratios, off, on = [], [], []
    for _ in range(rounds):
        torch.npu.set_check_mode(False)
        before = window(step, steps)
        torch.npu.set_check_mode(True)
        strict = window(step, steps)
        torch.npu.set_check_mode(False)
        after = window(step, steps)
        ratios.append(2 * strict / (before + after))
        off += [before, after]
        on.append(strict)
    return statistics.median(off), statistics.median(on), statistics.median(ratios), min(on) / min(off)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=100, help="MLP steps per window (transformer: a tenth)")
    args = parser.parse_args()
    print(f"ms per step (median window), {args.rounds} rounds of off / strict / off")
    print(f"{'':<38} {'off':>8} {'strict':>8} {'median ratio':>13} {'best/best':>10}")
    torch.npu.check_mode_report(clear=True)
    for name, make, steps in (("MLP train step (784-256-10, b32)", case_mlp_step, args.steps),
                              ("transformer layer step (d128, b8x32)", case_transformer_step, max(5, args.steps // 10))):
        off, on, ratio, best = paired(make("npu"), steps, args.rounds)
        print(f"{name:<38} {off * 1e3:8.3f} {on * 1e3:8.3f} {ratio:13.3f} {best:10.3f}")
    print("findings:", [(f["op"], f["kind"]) for f in torch.npu.check_mode_report()])


if __name__ == "__main__":
    main()
