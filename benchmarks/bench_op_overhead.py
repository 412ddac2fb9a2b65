"""Per-op host overhead of a dozen common ops: npu vs cpu eager vs the CPU
fallback path, side by side in one process.

For each op on small inputs (so host overhead dominates), prints the time per
call on cpu, on npu (native kernel), and through the fallback path (what the
CPU fallback does: copy inputs to the host, run, copy results back), and the
ratios npu/cpu and npu/fallback. Nothing is asserted: read the ratios.

    python benchmarks/bench_op_overhead.py [--iters N]
"""

import argparse
import time

import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401


def make_cases(device):
    t = lambda *s: torch.randn(*s, device=device)  # noqa: E731
    a, b = t(64, 64), t(64, 64)
    x4 = t(2, 8, 16, 16)
    w4 = t(8, 8, 3, 3)
    ids = torch.randint(0, 100, (32,), device=device)
    table = t(100, 64)
    ln_w, ln_b = t(64), t(64)
    idx = torch.randint(0, 64, (16,), device=device)
    return {
        "add": (torch.add, (a, b)),
        "mul": (torch.mul, (a, b)),
        "relu": (torch.relu, (a,)),
        "softmax": (lambda x: torch.softmax(x, -1), (a,)),
        "layer_norm": (lambda x, w, bb: F.layer_norm(x, (64,), w, bb), (a, ln_w, ln_b)),
        "mm": (torch.mm, (a, b)),
        "sum": (torch.sum, (a,)),
        "index_select": (lambda x, i: torch.index_select(x, 0, i), (a, idx)),
        "cat": (lambda x, y: torch.cat([x, y]), (a, b)),
        "view+contiguous": (lambda x: x.t().contiguous().view(-1), (a,)),
        "conv2d": (F.conv2d, (x4, w4)),
        "embedding": (F.embedding, (ids, table)),
    }


def sync(device):
    if device == "npu":
        torch.npu.synchronize()


def timed(fn, args, device, iters):
    for _ in range(20):
        fn(*args)
    sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn(*args)
    sync(device)
    return (time.perf_counter() - start) / iters


def fallback_path(fn):
    """The work the CPU fallback does for an op: inputs to host, run, results back."""
    def run(*args):
        out = fn(*[x.cpu() for x in args])
        return out.to("npu")
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args()
    cpu_cases, npu_cases = make_cases("cpu"), make_cases("npu")
    print(f"{'op':18s} {'cpu':>9s} {'npu':>9s} {'fallback':>9s} {'npu/cpu':>8s} {'npu/fallback':>12s}")
    for name in cpu_cases:
        fn, cpu_args = cpu_cases[name]
        _, npu_args = npu_cases[name]
        t_cpu = timed(fn, cpu_args, "cpu", args.iters)
        t_npu = timed(fn, npu_args, "npu", args.iters)
        t_fb = timed(fallback_path(fn), npu_args, "npu", args.iters)
        print(f"{name:18s} {t_cpu * 1e6:7.1f}us {t_npu * 1e6:7.1f}us {t_fb * 1e6:7.1f}us "
              f"{t_npu / t_cpu:8.2f} {t_npu / t_fb:12.2f}")


if __name__ == "__main__":
    main()
