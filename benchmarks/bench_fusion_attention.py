"""torch_npu.npu_fusion_attention against scaled_dot_product_attention, both on
npu: causal self-attention, BSND, forward + backward, S = 512, 2048, 8192.

For each S it prints the best-of time of each and its peak memory_allocated
above the inputs, and the ratios fused/sdpa. The fused op must not be slower
than SDPA on the same device, and its peak must grow linearly in S. Both run
ATen's flash-attention kernel on npu (SDPA through the "overrideable" fused
backend, csrc/ops/attention.cpp), so the ratio measures the fused op's own
overhead (layouts, masks, statistics); with --math, SDPA is forced onto the
math path, which materialises B x N x S x S scores, for comparison.

    python benchmarks/bench_fusion_attention.py
    python benchmarks/bench_fusion_attention.py --quick      # S = 512, 2048
    python benchmarks/bench_fusion_attention.py --math       # SDPA on its math path
"""

import argparse
import math
import time

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_npu

MASK = None


def fused(q, k, v):
    return torch_npu.npu_fusion_attention(q, k, v, q.shape[2], "BSND", atten_mask=MASK, sparse_mode=2,
                                          scale=1 / math.sqrt(q.shape[-1]))[0]


SDPA_BACKENDS = None  # None: let SDPA choose


def sdpa(q, k, v):
    ctx = sdpa_kernel(SDPA_BACKENDS) if SDPA_BACKENDS else contextlib.nullcontext()
    with ctx:
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
    global MASK, SDPA_BACKENDS
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--math", action="store_true", help="force SDPA onto its math path")
    args = parser.parse_args()
    if args.math:
        SDPA_BACKENDS = [SDPBackend.MATH]
    MASK = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device="npu"), diagonal=1)
    b, n, d = 1, 8, 64
    lengths = [512, 2048] if args.quick else [512, 2048, 8192]
    print(f"causal attention, BSND, B={b} N={n} D={d}, float32, forward+backward on npu"
          f"{' (SDPA: math path)' if args.math else ''}")
    print(f"{'S':>6} {'sdpa ms':>9} {'fused ms':>9} {'fused/sdpa':>10} {'sdpa MiB':>9} {'fused MiB':>9} "
          f"{'mem ratio':>9}")
    for s in lengths:
        q, k, v = (torch.randn(b, s, n, d, device="npu", requires_grad=True) for _ in range(3))
        g = torch.randn(b, s, n, d, device="npu")
        repeats = {512: 10, 2048: 5}.get(s, 2)
        t_f = t_s = float("inf")
        for _ in range(2):  # alternate the two, best of each
            t, m_f = measure(fused, q, k, v, g, repeats)
            t_f = min(t_f, t)
            t, m_s = measure(sdpa, q, k, v, g, repeats)
            t_s = min(t_s, t)
        mib = 2 ** 20
        print(f"{s:>6} {t_s * 1e3:>9.1f} {t_f * 1e3:>9.1f} {t_f / t_s:>10.2f} {m_s / mib:>9.1f} {m_f / mib:>9.1f} "
              f"{m_f / m_s:>9.3f}")


if __name__ == "__main__":
    main()
