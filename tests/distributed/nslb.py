"""Run under torchrun (2 ranks) with NSLB_CP and NSLB_MAX_RECORD_NUM=3: four
all_reduces of 10 float32 and a send/recv pair; the first three operations
are recorded, the test reads the files. Prints "RANK r OK"."""

import torch
import torch.distributed as dist

import torch_npu  # noqa: F401  (registers hccl)

dist.init_process_group("hccl")
rank = dist.get_rank()
torch.npu.set_device(rank)
t = torch.ones(10, device="npu")
for _ in range(4):
    dist.all_reduce(t)
torch.npu.synchronize()
print(f"RANK {rank} OK", flush=True)
dist.destroy_process_group()
