"""A custom operator written in Ascend C (examples/custom_op), measured as a user meets it.

1. Build and first call: a fresh copy of the example is built with NpuExtension
   (ccache off, MAX_JOBS=2), then a new process imports it and calls the op once.
   Prints the wall seconds of each and their sum (the issue's figure: <= 30 s).
2. Throughput: the example's vector-add kernel over 16M float32 on npu (8 AI
   cores, 8 KiB tiles, double buffering) against torch.add on cpu, side by side
   in this process. Prints best-of-N seconds per call and the ratio npu/cpu
   (the issue's figure: <= 2.0).

    python benchmarks/bench_custom_op.py [--skip-build] [--repeats N]
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "custom_op")


def build_and_first_call(work):
    shutil.copytree(EXAMPLE, work, dirs_exist_ok=True)
    env = dict(os.environ, CCACHE_DISABLE="1", MAX_JOBS="2")
    start = time.perf_counter()
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=work, env=env, check=True,
                   capture_output=True)
    built = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, custom_ops; x = torch.ones(16384, device='npu'); "
                    "assert float(torch.ops.custom_ops.add(x, x).sum()) == 32768.0"], cwd=work, env=env, check=True)
    called = time.perf_counter()
    return built - start, called - built


def best_of(fn, sync, repeats, iters=5):
    fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / iters)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-build", action="store_true", help="reuse --work's build; skip the build timing")
    parser.add_argument("--work", default=None)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="vnpu-custom-op-")
    if not args.skip_build:
        build_s, first_call_s = build_and_first_call(work)
        print(f"build {build_s:.1f} s, first call (new process) {first_call_s:.1f} s, "
              f"total {build_s + first_call_s:.1f} s  (target <= 30 s)")

    sys.path.insert(0, work)
    import torch
    import custom_ops  # noqa: F401

    n = 16 * 1024 * 1024
    x, y = torch.randn(n), torch.randn(n)
    xn, yn = x.npu(), y.npu()
    torch.testing.assert_close(torch.ops.custom_ops.add(xn, yn).cpu(), x + y)
    cpu = best_of(lambda: torch.add(x, y), lambda: None, args.repeats)
    npu = best_of(lambda: torch.ops.custom_ops.add(xn, yn), torch.npu.synchronize, args.repeats)
    print(f"16M float32 add: Ascend C kernel on npu {npu * 1e3:.2f} ms, torch.add on cpu {cpu * 1e3:.2f} ms, "
          f"ratio {npu / cpu:.2f}  (target <= 2.0; {torch.get_num_threads()} cpu threads)")


if __name__ == "__main__":
    main()
