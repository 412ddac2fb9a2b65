"""MindSpeed on Megatron-LM, end to end on vNPU (issue: code written for Ascend).

A tiny GPT and a tiny Llama train 20 steps under torchrun/hccl with MindSpeed
(its default fused gradient accumulation through ATB's Linear, its C++ rope
op over aclnnRotaryPositionEmbedding, every --use-fused-* flag, TP=2 with sequence parallelism), and their losses equal plain Megatron's on vNPU
(transfer_to_npu, unfused) step by step; the tiny GPT with MindSpeed on npu
also equals megatron-core's GPTModel on cpu (gloo, no MindSpeed, no torch_npu).
Needs the stack of
scripts/setup_mindspeed.sh (Megatron-LM core_v0.12.1 and MindSpeed trees,
which CI cannot download): without VNPU_MINDSPEED_STACK the tests skip.
"""

import os

import pytest

import mindspeed_jobs as jobs

pytestmark = pytest.mark.skipif(
    not jobs.STACK or not os.path.isdir(os.path.join(jobs.STACK or "", "venv")),
    reason="needs the MindSpeed stack: run scripts/setup_mindspeed.sh STACK MEGATRON_LM_TREE MINDSPEED_TREE, "
           "then set VNPU_MINDSPEED_STACK=STACK (docs/mindspeed.md)")

# fp32 throughout. Fused and unfused paths sum in different orders (the
# fused accumulation adds the weight gradient into the fp32 main gradient in
# one operation), so over 20 steps the losses drift apart by up to 6e-6
# (measured); 1e-5 is about 1e-6 of the loss.
TOLERANCE = 1e-5


def assert_same_losses(with_mindspeed, plain):
    assert len(with_mindspeed) == len(plain)
    worst = max(abs(a - b) for a, b in zip(with_mindspeed, plain))
    assert worst <= TOLERANCE, f"MindSpeed {with_mindspeed}\nplain     {plain}"
    assert plain[-1] < plain[0]  # it trains


def test_tiny_gpt_tp1_with_mindspeed_defaults_equals_plain_megatron(tmp_path):
    # MindSpeed's defaults keep gradient accumulation fusion on: ATB's Linear (enAccum).
    losses = jobs.run(str(tmp_path), jobs.TINY_GPT + ["--tensor-model-parallel-size", "1"], mindspeed=True,
                      port=29531)
    plain = jobs.run(str(tmp_path), jobs.TINY_GPT + jobs.PLAIN_UNFUSED + ["--tensor-model-parallel-size", "1"],
                     mindspeed=False, port=29532)
    assert_same_losses(losses, plain)


def test_tiny_llama_tp2_sequence_parallel_with_every_fused_flag_equals_plain_megatron(tmp_path):
    # The reference runs without sequence parallelism: plain Megatron's torch
    # norm does not support it (its assert, dropped by PYTHONOPTIMIZE, says
    # so: the norm weights' gradients would not be all-reduced), and SP must
    # not change the math.
    parallel = ["--tensor-model-parallel-size", "2"]
    losses = jobs.run(str(tmp_path), jobs.TINY_LLAMA + jobs.MINDSPEED_FUSED + parallel + ["--sequence-parallel"],
                      mindspeed=True, nproc=2, port=29533)
    plain = jobs.run(str(tmp_path), jobs.TINY_LLAMA + jobs.PLAIN_UNFUSED + parallel, mindspeed=False, nproc=2,
                     port=29534)
    assert_same_losses(losses, plain)


def test_two_expert_moe_with_mindspeed_equals_plain_megatron(tmp_path):
    # A 2-expert MoE layer in each block (token dispatch by all-to-all, top-2
    # routing, Llama-style experts), MindSpeed against plain Megatron, fp32.
    moe = jobs.TINY_LLAMA + jobs.TWO_EXPERT_MOE
    losses = jobs.run(str(tmp_path), moe, mindspeed=True, port=29535)
    plain = jobs.run(str(tmp_path), moe + jobs.PLAIN_UNFUSED, mindspeed=False, port=29536)
    assert_same_losses(losses, plain)


def test_moe_grouped_gemm_tracks_the_sequential_experts(tmp_path):
    # --moe-grouped-gemm (bf16 only, Megatron's rule) runs MindSpeed's npu_gmm
    # C++ op over aclnnGroupedMatmulV4 forward and backward. Plain Megatron's
    # grouped GEMM needs CUDA, so the reference is MindSpeed's per-expert
    # experts in bf16: the same math, summed in another order.
    bf16 = jobs.TINY_LLAMA + jobs.TWO_EXPERT_MOE + ["--bf16"]
    grouped = jobs.run(str(tmp_path), bf16 + ["--moe-grouped-gemm"], mindspeed=True, iters=10, port=29537)
    sequential = jobs.run(str(tmp_path), bf16, mindspeed=True, iters=10, port=29538)
    worst = max(abs(a - b) for a, b in zip(grouped, sequential))
    assert worst <= 1e-2, f"grouped    {grouped}\nsequential {sequential}"
    assert grouped[-1] < grouped[0]


def test_tiny_gpt_with_mindspeed_on_npu_equals_megatron_core_on_cpu():
    # megatron-core's GPTModel, 20 Adam steps from the same initialisation on the same batches: MindSpeed on npu
    # (hccl) against plain megatron-core on cpu (gloo, torch_npu not loaded)
    cpu = jobs.run_gpt_steps("cpu", 20, 29541)["losses"]
    npu = jobs.run_gpt_steps("npu", 20, 29542)["losses"]
    assert_same_losses(npu, cpu)
