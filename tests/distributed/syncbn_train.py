"""Run under torchrun: a model with SyncBatchNorm (convert_sync_batchnorm) in
DDP on npu with hccl must train exactly like the same model with BatchNorm on
the concatenated batch in one process on the cpu: outputs, gradients and
running statistics. Each rank prints "RANK r OK max_diff=..."."""

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
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 3), nn.BatchNorm2d(4))
reference = copy.deepcopy(model)  # cpu, whole batch, plain BatchNorm
synced = nn.SyncBatchNorm.convert_sync_batchnorm(model).npu()
ddp = DDP(synced, device_ids=[rank])
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)

gen = torch.Generator().manual_seed(1)
per_rank = 3
worst = 0.0
for step in range(4):
    x = torch.randn(per_rank * world, 3, 10, 10, generator=gen)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    opt.zero_grad()
    out = ddp(x[mine].npu())
    out.square().mean().backward()  # DDP averages: the gradient of the whole batch's mean
    opt.step()
    ref_opt.zero_grad()
    ref_out = reference(x)
    ref_out.square().mean().backward()
    ref_opt.step()
    worst = max(worst, (out.detach().cpu() - ref_out[mine].detach()).abs().max().item())

for (name, p), q in zip(synced.named_parameters(), reference.parameters()):
    worst = max(worst, (p.detach().cpu() - q.detach()).abs().max().item())
for (name, b), c in zip(synced.named_buffers(), reference.buffers()):
    worst = max(worst, (b.cpu().float() - c.float()).abs().max().item())
# The same function at real torch_npu's module path, called directly on this rank's slice.
from torch_npu.utils.syncbatchnorm import SyncBatchNorm  # noqa: E402
x = torch.randn(per_rank * world, 3, 5, 5, generator=gen)
direct = SyncBatchNorm.apply(x[rank * per_rank:(rank + 1) * per_rank].npu(), None, None, None, None, 1e-5, 0.1,
                             dist.group.WORLD, world)
whole = nn.functional.batch_norm(x, None, None, training=True, eps=1e-5)
worst = max(worst, (direct.cpu() - whole[rank * per_rank:(rank + 1) * per_rank]).abs().max().item())
assert worst < 1e-4, worst
print(f"RANK {rank} OK max_diff={worst:.2e}")
dist.destroy_process_group()
