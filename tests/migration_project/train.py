"""Trains TinyModel for a few steps on cuda with DDP and AMP (single process)."""

import os
import sys

import torch
import torch.distributed as dist
from torch.cuda.amp import GradScaler, autocast
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

from model import build

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = True
torch.backends.cuda.matmul.allow_tf32 = False


def custom_gelu():
    # A custom CUDA kernel, built at run time: the migration report flags it.
    from torch.utils.cpp_extension import load
    return load(name="fused_gelu", sources=["kernels/fused_gelu.cu"], verbose=False)


def main():
    if not torch.cuda.is_available():
        print("cuda is not available")  # a message about cuda stays as it is
        return 1
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    device = torch.device("cuda:0")
    if os.environ.get("USE_CUSTOM_KERNEL") == "1":
        custom_gelu()
    torch.manual_seed(0)
    model = DDP(build().to(device), device_ids=[0])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scaler = GradScaler()
    data = torch.randint(0, 64, (64, 16))
    loader = DataLoader(TensorDataset(data), batch_size=16, pin_memory=True, pin_memory_device="cuda")
    losses = []
    for epoch in range(4):
        for (batch,) in loader:
            batch = batch.cuda(non_blocking=True)
            with autocast():
                logits = model(batch[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 64).float(), batch[:, 1:].reshape(-1))
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        torch.cuda.synchronize()
        losses.append(loss.item())
    torch.save(model.module.state_dict(), "ckpt.pt")
    state = torch.load("ckpt.pt", map_location="cuda:0")
    assert all(t.is_cuda for t in state.values())
    dist.destroy_process_group()
    print("LOSSES", " ".join(f"{v:.4f}" for v in losses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
