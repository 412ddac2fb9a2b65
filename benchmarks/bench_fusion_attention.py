"""torch_npu.npu_fusion_attention against scaled_dot_product_attention, both on
npu: causal self-attention, BSND, forward + backward, S = 512, 2048, 8192.

For each S it prints the best-of time of each and its peak memory_allocated
above the inputs, and the ratios fused/sdpa. The fused op must not be slower
than SDPA on the same device, and its peak must grow linearly in S (SDPA on
npu takes ATen's math path, which materialises B x N x S x S scores).

    python benchmarks/bench_fusion_attention.py
    python benchmarks/bench_fusion_attention.py --quick      # S = 512, 2048
"""

import argparse
import math
import time

import torch
import torch.nn.functional as F

import torch_npu

MASK = None


def fused(q, k, v):
    return torch_npu.npu_fusion_attention(q, k, v, q.shape[2], "BSND", atten_mask=MASK, sparse_mode=2,
                                          scale=1 / math.sqrt(q.shape[-1]))[0]


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          is_causal=True).transpose(1, 2)


def step(fn, q, k, v, g):
    out = fn(q, k, v)
    out.backward(g)
    for t in (q, k, v):
        t.grad = None


def measure(fn, q, k, v, g, repeats):
    step(fn, q, k, v, g)  # warm-up
    torch.npu.synchronize()
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        step(fn, q, k, v, g)
        torch.npu.synchronize()
        best = min(best, time.perf_counter() - start)
    return best, torch.npu.max_memory_allocated() - base


def main():
    global MASK
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    MASK = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device="npu"), diagonal=1)
    b, n, d = 1, 8, 64
    lengths = [512, 2048] if args.quick else [512, 2048, 8192]
    print(f"causal attention, BSND, B={b} N={n} D={d}, float32, forward+backward on npu")
    print(f"{'S':>6} {'sdpa ms':>9} {'fused ms':>9} {'fused/sdpa':>10} {'sdpa MiB':>9} {'fused MiB':>9} "
          f"{'mem ratio':>9}")
    for s in lengths:
        q, k, v = (torch.randn(b, s, n, d, device="npu", requires_grad=True) for _ in range(3))
        g = torch.randn(b, s, n, d, device="npu")
        repeats = 5 if s <= 2048 else 2
        t_f, m_f = measure(fused, q, k, v, g, repeats)
        try:
            t_s, m_s = measure(sdpa, q, k, v, g, repeats)
        except torch.OutOfMemoryError:
            t_s, m_s = float("nan"), float("nan")
        mib = 2 ** 20
        print(f"{s:>6} {t_s * 1e3:>9.1f} {t_f * 1e3:>9.1f} {t_f / t_s:>10.2f} {m_s / mib:>9.1f} {m_f / mib:>9.1f} "
              f"{m_f / m_s:>9.3f}")


if __name__ == "__main__":
    main()
