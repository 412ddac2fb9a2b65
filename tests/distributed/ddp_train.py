"""Run under torchrun: DDP on npu with hccl must train exactly like one process
on the concatenated batch. Each rank prints "RANK r OK max_diff=...".

The model, data and optimizer are seeded identically everywhere; each rank
takes its slice of every batch (what DistributedSampler gives) and, on rank 0,
the whole batch is also run through a single-process copy on the cpu."""

import copy

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_npu  # noqa: F401

dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.npu.set_device(rank)

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
reference = copy.deepcopy(model)  # cpu, whole batch
ddp = DDP(model.npu(), device_ids=[rank], bucket_cap_mb=0.001)  # small buckets: several allreduces overlap backward
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)

gen = torch.Generator().manual_seed(1)
per_rank = 8
for step in range(5):
    x = torch.randn(per_rank * world, 16, generator=gen)
    y = torch.randn(per_rank * world, 4, generator=gen)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    opt.zero_grad()
    if step == 3:  # gradient accumulation: no_sync for the first half, then a synced step
        with ddp.no_sync():
            nn.functional.mse_loss(ddp(x[mine][:4].npu()), y[mine][:4].npu(), reduction="sum").backward()
        nn.functional.mse_loss(ddp(x[mine][4:].npu()), y[mine][4:].npu(), reduction="sum").backward()
        for p in ddp.parameters():
            p.grad.div_(per_rank * 4)  # mse "sum" counts the 4 outputs of each sample too
    else:
        nn.functional.mse_loss(ddp(x[mine].npu()), y[mine].npu()).backward()
    opt.step()
    ref_opt.zero_grad()
    nn.functional.mse_loss(reference(x), y).backward()
    ref_opt.step()

# identical across ranks
flat = torch.cat([p.detach().reshape(-1) for p in ddp.module.parameters()])
gathered = [torch.empty_like(flat) for _ in range(world)]
dist.all_gather(gathered, flat)
for g in gathered:
    assert torch.equal(g.cpu(), flat.cpu()), "ranks diverged"
diff = max((a.detach().cpu() - b.detach()).abs().max().item()
           for a, b in zip(ddp.module.parameters(), reference.parameters()))
assert diff < 1e-5, f"DDP differs from the single-process run by {diff}"
torch.npu.synchronize()
print(f"RANK {rank} OK max_diff={diff:.2e}", flush=True)
dist.destroy_process_group()
