"""One process of a megatron-core GPT (tests/test_mindspeed.py, benchmarks/bench_mindspeed_step.py).

    python megatron_gpt_steps.py DEVICE STEPS PORT WARMUP

megatron-core's GPTModel (the tiny GPT of tests/mindspeed_jobs.py: 2 layers,
hidden 64, 4 heads, sequence 64, vocabulary 4096, micro-batch 2, fp32, no
dropout, local transformer layers) trains WARMUP + STEPS Adam steps on fixed
random batches, on a process group of one:

- DEVICE cpu: plain megatron-core on gloo, no MindSpeed (its attention's
  scratch buffer, placed on torch.cuda.current_device(), is put on the cpu,
  and its CUDA RNG tracker, forked around the attention's dropout, which is
  off, forks nothing); run it with TORCH_DEVICE_BACKEND_AUTOLOAD=0;
- DEVICE npu: ``import mindspeed.megatron_adaptor`` first (MindSpeed patches
  megatron-core for Ascend), the model on npu, hccl.

Prints "RESULT {json}": the median and best time of the STEPS timed steps
(each to its loss) and their losses. Runs in the venv of
scripts/setup_mindspeed.sh with megatron-core (and MindSpeed) on PYTHONPATH.
"""
import json
import sys
import time
device = sys.argv[1]
steps = int(sys.argv[2])
warmup = int(sys.argv[4])
if device == "npu":
    import mindspeed.megatron_adaptor  # noqa: F401  (patches megatron-core for Ascend)
import torch
import torch.distributed as dist
if device == "npu":
    import torch_npu  # noqa: F401
else:
    # megatron-core's attention takes a scratch buffer on
    # torch.cuda.current_device(): on a CPU-only torch, the cpu.
    torch.cuda.current_device = lambda: "cpu"
dist.init_process_group("hccl" if device == "npu" else "gloo", init_method="tcp://127.0.0.1:" + sys.argv[3],
                        rank=0, world_size=1)
from megatron.core import parallel_state, tensor_parallel
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.transformer.transformer_config import TransformerConfig
parallel_state.initialize_model_parallel(1, 1)
torch.manual_seed(1234)
if device == "npu":
    torch.npu.set_device(0)
    tensor_parallel.model_parallel_cuda_manual_seed(1234)
else:
    # The attention forks megatron's CUDA RNG tracker around its dropout
    # (off here): on the cpu there is no CUDA generator to fork.
    import contextlib

    class _CpuRngTracker:
        def fork(self, *args, **kwargs):
            return contextlib.nullcontext()

    tensor_parallel.get_cuda_rng_tracker = lambda *args, **kwargs: _CpuRngTracker()
config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, use_cpu_initialization=True,
                           attention_dropout=0.0, hidden_dropout=0.0, gradient_accumulation_fusion=False,
                           bias_activation_fusion=False, bias_dropout_fusion=False, masked_softmax_fusion=False,
                           persist_layer_norm=False, apply_rope_fusion=False)
model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=4096,
                 max_sequence_length=64).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
g = torch.Generator().manual_seed(0)
batches = [torch.randint(0, 4096, (2, 65), generator=g) for _ in range(4)]
position_ids = torch.arange(64).unsqueeze(0).expand(2, 64).to(device)
mask = torch.tril(torch.ones(1, 1, 64, 64)).lt(0.5).to(device)


def step(tokens):
    tokens = tokens.to(device)
    loss = model(tokens[:, :-1], position_ids, mask, labels=tokens[:, 1:]).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


for i in range(warmup):  # first launches, allocator, autograd graphs
    step(batches[i % 4])
times, losses = [], []
for i in range(steps):
    if device == "npu":
        torch.npu.synchronize()
    t0 = time.perf_counter()
    loss = step(batches[i % 4])
    losses.append(float(loss))  # waits for the step
    times.append(time.perf_counter() - t0)
times.sort()
print("RESULT " + json.dumps({"median_ms": 1e3 * times[len(times) // 2], "min_ms": 1e3 * times[0],
                              "losses": losses}))
dist.destroy_process_group()
