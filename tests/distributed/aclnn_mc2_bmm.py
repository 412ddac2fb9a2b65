"""Run under torchrun with 4 ranks (tests/test_aclnn.py): MindSpeed-style calls
of the expert-parallel mc2 pair, aclnnAlltoAllAllGatherBatchMatMul and
aclnnBatchMatMulReduceScatterAlltoAll, through the extension
tests/cpp_extensions/aclnn_extension.cpp (its folder in VNPU_ACLNN_EXT_DIR).

Ranks form a 2 x 2 grid: tensor-parallel groups {0, 1} and {2, 3}, expert-
parallel groups {0, 2} and {1, 3}. Every rank knows every rank's inputs (seeded
by rank), so it checks its outputs against the layouts written out on cpu in
float32: all-to-all (expert block / C block r to ep rank r), all-gather or
reduce-scatter over tp (along H, or along C with tp outer). A collective on
each group before and after the operators must still pair up. Each rank
prints "RANK r OK"."""

import os
import sys

import torch
import torch.distributed as dist

import torch_npu

sys.path.insert(0, os.environ["VNPU_ACLNN_EXT_DIR"])
import vnpu_aclnn_ext as ext  # noqa: E402

dist.init_process_group("hccl")
rank = dist.get_rank()
torch.npu.set_device(rank)
EP = TP = 2
tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
ep_groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
tp_index, ep_index = rank % 2, rank // 2  # this rank's place in its tp group and in its ep group
tp_group, ep_group = tp_groups[ep_index], ep_groups[tp_index]
tp_ranks = [2 * ep_index + t for t in range(TP)]  # global ranks of my tp group, by tp index
ep_ranks = [2 * e + tp_index for e in range(EP)]  # global ranks of my ep group, by ep index


def comm_name(group):
    return group._get_backend(torch.device("npu")).get_hccl_comm_name(rank)


ep_name, tp_name = comm_name(ep_group), comm_name(tp_group)
E, C, H, M = 4, 6, 8, 10  # experts, tokens per expert, hidden, ffn (before tp sharding)
experts = E // EP


def seeded(r, *shape, salt=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(100 * r + salt))


def pair_up(groups):
    """A collective on each group: the ranks' turns must still pair up."""
    for g in groups:
        t = torch.full((3,), float(rank), device="npu")
        dist.all_reduce(t, group=g)
        members = dist.get_process_group_ranks(g)
        assert torch.equal(t.cpu(), torch.full((3,), float(sum(members)))), (t, members)


def alltoall_allgather_expected(xs, w, bias, shard):
    """y for this rank from every rank's x (E, C, H/tp) or (E, C/tp, H)."""
    def local(r):  # what rank r holds after the all-to-all over its ep group
        e = r // 2
        sources = [2 * j + r % 2 for j in range(EP)]
        return torch.cat([xs[s][e * experts:(e + 1) * experts] for s in sources], 1)
    parts = [local(r) for r in tp_ranks]
    if shard == 0:  # side by side along H
        full = torch.cat(parts, 2)
    else:  # along C as (ep, tp, C/tp): ep outer, tp inner
        stacked = torch.stack(parts)  # (tp, E/ep, ep * C/tp, H)
        full = stacked.view(TP, experts, EP, -1, H).permute(1, 2, 0, 3, 4).reshape(experts, -1, H)
    return full, full @ w + (0 if bias is None else bias)


