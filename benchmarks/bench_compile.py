"""torch.compile on npu against eager npu and against Inductor on cpu, side by side.

    python benchmarks/bench_compile.py [--steps N] [--dims 64,128,256] [--block gated|mlp]

For a small-op-heavy block, per width d it prints the time of one training step
(forward, backward, SGD) for: eager npu, compiled npu (backend "inductor"),
compiled npu (backend "npu", torchair's API), eager cpu and compiled cpu,
with the ratios compiled-npu/eager-npu (target <= 0.6) and
compiled-npu/compiled-cpu (target <= 1.05); then the first-call (compile)
time on npu and on cpu. A step is timed to the end of its device work. The block is issue 28 item 4's by default (--block gated: four
layers of LayerNorm, two Linears, GELU and sigmoid gating with a residual,
on a batch of 8 x 16 tokens); --block mlp is the 2-layer LN/GELU-MLP block
(batch --batch rows) of earlier figures.

Then NPU graphs: the whole eager step (forward, backward, SGD) captured
once in a torch.npu.NPUGraph and replayed, against eager npu: the host time
to issue one step (target <= 0.3), and the step time to the end of its
device work; also torchair's "reduce-overhead" mode (compiled graphs
replayed as NPU graphs, each returning copies) and Inductor's
(torch.compile(mode="reduce-overhead"): the NPU graph trees, whose replays
share one pool) against compiled npu. Last, where the compiled step's time
goes: "ind host" is the host's time to issue one compiled step, "ind graph"
the compiled step's device work alone (the compiled step captured whole in
an NPU graph and replayed), and "floor" the larger of the two over the eager
step: no compiled step on this machine beats it without a faster host path
or faster kernels.

    python benchmarks/bench_compile.py --gemm-share

prints instead, per width, the share of the matrix products (aten::mm and
aten::addmm, self time) in the eager CPU training step under the profiler:
the GEMMs compiled graphs call as extern kernels, unchanged, which bound how
far compiling the rest can take the step.
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


class GatedLayer(nn.Module):
    """Issue 28 item 4's small-op layer: LayerNorm, two Linears, GELU, sigmoid gating, residual."""

    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, d)
        self.gate = nn.Linear(d, d)

    def forward(self, x):
        h = self.norm(x)
        return x + F.gelu(self.up(h)) * torch.sigmoid(self.gate(h))


class GatedBlock(nn.Module):
    """Four GatedLayers in a row: dozens of small kernels per step."""

    def __init__(self, d, repeats=4):
        super().__init__()
        self.layers = nn.Sequential(*[GatedLayer(d) for _ in range(repeats)])

    def forward(self, x):
        return self.layers(x)


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


def make_model(args, d):
    return GatedBlock(d) if args.block == "gated" else Block(d)


def make_input(args, d):
    # The gated block takes issue 28's batch of 8 x 16 tokens; the MLP block a batch of --batch rows.
    return torch.randn(8, 16, d) if args.block == "gated" else torch.randn(args.batch, d)


def describe(args):
    if args.block == "gated":
        return "4 gated layers (LayerNorm, two Linears, GELU, sigmoid gating), batch 8x16"
    return f"a 2-layer LN/GELU-MLP block, batch {args.batch}"


def time_steps(step, sync, x, steps, repeats=5):
    t0 = time.perf_counter()
    step(x)  # first call: compiles when compiled
    sync()
    first = time.perf_counter() - t0
    for _ in range(3):
        step(x)
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step(x)
        sync()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best, first


