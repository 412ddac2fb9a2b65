"""Run under torchrun (2 ranks): one process group used from two devices per
rank, a model split across them (model parallelism inside DDP, ZeRO over its
parameters). Each rank prints "RANK r OK ...".

Rank r holds npu:2r and npu:2r+1. Every step of the group's collectives then
runs on two devices' communication streams; the ranks must still pair them in
the order they were issued, or each all_reduce adds another's data.

Checked against a single-process run on the cpu:
- async all_reduces issued back to back on the two devices: exact sums;
- DDP over the split model (one gradient bucket per device), every rank fed
  the same batch: gradients equal to one process's;
- ZeroRedundancyOptimizer (Adam) over it: parameters equal to plain Adam's,
  and its consolidated state dict, moved to the cpu with
  `non_blocking=True` and pickled at once, is the state a plain Adam has."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_npu  # noqa: F401

dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.npu.set_device(rank)
dev0, dev1 = torch.device("npu", 2 * rank), torch.device("npu", 2 * rank + 1)

# 1. Collectives of one group on two devices, issued back to back.
for step in range(30):
    tensors = [torch.full((4096,), float(10 * step + k + 1), device=d) for k, d in enumerate((dev0, dev1))]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    for w in works:
        w.wait()
    for k, t in enumerate(tensors):
        expected = torch.full((4096,), float(world * (10 * step + k + 1)))
        assert torch.equal(t.cpu(), expected), f"step {step}: device {k}'s all_reduce got {t.cpu()[:3]}"


class Split(nn.Module):
    def __init__(self, first, second):
        super().__init__()
        self.first, self.second = first, second
        self.net0 = nn.Linear(10, 10).to(first)
        self.net1 = nn.Linear(10, 5).to(second)

    def forward(self, x):
        return self.net1(torch.relu(self.net0(x.to(self.first))).to(self.second))


torch.manual_seed(0)
model = Split(dev0, dev1)
reference = Split("cpu", "cpu")
reference.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
ddp = DDP(model)
zero = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
ref_opt = torch.optim.Adam(reference.parameters(), lr=0.01)

gen = torch.Generator().manual_seed(1)
for step in range(6):
    x = torch.randn(20, 10, generator=gen)  # the same batch on every rank: averaged gradients are one process's
    zero.zero_grad()
    ddp(x).abs().sum().backward()
    ref_opt.zero_grad()
    reference(x).abs().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, msg=f"step {step}: gradient of {name}")
    zero.step()
    ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), msg=f"step {step}: {name} after ZeRO's step")

# 2. The consolidated state: every rank's shard sent to rank 0, moved to the cpu non_blocking there.
zero.consolidate_state_dict(to=0)
states = [zero.state_dict() if rank == 0 else None]
dist.broadcast_object_list(states, src=0)
expected = ref_opt.state_dict()["state"]
for index, state in states[0]["state"].items():
    for key in ("step", "exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(state[key].cpu(), expected[index][key].cpu(), msg=f"state {index} {key}")

# A plain Adam that loads it goes on exactly like the reference.
local = Split(dev0, dev0)
local.load_state_dict(reference.state_dict())
local_opt = torch.optim.Adam(local.parameters(), lr=0.01)
local_opt.load_state_dict(states[0])
x = torch.randn(20, 10, generator=gen)
local_opt.zero_grad()
local(x).abs().sum().backward()
local_opt.step()
ref_opt.zero_grad()
reference(x).abs().sum().backward()
ref_opt.step()
for p, q in zip(local.parameters(), reference.parameters()):
    torch.testing.assert_close(p.detach().cpu(), q.detach())
torch.npu.synchronize()
print(f"RANK {rank} OK", flush=True)
dist.destroy_process_group()
