"""The npu caching allocator: speed against CPU's allocator, and how much
memory it holds beyond what tensors use.

1. Allocation/free pairs of mixed sizes (64 B to 16 MiB) through torch.empty,
   on "cpu" and on "npu" in this process; ratio npu/cpu (target <= 1.5).
   "pairs" frees each tensor at once; "window" keeps the last 16 alive, so
   frees come out of order and blocks are split and merged.
2. Peak reserved vs peak allocated (torch.npu.max_memory_reserved /
   max_memory_allocated) over training loops: the seeds' MLP and a small
   transformer with varying sequence lengths (target <= 1.3).

Nothing here is a test: the machine is shared and timings are noisy, so read
ratios, not absolutes.

    python benchmarks/bench_memory.py            # all cases
    python benchmarks/bench_memory.py --quick    # fewer iterations
"""

import argparse
import collections
import time

import torch
import torch.nn as nn

import torch_npu  # noqa: F401

SIZES = [64, 1000, 4096, 30_000, 200_000, 1 << 20, 3 << 20, 16 << 20]


def sync(device):
    if device == "npu":
        torch.npu.synchronize()


def best_time(fn, device, repeats):
    """Best-of-`repeats` seconds of fn() (one warm-up run first)."""
    fn()
    sync(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def alloc_pairs(device, rounds):
    def run():
        for _ in range(rounds):
            for n in SIZES:
                t = torch.empty(n, dtype=torch.uint8, device=device)
                del t
    return run


def alloc_window(device, rounds, window=16):
    def run():
        live = collections.deque()
        for _ in range(rounds):
            for n in SIZES:
                live.append(torch.empty(n, dtype=torch.uint8, device=device))
                if len(live) > window:
                    # Free the middle one: out-of-order frees split and merge blocks.
                    del live[len(live) // 2]
        live.clear()
    return run


def bench_allocation(rounds, repeats):
    print(f"allocation/free of {len(SIZES)} mixed sizes ({SIZES[0]} B .. {SIZES[-1] >> 20} MiB), "
          f"{rounds} rounds, per allocation:")
    print(f"  {'case':10s} {'cpu':>10s} {'npu':>10s} {'npu/cpu':>8s} {'target':>7s}")
    for name, factory in (("pairs", alloc_pairs), ("window", alloc_window)):
        times = {d: best_time(factory(d, rounds), d, repeats) / (rounds * len(SIZES)) for d in ("cpu", "npu")}
        print(f"  {name:10s} {times['cpu'] * 1e6:8.2f}us {times['npu'] * 1e6:8.2f}us "
              f"{times['npu'] / times['cpu']:8.2f} {'<=1.5':>7s}")


def mlp_loop(steps):
    """The seeds' 784-256-10 MLP, batch 32, SGD."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        x, y = torch.randn(32, 784).npu(), torch.randint(0, 10, (32,)).npu()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()


def transformer_loop(steps):
    """A 2-layer encoder LM (d_model 256, 4 heads, vocab 8000), batch 8,
    sequence lengths drawn from 16..128, AdamW."""
    torch.manual_seed(0)
    vocab, dim = 8000, 256
    layer = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=4 * dim, dropout=0.1, batch_first=True)
    model = nn.Sequential(nn.Embedding(vocab, dim), nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
                          nn.Linear(dim, vocab)).npu()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        length = int(torch.randint(16, 129, (1,), generator=g))
        tokens = torch.randint(0, vocab, (8, length), generator=g).npu()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(tokens).reshape(-1, vocab), tokens.reshape(-1))
        loss.backward()
        opt.step()
        loss.item()


def bench_footprint(steps):
    print("peak reserved / peak allocated over training loops:")
    print(f"  {'loop':36s} {'allocated':>10s} {'reserved':>10s} {'ratio':>6s} {'target':>7s}")
    for name, loop, n in (("MLP 784-256-10, b32", mlp_loop, steps),
                          ("transformer d256 L2 v8000, b8 s16-128", transformer_loop, max(5, steps // 5))):
        torch.npu.synchronize()
        torch.npu.empty_cache()
        torch.npu.reset_peak_memory_stats()
        loop(n)
        torch.npu.synchronize()
        allocated, reserved = torch.npu.max_memory_allocated(), torch.npu.max_memory_reserved()
        print(f"  {name:36s} {allocated / 2**20:8.1f}MiB {reserved / 2**20:8.1f}MiB "
              f"{reserved / allocated:6.2f} {'<=1.3':>7s}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tenth of the iterations")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    print(f"torch {torch.__version__}, torch_npu {torch_npu.__version__}, "
          f"intra-op threads {torch.get_num_threads()}")
    bench_allocation(rounds=2000 // scale, repeats=args.repeats)
    bench_footprint(steps=500 // scale)


if __name__ == "__main__":
    main()
