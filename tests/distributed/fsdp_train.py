"""Run under torchrun: FSDP2 (fully_shard), or FSDP1 with FSDP_VERSION=1, on
npu with hccl trains like one process on the whole batch, and (FSDP2) a
sharded checkpoint round-trips. Prints "RANK r OK"."""

import copy
import os
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

import torch_npu  # noqa: F401

dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.npu.set_device(rank)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
reference = copy.deepcopy(model)
model.npu()
fsdp1 = os.environ.get("FSDP_VERSION") == "1"
if fsdp1:
    from torch.distributed.fsdp import FullyShardedDataParallel

    model = FullyShardedDataParallel(model, device_id=torch.device("npu", rank), use_orig_params=True)
else:
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
gen = torch.Generator().manual_seed(1)
per_rank = 8
for step in range(4):
    x = torch.randn(per_rank * world, 16, generator=gen)
    y = torch.randn(per_rank * world, 4, generator=gen)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    opt.zero_grad()
    nn.functional.mse_loss(model(x[mine].npu()), y[mine].npu()).backward()
    opt.step()
    ref_opt.zero_grad()
    nn.functional.mse_loss(reference(x), y).backward()
    ref_opt.step()
if fsdp1:
    with FullyShardedDataParallel.summon_full_params(model):
        for a, b in zip(model.parameters(), reference.parameters()):
            assert torch.allclose(a.detach().cpu(), b.detach(), atol=1e-5), (a.detach().cpu() - b).abs().max()
    torch.npu.synchronize()
    print(f"RANK {rank} OK", flush=True)
    dist.destroy_process_group()
    raise SystemExit(0)
full = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
for k, v in reference.state_dict().items():
    assert torch.allclose(full[k], v, atol=1e-5), (k, (full[k] - v).abs().max())
# sharded checkpoint: save, perturb, load back
path = os.environ["CKPT_DIR"]
dcp.save({"model": model.state_dict()}, checkpoint_id=path)
with torch.no_grad():
    for p in model.parameters():
        p.zero_()
state = {"model": model.state_dict()}
dcp.load(state, checkpoint_id=path)
model.load_state_dict(state["model"])
again = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
for k in full:
    assert torch.equal(again[k], full[k]), k
torch.npu.synchronize()
print(f"RANK {rank} OK", flush=True)
dist.destroy_process_group()