def graphed_whole_step(model, x):
    """CUDA graphs' whole-network capture: warm up on a side stream, capture
    forward + backward + optimizer step once; a step is then one replay."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    static_x = x.clone()
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            model(static_x).square().mean().backward()
            opt.step()
    torch.npu.current_stream().wait_stream(side)
    graph = torch.npu.NPUGraph()
    opt.zero_grad(set_to_none=True)
    with torch.npu.graph(graph):
        static_loss = model(static_x).square().mean()
        static_loss.backward()
        opt.step()

    def step(batch):
        static_x.copy_(batch)
        graph.replay()
        return static_loss

    return step


def host_time(step, x, steps):
    """Seconds for the host to issue one step (its device work may still run)."""
    torch.npu.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(steps):
            step(x)
        best = min(best, (time.perf_counter() - t0) / steps)
        torch.npu.synchronize()
    return best


def graphs_section(args):
    import torchair

    print("\nNPU graphs, same step; eager vs the whole step captured and replayed; ms")
    print(f"{'d':>5} {'eager host':>11} {'graph host':>11} {'host ratio':>11} {'eager step':>11} {'graph step':>11}"
          f" {'step ratio':>11} {'ind npu':>9} {'ro npu':>9} {'ro/ind':>7} {'tree npu':>9} {'tree/ind':>9}"
          f" {'ind host':>9} {'ind graph':>10} {'floor':>6}")
    for d in [int(v) for v in args.dims.split(",")]:
        torch.manual_seed(0)
        base = make_model(args, d)
        x = make_input(args, d).npu()
        eager_step, sync = make_step(copy.deepcopy(base).npu(), "npu")
        time_steps(eager_step, sync, x, 3)
        graph_step = graphed_whole_step(copy.deepcopy(base).npu(), x)
        eager_host, graph_host = host_time(eager_step, x, args.steps), host_time(graph_step, x, args.steps)
        eager_total = time_steps(eager_step, sync, x, args.steps)[0]
        graph_total = time_steps(graph_step, sync, x, args.steps)[0]
        compiled = {}
        for name, mode in (("ind", "max-autotune"), ("ro", "reduce-overhead")):
            torch._dynamo.reset()
            config = torchair.CompilerConfig()
            config.mode = mode
            model = torch.compile(copy.deepcopy(base).npu(), backend=torchair.get_npu_backend(compiler_config=config))
            step, sync = make_step(model, "npu")
            time_steps(step, sync, x, 2)  # warm-up, capture
            compiled[name] = time_steps(step, sync, x, args.steps)[0]
        torch._dynamo.reset()
        step, sync = make_step(torch.compile(copy.deepcopy(base).npu(), mode="reduce-overhead"), "npu")
        time_steps(step, sync, x, 3)  # warm-up, recording, first replay
        compiled["tree"] = time_steps(step, sync, x, args.steps)[0]
        # Where a compiled step's time goes: the host's time to issue it, and its device work
        # alone (the compiled step captured whole in one NPU graph and replayed, as for eager
        # above). A compiled step can be no faster than either; floor = the larger / eager step.
        torch._dynamo.reset()
        compiled_model = torch.compile(copy.deepcopy(base).npu())
        step, sync = make_step(compiled_model, "npu")
        time_steps(step, sync, x, 2)
        compiled_host = host_time(step, x, args.steps)
        torch._dynamo.reset()
        compiled_graph = time_steps(graphed_whole_step(torch.compile(copy.deepcopy(base).npu()), x),
                                    sync, x, args.steps)[0]
        floor = max(compiled_host, compiled_graph) / eager_total
        print(f"{d:>5} {eager_host * 1e3:>11.3f} {graph_host * 1e3:>11.3f} {graph_host / eager_host:>11.3f}"
              f" {eager_total * 1e3:>11.3f} {graph_total * 1e3:>11.3f} {graph_total / eager_total:>11.2f}"
              f" {compiled['ind'] * 1e3:>9.3f} {compiled['ro'] * 1e3:>9.3f} {compiled['ro'] / compiled['ind']:>7.2f}"
              f" {compiled['tree'] * 1e3:>9.3f} {compiled['tree'] / compiled['ind']:>9.2f}"
              f" {compiled_host * 1e3:>9.3f} {compiled_graph * 1e3:>10.3f} {floor:>6.2f}")


def gemm_share_section(args):
    from torch.profiler import ProfilerActivity, profile

    print(f"share of mm + addmm in the eager cpu training step (profiler self time, {torch.get_num_threads()} threads)")
    for d in [int(v) for v in args.dims.split(",")]:
        torch.manual_seed(0)
        step, _ = make_step(make_model(args, d), "cpu")
        x = make_input(args, d)
        for _ in range(10):
            step(x)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.steps):
                step(x)
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events)
        gemm = sum(e.self_cpu_time_total for e in events if e.key in ("aten::mm", "aten::addmm"))
        print(f"{d:>5} {gemm / total:>6.2f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--dims", default="64,128,256")
    parser.add_argument("--batch", type=int, default=64, help="rows of the MLP block's batch")
    parser.add_argument("--block", choices=("gated", "mlp"), default="gated",
                        help="gated: issue 28 item 4's block (the default); mlp: the 2-layer LN/GELU-MLP block")
    parser.add_argument("--only-graphs", action="store_true", help="just the NPU graphs section")
    parser.add_argument("--gemm-share", action="store_true", help="just the GEMMs' share of the eager cpu step")
    args = parser.parse_args()
    if args.gemm_share:
        gemm_share_section(args)
        return
    if args.only_graphs:
        graphs_section(args)
        return
    import torchair

    print(f"training step of {describe(args)}; ms per step (best of 5 x {args.steps})")
    print(f"{'d':>5} {'eager npu':>10} {'ind npu':>9} {'npu bknd':>9} {'eager cpu':>10} {'ind cpu':>9}"
          f" {'ind/eager npu':>14} {'ind npu/cpu':>12} {'compile npu s':>14} {'compile cpu s':>14}")
    for d in [int(v) for v in args.dims.split(",")]:
        torch.manual_seed(0)
        base = make_model(args, d)
        x_cpu = make_input(args, d)
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
    graphs_section(args)


if __name__ == "__main__":
    main()
