"""Process start: `import torch` with torch_npu installed (autoloaded) against
plain `import torch`, side by side.

Every fresh process pays this: subprocess-isolated tests, DataLoader workers,
torchrun ranks, a C++ extension's first call. The two commands alternate, each
in a new interpreter, and the best and median wall times are compared (best
of N is the least noisy on a shared machine). Also prints torch_npu's own
share, from `python -X importtime`, and whether the heavy subsystems
(dynamo, Inductor, sympy) were imported.

    python benchmarks/bench_import.py [--runs N] [--instructions]

--instructions also counts the instructions each import executes under
valgrind's callgrind (a minute or two each): unlike wall time, the count does
not move with the load of a shared machine, so it shows what torch_npu adds
when the wall-time ratio is lost in noise.

Issue 28's figures: ratio <= 1.15, torch_npu's own import <= 0.4 s.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

PLAIN = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
WITH_NPU = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}


def wall(env):
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], env=env, check=True)
    return time.perf_counter() - start


def torch_npu_own_seconds():
    """Cumulative import time of torch_npu itself, imported after torch."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-c", "import torch; import torch_npu"],
                         env=PLAIN, capture_output=True, text=True, check=True)
    for line in run.stderr.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == "torch_npu":
            return int(parts[1]) / 1e6
    raise RuntimeError("torch_npu's line not found in -X importtime's output")


def instructions(env):
    """Instructions executed by `python -c "import torch"`, counted by callgrind."""
    run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if not found:
        raise RuntimeError("callgrind's total not found in its output:\n" + run.stderr[-2000:])
    return int(found.group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--instructions", action="store_true",
                        help="also compare the instructions each import executes (needs valgrind)")
    args = parser.parse_args()
    plain, npu = [], []
    for _ in range(args.runs):
        plain.append(wall(PLAIN))
        npu.append(wall(WITH_NPU))
    heavy = subprocess.run([sys.executable, "-c", "import sys, torch; print(sorted(m for m in "
                            "('torch._dynamo', 'torch._inductor', 'sympy') if m in sys.modules))"],
                           env=WITH_NPU, capture_output=True, text=True, check=True).stdout.strip()
    print(f"import torch, plain:           best {min(plain):.2f} s, median {statistics.median(plain):.2f} s")
    print(f"import torch, torch_npu loaded: best {min(npu):.2f} s, median {statistics.median(npu):.2f} s")
    print(f"ratio: best {min(npu) / min(plain):.2f}, median {statistics.median(npu) / statistics.median(plain):.2f}"
          "  (target <= 1.15)")
    print(f"torch_npu's own import: {torch_npu_own_seconds():.3f} s  (target <= 0.4 s)")
    print(f"heavy subsystems imported: {heavy}")
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("--instructions needs valgrind (apt install valgrind)")
        plain_ir, npu_ir = instructions(PLAIN), instructions(WITH_NPU)
        print(f"instructions: plain {plain_ir / 1e9:.3f} G, with torch_npu {npu_ir / 1e9:.3f} G, "
              f"ratio {npu_ir / plain_ir:.3f}")


if __name__ == "__main__":
    main()
