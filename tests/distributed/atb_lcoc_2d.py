"""Run under torchrun with 4 ranks (tests/test_atb.py): ATB's 2-D tensor-parallel
LinearParallelParam (ALL_GATHER_LINEAR_REDUCE_SCATTER, MindSpeed's tp_2d
all_gather_matmul_reduce_scatter) through tests/cpp_extensions/atb_extension.cpp
(its folder in VNPU_ATB_EXT_DIR), for each grid shape and both orders of its
dimensions, against the formula over every rank's inputs. Communication
domain 0 of 4 ranks is the world group. Each rank prints "RANK r OK"."""

import os
import sys

import torch
import torch.distributed as dist

import torch_npu  # noqa: F401

sys.path.insert(0, os.environ["VNPU_ATB_EXT_DIR"])
import vnpu_atb_ext as ext  # noqa: E402

dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.npu.set_device(rank)
assert world == 4, world

xs = [torch.randn(4, 8, generator=torch.Generator().manual_seed(r)) for r in range(world)]
ws = [torch.randn(5, 8, generator=torch.Generator().manual_seed(50 + r)) for r in range(world)]  # (n, k) shards
bias = torch.randn(5, generator=torch.Generator().manual_seed(98))


def grid_lines(r, ag, rs, inner_ag):
    """The ranks r gathers with, those it reduces with, and its place among the latter."""
    if inner_ag:  # consecutive ranks gather
        return [(r // ag) * ag + i for i in range(ag)], [j * ag + r % ag for j in range(rs)], r // ag
    return [i * rs + r % rs for i in range(ag)], [(r // rs) * rs + j for j in range(rs)], r % rs


for ag, rs, inner_ag in ((2, 2, True), (2, 2, False), (4, 1, True), (1, 4, False)):
    def product(q):
        gathered, _, _ = grid_lines(q, ag, rs, inner_ag)
        return torch.cat([xs[a] for a in gathered]) @ ws[q].t()
    _, reduced, place = grid_lines(rank, ag, rs, inner_ag)
    expected = sum(product(q) for q in reduced).chunk(rs)[place] + bias
    y = ext.linear_parallel_2d(xs[rank].npu(), ws[rank].npu(), bias.npu(), rank, ag, rs, inner_ag, "0")
    torch.testing.assert_close(y.cpu(), expected, msg=f"ag {ag} rs {rs} inner_ag {inner_ag}")

# a grid that does not cover the ranks is refused at Setup
try:
    ext.linear_parallel_2d(xs[rank].npu(), ws[rank].npu(), None, rank, 2, 1, True, "0")
    raise AssertionError("a 2 x 1 grid over 4 ranks was accepted")
except RuntimeError as e:
    assert "returned" in str(e), e
check = torch.ones(2).npu()
dist.all_reduce(check)
assert check.cpu().eq(world).all()
dist.destroy_process_group()
print(f"RANK {rank} OK")
