"""Run under torchrun, 3 ranks, VNPU_HCCL_HOST="host{rank//2}" (ranks 0 and 1
on one host, rank 2 on another): torch_npu's communicator-creation log on the
"torch.distributed" logger, and ROOTINFO_SUBCOMM_ENABLE's sub-groups, which
take their ranks' hosts from the world group's. Prints "RANK r OK"."""

import logging
import os
import tempfile

import torch
import torch.distributed as dist

import torch_npu

ROOT_INFO = "Create hccl comm by hcclCommInitRootInfoConfig success, group id is "
DERIVED = "Create sub hccl comm by hcclCreateSubCommConfig success, group id is "


def stderr_of(fn):
    """What `fn` writes to file descriptor 2 (the C++ logs write there)."""
    with tempfile.TemporaryFile(mode="w+") as capture:
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        capture.seek(0)
        return capture.read()


def all_reduce_on(group):
    t = torch.full((4,), float(rank + 1), device="npu")
    dist.all_reduce(t, group=group)
    return t


dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
assert world == 3
torch.npu.set_device(rank)

# At WARNING (the default) the creation is not logged.
quiet = stderr_of(lambda: all_reduce_on(None).cpu())
assert "hccl comm" not in quiet, quiet

torch._logging.set_logs(distributed=logging.INFO)  # reaches the C++ logger "torch.distributed"

# A group made without ROOTINFO_SUBCOMM_ENABLE: root info, at its first collective only.
pair = dist.new_group([0, 1])
if rank in (0, 1):
    log = stderr_of(lambda: all_reduce_on(pair).cpu())
    assert ROOT_INFO in log and "commType is 0, use " in log and DERIVED not in log, log
    assert f"[rank:{rank}] " in log, log  # torchrun's RANK, as torch_npu's lines show it
    again = stderr_of(lambda: all_reduce_on(pair).cpu())
    assert "hccl comm" not in again, again

# ROOTINFO_SUBCOMM_ENABLE is read when a group is made.
os.environ["ROOTINFO_SUBCOMM_ENABLE"] = "1"
same_host = dist.new_group([0, 1])
across_hosts = dist.new_group([1, 2])
for group, members, transport in ((same_host, (0, 1), "shared memory"), (across_hosts, (1, 2), "sockets")):
    if rank not in members:
        continue
    # The hosts come from the world group's, by world rank: 0 and 1 share a
    # host (shared memory), 1 and 2 do not (sockets).
    backend = group._get_backend(torch.device("npu", rank))
    assert backend._transport == transport, (members, backend._transport)
    result = []
    log = stderr_of(lambda: result.append(all_reduce_on(group).cpu()))
    assert DERIVED in log and f"devicesKey is {rank}, use " in log and ROOT_INFO not in log, log
    assert torch.equal(result[0], torch.full((4,), float(sum(m + 1 for m in members)))), result

# The whole world as a sub-group, as torch_npu's own tests make it.
everyone = dist.new_group(list(range(world)))
log = stderr_of(lambda: all_reduce_on(everyone).cpu())
assert DERIVED in log, log
dist.barrier()
print(f"RANK {rank} OK", flush=True)
dist.destroy_process_group()
