"""torch.compile on npu against eager npu and against Inductor on cpu, side by side.

    python benchmarks/bench_compile.py [--steps N] [--dims 64,128,256]

For a small-op-heavy transformer-style block (layer norm, GELU MLP,
residuals, two layers), per width d it prints the time of one training step
(forward, backward, SGD) for: eager npu, compiled npu (backend "inductor"),
compiled npu (backend "npu", torchair's API), eager cpu and compiled cpu,
with the ratios compiled-npu/eager-npu (target <= 0.6) and
compiled-npu/compiled-cpu (target <= 1.05); then the first-call (compile)
time on npu and on cpu. A step is timed to the end of its device work.
"""

import argparse
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_npu  # noqa: F401


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc3 = nn.Linear(d, 2 * d)
        self.fc4 = nn.Linear(2 * d, d)

    def forward(self, x):
        x = x + self.fc2(F.gelu(self.fc1(self.ln1(x)))) * 0.5
        x = x + self.fc4(F.gelu(self.fc3(self.ln2(x)))) * 0.5
        return x


def make_step(model, device):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    sync = torch.npu.synchronize if device == "npu" else (lambda: None)

    def step(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step, sync


def time_steps(step, sync, x, steps):
    t0 = time.perf_counter()
    step(x)  # first call: compiles when compiled
    sync()
    first = time.perf_counter() - t0
    for _ in range(3):
        step(x)
    sync()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(steps):
            step(x)
        sync()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best, first


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--dims", default="64,128,256")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    import torchair

    print(f"training step of a 2-layer LN/GELU-MLP block, batch {args.batch}; ms per step (best of 3 x {args.steps})")
    print(f"{'d':>5} {'eager npu':>10} {'ind npu':>9} {'npu bknd':>9} {'eager cpu':>10} {'ind cpu':>9}"
          f" {'ind/eager npu':>14} {'ind npu/cpu':>12} {'compile npu s':>14} {'compile cpu s':>14}")
    for d in [int(v) for v in args.dims.split(",")]:
        torch.manual_seed(0)
        base = Block(d)
        x_cpu = torch.randn(args.batch, d)
        results = {}
        for name, device, backend in (("eager npu", "npu", None), ("ind npu", "npu", "inductor"),
                                      ("npu bknd", "npu", "npu"), ("eager cpu", "cpu", None),
                                      ("ind cpu", "cpu", "inductor")):
            torch._dynamo.reset()
            model = copy.deepcopy(base).to(device)
            if backend == "npu":
                model = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=torchair.CompilerConfig()))
            elif backend:
                model = torch.compile(model, backend=backend)
            step, sync = make_step(model, device)
            results[name] = time_steps(step, sync, x_cpu.to(device), args.steps)
        ms = {k: v[0] * 1e3 for k, v in results.items()}
        print(f"{d:>5} {ms['eager npu']:>10.3f} {ms['ind npu']:>9.3f} {ms['npu bknd']:>9.3f} {ms['eager cpu']:>10.3f}"
              f" {ms['ind cpu']:>9.3f} {ms['ind npu'] / ms['eager npu']:>14.2f} {ms['ind npu'] / ms['ind cpu']:>12.2f}"
              f" {results['ind npu'][1]:>14.1f} {results['ind cpu'][1]:>14.1f}")


if __name__ == "__main__":
    main()
