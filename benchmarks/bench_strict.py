"""What strict chip mode costs: bench_ops.py's MLP and transformer training
steps on npu with torch.npu.set_check_mode(False) and (True), side by side.
Prints ms per step and the ratio (target <= 1.05).

    python benchmarks/bench_strict.py [--steps N]
"""

import argparse
import os
import sys

import torch

import torch_npu  # noqa: F401

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import case_mlp_step, case_transformer_step  # noqa: E402
from step_timer import best_step_time as timed  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    print(f"ms per step (best of 5 x N); strict / off")
    for name, make, steps in (("MLP train step (784-256-10, b32)", case_mlp_step, args.steps),
                              ("transformer layer step (d128, b8x32)", case_transformer_step, max(10, args.steps // 10))):
        step = make("npu")
        # Interleaved, so drift in the machine's load hits both sides.
        off, on = [], []
        for _ in range(3):
            torch.npu.set_check_mode(False)
            off.append(timed(step, steps))
            torch.npu.set_check_mode(True)
            on.append(timed(step, steps))
        torch.npu.set_check_mode(False)
        print(f"{name:<38} off {min(off) * 1e3:8.3f}  strict {min(on) * 1e3:8.3f}  ratio {min(on) / min(off):.3f}")
    print("findings:", [(f["op"], f["kind"]) for f in torch.npu.check_mode_report()])


if __name__ == "__main__":
    main()
