"""Run under torchrun (tests/test_atb.py): ATB's LinearParallelParam (MindSpeed's
lcal coc matmuls) over 2 hccl ranks through tests/cpp_extensions/atb_extension.cpp
(its folder in VNPU_ATB_EXT_DIR). Communication domain 0 of 2 ranks is the world
group here. Each result is checked against the formula over every rank's
inputs, between collectives issued before and after it. Each rank prints
"RANK r OK"."""

import os
import sys

import torch
import torch.distributed as dist

import torch_npu  # noqa: F401

sys.path.insert(0, os.environ["VNPU_ATB_EXT_DIR"])
import vnpu_atb_ext as ext  # noqa: E402

LINEAR_ALL_REDUCE, LINEAR_REDUCE_SCATTER, ALL_GATHER_LINEAR = 0, 1, 2
dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.npu.set_device(rank)

xs = [torch.randn(6, 8, generator=torch.Generator().manual_seed(r)) for r in range(world)]
w = torch.randn(5, 8, generator=torch.Generator().manual_seed(99))  # (n, k): transposed weight
bias = torch.randn(5, generator=torch.Generator().manual_seed(98))
total = sum(x @ w.t() for x in xs)
for in_handler in (True, False):
    before = torch.full((1024,), float(rank + 1)).npu()
    pending = dist.all_reduce(before, async_op=True)
    (y,) = ext.linear_parallel(xs[rank].npu(), w.npu(), bias.npu(), LINEAR_ALL_REDUCE, rank, world, False, in_handler,
                               "0")
    after = torch.ones(4).npu()
    dist.all_reduce(after)
    pending.wait()
    torch.testing.assert_close(y.cpu(), total + bias)
    assert before.cpu().eq(sum(range(1, world + 1))).all() and after.cpu().eq(world).all()

    (block,) = ext.linear_parallel(xs[rank].npu(), w.npu(), None, LINEAR_REDUCE_SCATTER, rank, world, False, in_handler,
                                   "0")
    torch.testing.assert_close(block.cpu(), total.chunk(world)[rank])

    out, gathered = ext.linear_parallel(xs[rank].npu(), w.npu(), bias.npu(), ALL_GATHER_LINEAR, rank, world, True,
                                        in_handler, "0")
    torch.testing.assert_close(gathered.cpu(), torch.cat(xs))
    torch.testing.assert_close(out.cpu(), torch.cat(xs) @ w.t() + bias)

# a domain this process has no group for
try:
    ext.linear_parallel(xs[rank].npu(), w.npu(), None, LINEAR_ALL_REDUCE, rank, world, False, True, "3")
    raise AssertionError("domain 3 was accepted")
except RuntimeError as e:
    assert "Setup returned 1" in str(e), e
check = torch.ones(2).npu()
dist.all_reduce(check)
assert check.cpu().eq(world).all()
dist.destroy_process_group()
print(f"RANK {rank} OK")