def reducescatter_alltoall_expected(products, biases, shard):
    """out for this rank from every rank's x @ w (E/ep, rows, H) and bias: each rank adds its own
    bias to what it holds after the reduce-scatter."""
    def held(r):  # rank r after the reduce-scatter over its tp group, + its bias
        t, group = r % 2, [2 * (r // 2) + i for i in range(TP)]
        total = sum(products[g] for g in group)
        if shard == 0:
            width = total.shape[2] // TP
            part = total[:, :, t * width:(t + 1) * width]
        else:  # rows as (ep, tp, C/tp): tp rank t gets [:, :, t]
            part = total.view(experts, EP, TP, -1, total.shape[2])[:, :, t].reshape(experts, -1, total.shape[2])
        return part + biases[r]
    blocks = []
    for r in ep_ranks:  # my C block of each ep rank's result, stacked along E in ep order
        part = held(r)
        c = part.shape[1] // EP
        blocks.append(part[:, ep_index * c:(ep_index + 1) * c])
    return torch.cat(blocks, 0)


pair_up([tp_group, ep_group])
for dtype in (torch.bfloat16, torch.float16):
    bias_dtype = torch.float32 if dtype == torch.bfloat16 else torch.float16
    for shard, (act, activation) in ((0, (2, torch.nn.functional.silu)), (1, (1, torch.nn.functional.gelu))):
        # npu_alltoall_allgather_bmm: x (E, C, H/tp) or (E, C/tp, H); weight (E/ep, H, M/tp)
        x_shape = (E, C, H // TP) if shard == 0 else (E, C // TP, H)
        xs = [seeded(r, *x_shape).to(dtype) for r in range(4)]
        w = seeded(rank, experts, H, M // TP, salt=1).to(dtype)
        bias = seeded(rank, experts, M // TP, salt=2).to(bias_dtype)
        y1, y2, y3 = ext.alltoall_allgather_bmm(xs[rank].npu(), w.npu(), bias.npu(), ep_name, EP, tp_name, TP,
                                                shard, act, True, True)
        full, product = alltoall_allgather_expected([x.float() for x in xs], w.float(), bias.float().unsqueeze(1),
                                                    shard)
        assert torch.equal(y2.cpu(), full.to(dtype))  # the collectives move x's values unchanged
        torch.testing.assert_close(y3.cpu(), product.to(dtype))
        torch.testing.assert_close(y1.cpu(), activation(product).to(dtype))

        # npu_bmm_reducescatter_alltoall: x (E/ep, ep*C, M/tp) or (E/ep, ep*tp*C/tp, M/tp); weight (E/ep, M/tp, H)
        rows = EP * C
        xs = [seeded(r, experts, rows, M // TP, salt=3).to(dtype) for r in range(4)]
        ws = [seeded(r, experts, M // TP, H, salt=4).to(dtype) for r in range(4)]
        out_h = H // TP if shard == 0 else H
        biases = [seeded(r, experts, 1, out_h, salt=5).to(bias_dtype) for r in range(4)]
        out = ext.bmm_reducescatter_alltoall(xs[rank].npu(), ws[rank].npu(), biases[rank].npu(), ep_name, EP,
                                             tp_name, TP, shard)
        # each rank's product is rounded to x's dtype before the tp ranks' sum, as the kernel does
        products = [(xs[r].float() @ ws[r].float()).to(dtype).float() for r in range(4)]
        want = reducescatter_alltoall_expected(products, [b.float() for b in biases], shard)
        assert out.shape == want.shape == (E, C if shard == 0 else C // TP, out_h), (out.shape, want.shape)
        torch.testing.assert_close(out.cpu(), want.to(dtype))
pair_up([ep_group, tp_group])

# bad input: nothing is taken from the groups, so the collectives after still pair up
x = torch.randn(E, C, H // TP, dtype=torch.bfloat16, device="npu")
w = torch.randn(experts, H, M // TP, dtype=torch.bfloat16, device="npu")
for args, message in [((x, w, None, ep_name, EP, ep_name, TP, 0, 0), "must be different groups"),
                      ((torch.cat([x, x]), w, None, ep_name, 4, tp_name, TP, 0, 0), "epWorldSize is 4 but group"),
                      ((x, w, None, ep_name, EP, tp_name, TP, 0, 5), "actType must be 0"),
                      ((x, w, None, ep_name, EP, tp_name, TP, 2, 0), "xShardType must be 0"),
                      ((x, w[:, :5], None, ep_name, EP, tp_name, TP, 0, 0), "weight's K 5"),
                      ((x, w, torch.zeros(experts, 3, device="npu"), ep_name, EP, tp_name, TP, 0, 0),
                       "biasOptional must be"),
                      ((x, w, None, "no such group", EP, tp_name, TP, 0, 0), "no such group")]:
    try:
        ext.alltoall_allgather_bmm(*args, False, False)
    except RuntimeError as e:
        assert message in str(e), (message, str(e))
    else:
        raise AssertionError(f"no error for {message}")
pair_up([tp_group, ep_group])
torch_npu.npu.synchronize()
print(f"RANK {rank} OK", flush=True)
dist.destroy_process_group()
