"""Where a multi-process test's time goes: rank start-up over hccl and over gloo, side by side.

    python benchmarks/bench_rank_start.py [--world 4] [--runs 2]

Real torch_npu's distributed tests (torch's MultiProcessTestCase / DTensorTestBase)
spawn one fresh interpreter per rank for every test. This runs the same
start-up with a trivial body: spawn `world` processes, import torch (+ torch_npu
for hccl) and the DTensor test harness the tests import, init_process_group,
one all_reduce, destroy. Per phase it prints the slowest rank's seconds and the
hccl/gloo ratio of the whole job. Not a test: the machine is shared.
"""

import argparse
import statistics
import sys
import tempfile
import time

import torch.multiprocessing as mp

PHASES = ("spawn", "imports", "init", "collective", "destroy")


def _rank(rank, world, backend, store_path, started, queue):
    spawned = time.time()
    import torch
    if backend == "hccl":
        import torch_npu  # noqa: F401
    import torch.testing._internal.distributed._tensor.common_dtensor  # noqa: F401  (what the tests import)
    imported = time.time()
    import torch.distributed as dist
    dist.init_process_group(backend, rank=rank, world_size=world, store=dist.FileStore(store_path, world))
    device = "cpu"
    if backend == "hccl":
        torch.npu.set_device(rank)
        device = "npu"
    initialised = time.time()
    t = torch.ones(4, device=device)
    dist.all_reduce(t)
    assert t.cpu().tolist() == [float(world)] * 4
    collective = time.time()
    dist.destroy_process_group()
    destroyed = time.time()
    queue.put((spawned - started, imported - spawned, initialised - imported, collective - initialised,
               destroyed - collective))


def job(backend, world):
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    started = time.time()
    mp.start_processes(_rank, args=(world, backend, tempfile.mktemp(), started, queue), nprocs=world,
                       start_method="spawn")
    total = time.time() - started
    phases = [queue.get() for _ in range(world)]
    return total, [max(p[i] for p in phases) for i in range(len(PHASES))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    results = {}
    for _ in range(args.runs):
        for backend in ("gloo", "hccl"):
            results.setdefault(backend, []).append(job(backend, args.world))
    print(f"{args.world} ranks, median of {args.runs} runs (slowest rank per phase, seconds)")
    print(f"{'backend':8}{'total':>8}" + "".join(f"{p:>12}" for p in PHASES))
    medians = {}
    for backend, runs in results.items():
        medians[backend] = statistics.median(r[0] for r in runs)
        phases = [statistics.median(r[1][i] for r in runs) for i in range(len(PHASES))]
        print(f"{backend:8}{medians[backend]:8.2f}" + "".join(f"{p:12.2f}" for p in phases))
    print(f"hccl / gloo: {medians['hccl'] / medians['gloo']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
