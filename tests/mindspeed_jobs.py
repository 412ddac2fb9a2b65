"""Runs Megatron-LM's pretrain_gpt.py on vNPU with and without MindSpeed
(tests/test_mindspeed.py; the stack comes from scripts/setup_mindspeed.sh).

- with MindSpeed: ``import mindspeed.megatron_adaptor`` first, as MindSpeed's
  README tells users to add to pretrain_gpt.py;
- without (the reference): plain Megatron with ``transfer_to_npu``. Two
  things of plain Megatron cannot run without CUDA, on real torch_npu either:
  its legacy fused kernels build with nvcc (the unfused flags make them
  unused, so their build is skipped) and clip_grads asserts
  ``param.grad.type() == 'torch.cuda.FloatTensor'`` (run with
  PYTHONOPTIMIZE=1, which drops asserts).

Each run is one torchrun job with a timeout; it returns the "lm loss" of
every iteration.
"""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap

STACK = os.environ.get("VNPU_MINDSPEED_STACK")

# A tiny GPT on Megatron's mock data: fp32 and no dropout, so that fused and
# unfused math agree (a fused attention draws its dropout mask from its own
# random stream, on Ascend too, so with dropout the losses differ by design).
TINY_GPT = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 "
            "--attention-dropout 0 --hidden-dropout 0 "
            "--micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --lr-decay-style constant --mock-data "
            "--tokenizer-type NullTokenizer --vocab-size 4096 --log-interval 1 --eval-iters 0 --seed 1234 "
            "--transformer-impl local --distributed-backend nccl --split 100,0,0").split()
# The same model as a tiny Llama: RMSNorm, SwiGLU, rotary embeddings, no biases.
TINY_LLAMA = TINY_GPT + ("--normalization RMSNorm --swiglu --position-embedding-type rope "
                         "--disable-bias-linear --untie-embeddings-and-output-weights").split()
# A 2-expert MoE MLP in each layer: top-2 routing, all-to-all token dispatch,
# no auxiliary loss (so the loss is the language model's alone).
TWO_EXPERT_MOE = ("--num-experts 2 --moe-router-topk 2 --moe-token-dispatcher-type alltoall "
                  "--moe-aux-loss-coeff 0").split()
# Every fused path MindSpeed offers for these layers.
MINDSPEED_FUSED = ("--use-fused-rmsnorm --use-fused-swiglu --use-fused-rotary-pos-emb --use-flash-attn").split()
# Plain Megatron without CUDA kernels.
PLAIN_UNFUSED = ("--no-gradient-accumulation-fusion --no-masked-softmax-fusion --no-bias-gelu-fusion "
                 "--no-bias-dropout-fusion --no-rope-fusion --no-persist-layer-norm").split()

_LAUNCHER = textwrap.dedent("""
    import os, runpy, sys
    import torch
    if os.environ["VNPU_WITH_MINDSPEED"] == "1":
        import mindspeed.megatron_adaptor  # noqa: F401
    else:
        import torch_npu  # noqa: F401
        from torch_npu.contrib import transfer_to_npu  # noqa: F401
        import megatron.legacy.fused_kernels as fused_kernels
        fused_kernels.load = lambda args: None
    sys.argv[0] = os.path.join(os.environ["MEGATRON_LM"], "pretrain_gpt.py")
    runpy.run_path(sys.argv[0], run_name="__main__")
    """)

_LOSS = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?lm loss: ([0-9.E+-]+)")


def run(workdir, args, *, mindspeed, nproc=1, iters=20, port=29530, timeout=900):
    """[loss of iteration 1, 2, ...] of one pretrain_gpt.py job."""
    launcher = os.path.join(workdir, "pretrain_gpt_launcher.py")
    with open(launcher, "w") as f:
        f.write(_LAUNCHER)
    python = os.path.join(STACK, "venv", "bin", "python")
    megatron = os.path.join(STACK, "Megatron-LM")
    env = dict(os.environ, MEGATRON_LM=megatron, CUDA_DEVICE_MAX_CONNECTIONS="1",
               VNPU_WITH_MINDSPEED="1" if mindspeed else "0",
               PYTHONPATH=os.pathsep.join(([os.path.join(STACK, "MindSpeed")] if mindspeed else []) + [megatron]),
               # Megatron builds its dataset helpers with `python3 -m pybind11`: the venv's.
               PATH=os.pathsep.join([os.path.join(STACK, "venv", "bin"), os.environ.get("PATH", "")]))
    if not mindspeed:
        env["PYTHONOPTIMIZE"] = "1"
    command = [python, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_port", str(port),
               launcher, *args, "--train-iters", str(iters)]
    # A session of its own, so that a timeout ends torchrun's workers too.
    proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        raise AssertionError(f"pretrain_gpt.py did not finish in {timeout} s:\n{output[-4000:]}")
    losses = [float(m.group(2)) for m in _LOSS.finditer(output)]
    if proc.returncode != 0 or len(losses) != iters:
        tail = "\n".join(line for line in output.splitlines() if "Warning" not in line)[-6000:]
        raise AssertionError(f"pretrain_gpt.py ({'MindSpeed' if mindspeed else 'plain'}, {nproc} ranks) exited "
                             f"{proc.returncode} with {len(losses)}/{iters} losses:\n{tail}")
    return losses


if __name__ == "__main__":  # a quick look: python tests/mindspeed_jobs.py <workdir>
    print(run(sys.argv[1], TINY_GPT, mindspeed=True, iters=3))


def run_gpt_steps(device, steps, port, warmup=0, timeout=900):
    """tests/distributed/megatron_gpt_steps.py in the stack's venv: megatron-core's tiny GPT on ``device``
    ("cpu": plain, torch_npu not loaded; "npu": with MindSpeed). Returns its RESULT (times, losses)."""
    python = os.path.join(STACK, "venv", "bin", "python")
    paths = ([os.path.join(STACK, "MindSpeed")] if device == "npu" else []) + [os.path.join(STACK, "Megatron-LM")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), CUDA_DEVICE_MAX_CONNECTIONS="1")
    if device == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # plain torch: torch_npu not loaded at all
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed", "megatron_gpt_steps.py")
    proc = subprocess.run([python, worker, device, str(steps), str(port), str(warmup)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"the {device} run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
