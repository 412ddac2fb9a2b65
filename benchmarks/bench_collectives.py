"""hccl on npu against gloo on cpu, side by side in one torchrun job.

    torchrun --nproc_per_node 2 benchmarks/bench_collectives.py [--quick]

For all_reduce, all_gather and reduce_scatter at 1 KB, 1 MB, 16 MB and 64 MB
(float32), rank 0 prints the latency (best of a few runs, microseconds) and
the bus bandwidth (GB/s, NCCL's convention: algbw * 2(n-1)/n for all_reduce,
(n-1)/n for the others) of each backend, and hccl/gloo ratios (time ratio:
lower is better). Then a DDP training step on npu (2+ ranks, gradient
all-reduce overlapping backward) against the same step without DDP on the
same per-rank batch: the ratio is what communication adds.
"""

import argparse
import time

import torch
import torch.distributed as dist

import torch_npu  # noqa: F401

SIZES = [1 << 10, 1 << 20, 16 << 20, 64 << 20]


def bus_factor(name, n):
    return 2 * (n - 1) / n if name == "all_reduce" else (n - 1) / n


def run(name, device, group, nbytes, world):
    numel = nbytes // 4
    if name == "all_reduce":
        t = torch.ones(numel, device=device)
        op = lambda: dist.all_reduce(t, group=group)  # noqa: E731
    elif name == "all_gather":
        inp = torch.ones(numel // world, device=device)
        out = torch.empty(numel // world * world, device=device)
        op = lambda: dist.all_gather_into_tensor(out, inp, group=group)  # noqa: E731
    else:
        inp = torch.ones(numel // world * world, device=device)
        out = torch.empty(numel // world, device=device)
        op = lambda: dist.reduce_scatter_tensor(out, inp, group=group)  # noqa: E731
    sync = torch.npu.synchronize if device == "npu" else (lambda: None)
    repeats = 20 if nbytes <= (1 << 20) else 3
    op()
    sync()
    dist.barrier(group=group)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        op()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="1 KB and 1 MB only")
    args = parser.parse_args()
    dist.init_process_group("hccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.npu.set_device(rank)
    gloo = dist.new_group(backend="gloo")
    sizes = SIZES[:2] if args.quick else SIZES
    if rank == 0:
        print(f"{world} ranks; float32; time = best of several, us; busbw GB/s")
        print(f"{'op':<15}{'size':>8}{'gloo us':>12}{'hccl us':>12}{'gloo GB/s':>11}{'hccl GB/s':>11}{'hccl/gloo':>11}")
    for name in ("all_reduce", "all_gather", "reduce_scatter"):
        for nbytes in sizes:
            t_gloo = run(name, "cpu", gloo, nbytes, world)
            t_hccl = run(name, "npu", None, nbytes, world)
            if rank == 0:
                bw = lambda t: nbytes / t / 1e9 * bus_factor(name, world)  # noqa: E731
                label = f"{nbytes >> 20} MB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KB"
                print(f"{name:<15}{label:>8}{t_gloo * 1e6:>12.1f}{t_hccl * 1e6:>12.1f}{bw(t_gloo):>11.2f}"
                      f"{bw(t_hccl):>11.2f}{t_hccl / t_gloo:>11.2f}", flush=True)
    ddp_step_overhead(rank)
    dist.destroy_process_group()


def ddp_step_overhead(rank):
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)

    def model():
        return nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, 512)).npu()

    x = torch.randn(64, 512, device="npu")
    local = model()
    ddp = DDP(model(), device_ids=[rank])

    def step(m):
        m.zero_grad()
        m(x).square().mean().backward()

    def timed(m, repeats=10):
        step(m)
        torch.npu.synchronize()
        best = float("inf")
        for _ in range(repeats):
            dist.barrier()
            start = time.perf_counter()
            step(m)
            torch.npu.synchronize()
            best = min(best, time.perf_counter() - start)
        return best

    t_local, t_ddp = timed(local), timed(ddp)
    if rank == 0:
        print(f"DDP step (MLP 512-1024-1024-512, batch 64/rank): local {t_local * 1e3:.2f} ms, DDP "
              f"{t_ddp * 1e3:.2f} ms, DDP/local {t_ddp / t_local:.2f}")


if __name__ == "__main__":
    main()
