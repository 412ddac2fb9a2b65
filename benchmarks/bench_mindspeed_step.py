"""A MindSpeed training step on npu against the same megatron-core model on cpu.

Builds megatron-core's tiny GPTModel twice, each in a process of its own,
one after the other (tests/distributed/megatron_gpt_steps.py, which
tests/test_mindspeed.py also runs to compare the losses):

- cpu: plain megatron-core on a gloo group of one, no MindSpeed;
- npu: ``import mindspeed.megatron_adaptor`` first (MindSpeed patches
  megatron-core for Ascend), the model on npu, an hccl group of one.

Each times forward, backward and an Adam step over the same batches (after
5 warm-up steps) and prints the median step time; the ratio npu / cpu is the
figure, with the largest difference of the two runs' losses.

    VNPU_MINDSPEED_STACK=/path/to/stack python benchmarks/bench_mindspeed_step.py [--steps 30]

The stack comes from scripts/setup_mindspeed.sh (docs/mindspeed.md).
"""

import argparse
import os
import sys

# The worker (tests/distributed/megatron_gpt_steps.py) and its launcher are the tests' (tests/test_mindspeed.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))


def run(device, steps, port):
    import mindspeed_jobs
    try:
        return mindspeed_jobs.run_gpt_steps(device, steps, port, warmup=5)
    except RuntimeError as e:
        sys.exit(str(e))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    stack = os.environ.get("VNPU_MINDSPEED_STACK")
    if not stack or not os.path.isdir(os.path.join(stack, "venv")):
        sys.exit("set VNPU_MINDSPEED_STACK to a stack made by scripts/setup_mindspeed.sh (docs/mindspeed.md)")
    cpu = run("cpu", args.steps, 29571)
    npu = run("npu", args.steps, 29572)
    print(f"tiny GPT step (megatron-core GPTModel, {args.steps} steps, median):")
    print(f"  cpu, plain megatron-core : {cpu['median_ms']:8.2f} ms (min {cpu['min_ms']:.2f})")
    print(f"  npu, with MindSpeed      : {npu['median_ms']:8.2f} ms (min {npu['min_ms']:.2f})")
    print(f"  ratio npu / cpu          : {npu['median_ms'] / cpu['median_ms']:8.2f}x median, "
          f"{npu['min_ms'] / cpu['min_ms']:.2f}x best")
    worst = max(abs(a - b) for a, b in zip(cpu["losses"], npu["losses"]))
    print(f"  losses (first, last)     : cpu {cpu['losses'][0]:.4f} {cpu['losses'][-1]:.4f}, "
          f"npu {npu['losses'][0]:.4f} {npu['losses'][-1]:.4f} (largest difference {worst:.1e})")


if __name__ == "__main__":
    main()
