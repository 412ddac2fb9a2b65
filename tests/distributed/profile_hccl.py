"""torchrun --nproc_per_node=2: torch_npu.profiler on every rank of an hccl
job writes one *_ascend_pt folder per rank, with communication.json and the
communication share in step_trace_time.csv, and (export_type text and db) the
rank's ascend_pytorch_profiler_{rank}.db and analysis.db."""

import os
import sys

import torch
import torch.distributed as dist

import torch_npu
import torch_npu.profiler as P

dist.init_process_group("hccl")
rank = dist.get_rank()
torch.npu.set_device(int(os.environ["LOCAL_RANK"]))
out = sys.argv[1] if len(sys.argv) > 1 else os.environ["PROFILE_DIR"]
x = torch.randn(256, 256, device="npu")
g = torch.ones(1 << 18, device="npu")
with P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU], schedule=P.schedule(wait=0, active=2, repeat=1),
               on_trace_ready=P.tensorboard_trace_handler(out, worker_name=f"rank{rank}"),
               experimental_config=P._ExperimentalConfig(export_type=["text", "db"])) as prof:
    for _ in range(2):
        y = (x @ x).relu()
        dist.all_reduce(g)
        torch.npu.synchronize()
        prof.step()
dist.barrier()
dist.destroy_process_group()
print(f"RANK {rank} OK", flush=True)
