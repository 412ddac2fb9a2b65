"""Host overhead and throughput of npu ops vs CPU eager, side by side.

Each case runs the same code on "cpu" and on "npu" in this process and
prints the time per iteration and the ratio npu/cpu (lower is better; 1.0
means the virtual NPU costs the same as CPU eager). Nothing here is a test:
the machine is shared and timings are noisy, so read ratios, not absolutes.

    python benchmarks/bench_ops.py            # all cases
    python benchmarks/bench_ops.py --quick    # fewer iterations
"""

import argparse
import statistics
import time

import torch
import torch.nn as nn

import torch_npu  # noqa: F401


def sync(device):
    if device == "npu":
        torch.npu.synchronize()


def timed(fn, device, iters, repeats):
    """Best-of-`repeats` mean seconds per iteration (warm-up excluded)."""
    for _ in range(max(10, iters // 20)):
        fn()
    sync(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync(device)
        best = min(best, (time.perf_counter() - start) / iters)
    return best


def case_small_add(device):
    a, b = torch.randn(1024, device=device), torch.randn(1024, device=device)
    return lambda: a + b


def case_small_relu(device):
    a = torch.randn(1024, device=device)
    return lambda: torch.relu(a)


def case_mm(n):
    def make(device):
        a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
        return lambda: a @ b
    return make


def case_mm_64x256x512(device):
    """A GEMM of the bench_compile block at d=256: small enough that waking a
    second thread costs more than it saves (docs/architecture.md)."""
    a, b = torch.randn(64, 256, device=device), torch.randn(256, 512, device=device)
    return lambda: a @ b


def case_inplace_add_128k(device):
    a = torch.randn(512, 256, device=device)
    return lambda: a.add_(a, alpha=0.0)


def case_mlp_step(device):
    """The seeds' 784-256-10 MLP, batch 32: forward, loss, backward, SGD step,
    and loss.item() as the seeds' training loop does."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(32, 784)
    y = torch.randint(0, 10, (32,))

    def step():
        bx, by = x.to(device), y.to(device)
        opt.zero_grad()
        loss = loss_fn(model(bx), by)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def case_tiny_backward(device):
    """A forward and backward pass of a few small ops (what test suites of tiny
    models do thousands of times): the autograd engine's own cost per pass,
    Note [npu backward on the calling thread]."""
    w = torch.randn(16, device=device, requires_grad=True)
    x = torch.randn(16, device=device)

    def step():
        (x * w).sum().backward()
    return step


def case_foreach_sgd(device):
    """An SGD step's update of 24 small parameters (12 64x64 weights, 12
    biases): the one _foreach_add_ torch.optim issues for npu as for CUDA
    (Note [One task per foreach call])."""
    params = [torch.randn(s, device=device) for s in [(64, 64), (64,)] * 12]
    grads = [torch.randn_like(p) for p in params]
    return lambda: torch._foreach_add_(params, grads, alpha=-1e-3)


def case_transformer_step(device):
    """A small transformer encoder layer (d128, 4 heads, ff 256), batch 8,
    sequence 32: forward, loss, backward, AdamW step, loss.item()."""
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, dropout=0.1,
                                       batch_first=True).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(8, 32, 128)

    def step():
        bx = x.to(device)
        opt.zero_grad()
        loss = model(bx).pow(2).mean()
        loss.backward()
        opt.step()
        return loss.item()
    return step


CASES = [
    # name, factory, iterations, target ratio from the issue
    ("add 1K x20000", case_small_add, 20000, 2.0),
    ("relu 1K x20000", case_small_relu, 20000, 2.0),
    ("mm 256 fp32", case_mm(256), 200, None),
    ("mm 1024 fp32", case_mm(1024), 10, 1.1),
    ("mm 64x256x512 fp32", case_mm_64x256x512, 500, None),
    ("add_ 128K in place", case_inplace_add_128k, 2000, None),
    ("MLP train step (784-256-10, b32)", case_mlp_step, 300, 1.3),
    ("fwd+bwd of 16 elements (mul, sum)", case_tiny_backward, 3000, None),
    ("_foreach_add_ of 24 params", case_foreach_sgd, 2000, None),
    ("transformer layer step (d128, b8x32)", case_transformer_step, 50, None),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tenth of the iterations")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, torch_npu {torch_npu.__version__}, "
          f"intra-op threads {torch.get_num_threads()}")
    print(f"{'case':36s} {'cpu':>12s} {'npu':>12s} {'npu/cpu':>8s} {'target':>7s}")
    for name, factory, iters, target in CASES:
        iters = max(5, iters // 10) if args.quick else iters
        times = {}
        for device in ("cpu", "npu"):
            times[device] = timed(factory(device), device, iters, args.repeats)
        ratio = times["npu"] / times["cpu"]
        print(f"{name:36s} {times['cpu'] * 1e6:10.1f}us {times['npu'] * 1e6:10.1f}us {ratio:8.2f} "
              f"{('<=' + str(target)) if target else '':>7s}")


if __name__ == "__main__":
    main()
