"""Run with `accelerate launch --num_processes 2`: the accelerate pattern
(optimizer built on the cpu model, then prepare) trains on npu over hccl, the
ranks stay identical and the loss falls. Prints "RANK r OK losses=[...]".
With ACCELERATE_USE_CPU=1 the same job runs on the cpu over gloo (the
reference)."""

import json
import os
import sys

import torch
import torch.nn as nn
from accelerate import Accelerator
from accelerate.utils import set_seed

on_cpu = os.environ.get("ACCELERATE_USE_CPU") == "1"
accelerator = Accelerator(cpu=on_cpu)
set_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
g = torch.Generator().manual_seed(1)
x = torch.randn(64, 16, generator=g)
y = x[:, :4].sum(1, keepdim=True)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
assert accelerator.device.type == ("cpu" if on_cpu else "npu") and accelerator.num_processes == 2
import torch.distributed as dist  # noqa: E402

assert dist.get_backend() == ("gloo" if on_cpu else "hccl"), dist.get_backend()
losses = []
for epoch in range(4):
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(xb), yb)
        accelerator.backward(loss)
        optimizer.step()
    losses.append(accelerator.gather(loss.detach()).mean().item())
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
everyone = accelerator.gather(flat.unsqueeze(0))
assert torch.equal(everyone[0].cpu(), everyone[1].cpu()), "ranks diverged"
assert losses[-1] < 0.5 * losses[0], losses
print(f"RANK {accelerator.process_index} OK losses={json.dumps(losses)}", flush=True)
if os.environ.get("ACCELERATE_USE_CPU") == "1":
    # The cpu/gloo reference: its exit is not under test, and under a loaded
    # full test run PyTorch's gloo teardown sometimes ends the process with
    # "terminate called without an active exception" after the results are
    # printed. The npu job exits normally: that exit is tested.
    sys.stdout.flush()
    os._exit(0)
