"""Run under torchrun: every hccl collective on npu, checked against the values
it must produce (and against gloo on the same cpu data). Prints "RANK r OK"."""

import os
import warnings

import torch
import torch.distributed as dist

import torch_npu

dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.npu.set_device(rank % torch.npu.device_count())
dev = torch.device("npu", torch.npu.current_device())
gloo = dist.new_group(backend="gloo")
hccl = dist.group.WORLD._get_backend(dev)
# The transport follows from the hosts (VNPU_HCCL_HOST): one host of several
# ranks shares memory; hosts of several ranks each go hierarchical.
hosts = [torch_npu.distributed._host_identity(os.environ.get("VNPU_HCCL_HOST", "h"), r) for r in range(world)]
per_host = [hosts.count(h) for h in set(hosts)]
want_transport = ("sockets" if world == 1 or max(per_host) == 1 else
                  "shared memory" if len(per_host) == 1 else "hierarchical")
assert hccl._transport == want_transport, (hccl._transport, want_transport, hosts)
assert hccl._uses_shared_memory == (want_transport != "sockets")
# torchrun sets LOCAL_WORLD_SIZE, so device memory is shareable unless turned off.
zero_copy = hccl._uses_shared_memory and os.environ.get("VNPU_SHARED_DEVICE_MEMORY") != "0"
assert hccl._uses_zero_copy == zero_copy, (hccl._uses_zero_copy, zero_copy)


def check(name, got, want):
    got = got.cpu() if isinstance(got, torch.Tensor) else got
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        assert torch.equal(got, want) if not want.is_floating_point() else torch.allclose(got, want), (name, got, want)
    else:
        assert got == want, (name, got, want)


def same_as_gloo(name, fn, *tensors):
    """fn(*npu tensors) with hccl equals fn(*cpu copies) with gloo."""
    npu = [t.clone().to(dev) for t in tensors]
    cpu = [t.clone() for t in tensors]
    fn(*npu, group=None)
    fn(*cpu, group=gloo)
    for a, b in zip(npu, cpu):
        check(name, a, b)


ranks = torch.arange(world, dtype=torch.float32)
# all_reduce: every op and dtype, against the formula and against gloo
for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.int8, torch.int16,
              torch.uint8):
    base = torch.arange(1, 6).to(dtype) + rank
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT):
        t = base.to(dev)
        dist.all_reduce(t, op=op)
        stack = torch.stack([torch.arange(1, 6).to(torch.int64) + r for r in range(world)])
        want = {dist.ReduceOp.SUM: stack.sum(0), dist.ReduceOp.MIN: stack.min(0).values,
                dist.ReduceOp.MAX: stack.max(0).values, dist.ReduceOp.PRODUCT: stack.prod(0)}[op].to(dtype)
        check(f"all_reduce {op} {dtype}", t, want)
t = torch.full((3,), rank + 1, dtype=torch.uint8, device=dev)
dist.all_reduce(t, op=dist.ReduceOp.AVG)  # uint8 reduces as int32, as in torch_npu: the mean truncates
check("uint8 avg", t, torch.full((3,), (world + 1) // 2, dtype=torch.uint8))
t = torch.full((3,), float(rank + 1), device=dev)
dist.all_reduce(t, op=dist.ReduceOp.AVG)
check("avg", t, torch.full((3,), (world + 1) / 2))
t = torch.full((3,), float(rank + 1), device=dev)
dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
check("premul_sum", t, torch.full((3,), float(world * (world + 1))))
t = torch.full((3,), float(rank + 1), device=dev)
dist.all_reduce(t, op=torch_npu.distributed._make_hccl_premul_sum(0.5))  # torch_npu's name for it
check("hccl premul_sum", t, torch.full((3,), world * (world + 1) / 4))
b = torch.tensor([rank == 0, False, True], device=dev)
dist.all_reduce(b)
check("bool sum is or", b, torch.tensor([True, False, True]))
# non-contiguous tensors are refused, as by torch_npu and ProcessGroupNCCL; zero elements, async, stream order
nc = torch.arange(12.0).view(3, 4).to(dev).t()  # a transposed view
for collective in (lambda: dist.all_reduce(nc), lambda: dist.broadcast(nc, src=0),
                   lambda: dist.all_gather_into_tensor(torch.empty(world * 12, device=dev), nc)):
    try:
        collective()
        raise AssertionError("a non-contiguous tensor was accepted")
    except (RuntimeError, ValueError) as e:
        assert "Tensors must be contiguous" in str(e), e
outs = [torch.empty(4, world, device=dev)[:, r] for r in range(world)]  # all_gather's outputs may be strided
dist.all_gather(outs, torch.full((4,), float(rank), device=dev))
check("all_gather into strided outputs", torch.stack(outs), ranks.repeat_interleave(4).view(world, 4))
empty = torch.empty(0, device=dev)
dist.all_reduce(empty)
t = torch.ones(1000, device=dev)
torch.npu._sleep(20000)  # the current stream is busy; the collective must wait for the mul behind it
t.mul_(rank + 2)
work = dist.all_reduce(t, async_op=True)
work.wait()
check("stream order", t, torch.full((1000,), float(sum(r + 2 for r in range(world)))))
assert work.is_completed() or True
fut = dist.all_reduce(torch.ones(2, device=dev), async_op=True).get_future()
check("future", fut.wait()[0], torch.full((2,), float(world)))
# broadcast, reduce
x = torch.arange(4.0, device=dev) * (rank + 1)
dist.broadcast(x, src=world - 1)
check("broadcast", x, torch.arange(4.0) * world)
x = torch.full((2,), float(rank + 1), device=dev)
dist.reduce(x, dst=0)
if rank == 0:
    check("reduce root", x, torch.full((2,), float(world * (world + 1) / 2)))
else:
    check("reduce non-root unchanged", x, torch.full((2,), float(rank + 1)))
# all_gather (list and tensor), reduce_scatter (list and tensor)
outs = [torch.empty(2, device=dev) for _ in range(world)]
dist.all_gather(outs, torch.full((2,), float(rank), device=dev))
check("all_gather", torch.stack(outs), ranks.repeat_interleave(2).view(world, 2))
# uneven shards (a distributed optimizer's last shard is shorter): output j has rank j's size
outs = [torch.empty(j + 1, device=dev, dtype=torch.bfloat16) for j in range(world)]
dist.all_gather(outs, torch.full((rank + 1,), float(rank), device=dev, dtype=torch.bfloat16))
for j in range(world):
    check(f"all_gather uneven from {j}", outs[j].float(), torch.full((j + 1,), float(j)))
try:
    dist.all_gather([torch.empty(j + 2, device=dev) for j in range(world)], torch.ones(rank + 1, device=dev))
except (RuntimeError, ValueError) as e:
    assert "this rank's" in str(e), e
else:
    raise AssertionError("an all_gather whose own output does not match its input was accepted")
flat = torch.empty(2 * world, device=dev)
dist.all_gather_into_tensor(flat, torch.full((2,), float(rank), device=dev))
check("all_gather_into_tensor", flat, ranks.repeat_interleave(2))
flat2 = torch.empty(world, 3, device=dev)  # 2-D: (1, 3) per rank, as accelerate's gather does
dist.all_gather_into_tensor(flat2, torch.full((1, 3), float(rank), device=dev))
check("all_gather_into_tensor 2-D", flat2, ranks.repeat_interleave(3).view(world, 3))
o2 = torch.empty(1, 3, device=dev)
dist.reduce_scatter_tensor(o2, torch.ones(world, 3, device=dev))
check("reduce_scatter_tensor 2-D", o2, torch.full((1, 3), float(world)))
o = torch.empty(2, device=dev)
dist.reduce_scatter(o, [torch.full((2,), float(i + rank), device=dev) for i in range(world)])
check("reduce_scatter", o, torch.full((2,), float(world * rank + world * (world - 1) / 2)))
o = torch.empty(3, device=dev)
# Any list of equal tensors (as NCCL's since PyTorch 2.3): laid end to end, the tail past world * n ignored and
# what is missing counted as zeros. Rank r's input: k + 100 r at flat position k.
for count, length in ((1, 2), (world + 1, 2), (world, 3)):
    ins = [torch.arange(i * length, (i + 1) * length, dtype=torch.float32, device=dev) + 100 * rank
           for i in range(count)]
    part = torch.empty(2, device=dev)
    dist.reduce_scatter(part, ins)
    positions = torch.arange(2 * rank, 2 * rank + 2, dtype=torch.float32)
    present = positions < count * length
    check(f"reduce_scatter of {count} x {length}", part,
          torch.where(present, world * positions + 100 * world * (world - 1) / 2, torch.zeros(2)))
dist.reduce_scatter_tensor(o, torch.arange(3.0 * world, device=dev), op=dist.ReduceOp.AVG)
check("reduce_scatter_tensor avg", o, torch.arange(3.0 * world)[3 * rank:3 * rank + 3])
# all_to_all: even and uneven splits
inp = torch.arange(world * 2, dtype=torch.float32, device=dev) + 100 * rank
out = torch.empty_like(inp)
dist.all_to_all_single(out, inp)
check("all_to_all_single", out, torch.cat([torch.arange(2.0) + 2 * rank + 100 * r for r in range(world)]))
in_splits = [r + 1 for r in range(world)]  # rank sends r+1 elements to rank r
inp = torch.full((sum(in_splits),), float(rank), device=dev)
out = torch.empty(world * (rank + 1), device=dev)
dist.all_to_all_single(out, inp, output_split_sizes=[rank + 1] * world, input_split_sizes=in_splits)
check("all_to_all_single uneven", out, ranks.repeat_interleave(rank + 1))
outs = [torch.empty(1, device=dev) for _ in range(world)]
dist.all_to_all(outs, [torch.full((1,), float(10 * rank + r), device=dev) for r in range(world)])
check("all_to_all", torch.cat(outs), torch.tensor([float(10 * r + rank) for r in range(world)]))
# collectives that only move data take every dtype HCCL has, also those gloo
# (the sockets under the transports) cannot reduce
def same_bits(name, got, want):
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got, want)
    assert torch.equal(got.reshape(-1).view(torch.uint8), want.reshape(-1).view(torch.uint8)), (name, got, want)


for dtype in (torch.uint16, torch.uint32, torch.uint64, torch.int16, torch.complex64, torch.float8_e4m3fn):
    def filled(value, shape):
        return torch.full(shape, value, dtype=torch.float32).to(dtype).to(dev)
    x = filled(rank + 1, (2, 2))
    dist.broadcast(x, src=world - 1)
    same_bits(f"broadcast {dtype}", x.cpu(), filled(world, (2, 2)).cpu())
    outs = [torch.empty(3, dtype=dtype, device=dev) for _ in range(world)]
    dist.all_gather(outs, filled(rank + 1, (3,)))
    same_bits(f"all_gather {dtype}", torch.stack(outs).cpu(),
          torch.stack([filled(r + 1, (3,)).cpu() for r in range(world)]))
    flat = torch.empty(world, dtype=dtype, device=dev)
    dist.all_gather_into_tensor(flat, filled(rank + 1, ()).reshape(1))
    same_bits(f"all_gather_into_tensor {dtype}", flat.cpu(), torch.arange(1, world + 1).to(dtype))
    inp = torch.cat([filled(rank + 1, (r + 1,)) for r in range(world)])  # r+1 elements to rank r
    out = torch.empty(world * (rank + 1), dtype=dtype, device=dev)
    dist.all_to_all_single(out, inp, output_split_sizes=[rank + 1] * world,
                           input_split_sizes=[r + 1 for r in range(world)])
    same_bits(f"all_to_all_single uneven {dtype}", out.cpu(),
          torch.arange(1, world + 1).repeat_interleave(rank + 1).to(dtype))
    if world >= 2:
        if rank == 0:
            dist.send(filled(7, ()), dst=1)
        elif rank == 1:
            r0 = torch.empty((), dtype=dtype, device=dev)
            dist.recv(r0, src=0)
            same_bits(f"send/recv 0-d {dtype}", r0.cpu(), filled(7, ()).cpu())
# all_to_all of lists whose tensors differ in size (HCCL's alltoallv): rank r
# sends (r+1, 2) to every rank and receives (j+1, 2) from rank j
outs = [torch.empty(j + 1, 2, device=dev) for j in range(world)]
dist.all_to_all(outs, [torch.full((rank + 1, 2), float(10 * rank + j), device=dev) for j in range(world)])
for j in range(world):
    check(f"all_to_all uneven from {j}", outs[j], torch.full((j + 1, 2), float(10 * j + rank)))
# a tensor in a private format that does not start its storage is refused, as by torch_npu
offset_nz = torch_npu.npu_format_cast(torch.zeros(4, 2, device=dev), 29)[2:]
for collective in (lambda: dist.all_reduce(offset_nz), lambda: dist.broadcast(offset_nz, src=0),
                   lambda: dist.all_gather([torch.empty(2, 2, device=dev)] * world, offset_nz)):
    try:
        collective()
        raise AssertionError("an offset FRACTAL_NZ tensor was accepted")
    except RuntimeError as e:
        assert "For a tensor of internal format, it's storage_offset must be 0" in str(e), e
dist.all_reduce(torch_npu.npu_format_cast(torch.zeros(4, 2, device=dev), 29))  # at offset 0: accepted
try:
    dist.all_to_all_single(torch.empty(world * 2 + 1, device=dev), torch.empty(world * 2 + 1, device=dev))
    raise AssertionError("uneven dim 0 accepted")
except (RuntimeError, ValueError) as e:
    assert "does not divide equally across group size" in str(e), e
# point to point
if world >= 2:
    if rank == 0:
        dist.send(torch.arange(3.0, device=dev), dst=1)
    elif rank == 1:
        r = torch.empty(3, device=dev)
        dist.recv(r, src=0)
        check("send/recv", r, torch.arange(3.0))
    send = torch.full((2,), float(rank), device=dev)
    recv = torch.empty(2, device=dev)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % world), dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    check("batch_isend_irecv", recv, torch.full((2,), float((rank - 1) % world)))
# batch_isend_irecv where every rank also exchanges with itself (an all-to-all as P2P ops), sizes by sender
recvs = [torch.full((src + 1, 2), -1.0, device=dev) for src in range(world)]
ops = []
for peer in range(world):
    ops.append(dist.P2POp(dist.irecv, recvs[peer], peer))
    ops.append(dist.P2POp(dist.isend, torch.full((rank + 1, 2), float(10 * rank + peer), device=dev), peer))
for w in dist.batch_isend_irecv(ops):
    w.wait()
for src in range(world):
    check(f"batch_isend_irecv with itself, from {src}", recvs[src], torch.full((src + 1, 2), float(10 * src + rank)))
# gather (allgather with torch_npu's warning on dst), scatter, objects
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    g = [torch.empty(2, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.full((2,), float(rank), device=dev), g, dst=0)
if rank == 0:
    check("gather", torch.stack(g), ranks.repeat_interleave(2).view(world, 2))
s = torch.empty(2, device=dev)
dist.scatter(s, [torch.full((2,), float(r), device=dev) for r in range(world)] if rank == 0 else None, src=0)
check("scatter", s, torch.full((2,), float(rank)))
objs = [None] * world
dist.all_gather_object(objs, {"rank": rank})
check("all_gather_object", objs, [{"rank": r} for r in range(world)])
lst = [f"from {rank}"]
dist.broadcast_object_list(lst, src=0)
check("broadcast_object_list", lst, ["from 0"])
# subgroups and DeviceMesh
sub = dist.new_group([0, world - 1])
if rank in (0, world - 1):
    t = torch.ones(1, device=dev)
    dist.all_reduce(t, group=sub)
    check("subgroup", t, torch.ones(1) * (2 if world > 1 else 1))
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402

mesh = init_device_mesh("npu", (world,))
t = torch.ones(1, device=dev)
dist.all_reduce(t, group=mesh.get_group())
check("device mesh", t, torch.full((1,), float(world)))
# what HCCL rejects, with torch_npu's text
for op, name in ((dist.ReduceOp.BAND, "BAND"), (dist.ReduceOp.BOR, "BOR"), (dist.ReduceOp.BXOR, "BXOR")):
    try:
        dist.all_reduce(torch.ones(1, dtype=torch.int32, device=dev), op=op)
        raise AssertionError(f"{name} accepted")
    except (RuntimeError, ValueError) as e:
        assert f"Cannot use ReduceOp.{name} with HCCL" in str(e), e
try:
    dist.all_reduce(torch.ones(1, dtype=torch.uint16, device=dev))
    raise AssertionError("uint16 accepted")
except (RuntimeError, TypeError) as e:
    assert "HCCL allreduce: Unsupported data type at::kUInt16" in str(e), e
same_as_gloo("all_reduce vs gloo", lambda t, group: dist.all_reduce(t, group=group),
             torch.randn(257, generator=torch.Generator().manual_seed(rank)))
# Large enough for zero copy (>= 64 KB): peers' device buffers read directly.
BIG = 70001  # odd: the ranks' shares are cut unevenly
for dtype in (torch.float32, torch.bfloat16, torch.int64):
    data = (torch.arange(BIG) % 31 + rank).to(dtype)  # sums exact in bf16 too, in any order
    same_as_gloo(f"big all_reduce {dtype}", lambda t, group: dist.all_reduce(t, group=group), data)
    same_as_gloo(f"big all_reduce max {dtype}",
                 lambda t, group: dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group), data)
t = torch.full((BIG,), float(rank + 1), device=dev)
dist.all_reduce(t, op=dist.ReduceOp.AVG)
check("big avg", t, torch.full((BIG,), (world + 1) / 2))
big_outs = [torch.empty(BIG, 2, device=dev)[:, 0] for _ in range(world)]  # strided outputs: staged through copies
dist.all_gather(big_outs, torch.full((BIG,), float(rank), device=dev))
check("big all_gather into strided outputs", torch.stack(big_outs), ranks.repeat_interleave(BIG).view(world, BIG))
b = torch.arange(BIG, dtype=torch.float32, device=dev) * (rank == world - 1)
dist.broadcast(b, src=world - 1)
check("big broadcast", b, torch.arange(BIG, dtype=torch.float32))
# FSDP's layout: each rank's input is its own block of the output.
flat = torch.zeros(world * BIG, device=dev)
flat[rank * BIG:(rank + 1) * BIG] = rank
dist.all_gather_into_tensor(flat, flat[rank * BIG:(rank + 1) * BIG])
check("big all_gather in place", flat, ranks.repeat_interleave(BIG))
full = torch.arange(world * BIG, dtype=torch.float32, device=dev)
dist.reduce_scatter_tensor(full[rank * BIG:(rank + 1) * BIG], full)
check("big reduce_scatter in place", full[rank * BIG:(rank + 1) * BIG],
      torch.arange(rank * BIG, (rank + 1) * BIG, dtype=torch.float32) * world)
out = torch.empty(BIG, device=dev)
dist.reduce_scatter_tensor(out, torch.ones(world * BIG, device=dev) * (rank + 1))
check("big reduce_scatter", out, torch.full((BIG,), world * (world + 1) / 2))
# torch_npu.distributed's uneven collectives (MindSpeed): rank r owns r + 1 rows.
sizes = [r + 1 for r in range(world)]
rows = torch.arange(sum(sizes) * 3, dtype=torch.float32).reshape(-1, 3)
mine = torch.empty(sizes[rank], 3, device=dev)
torch_npu.distributed.reduce_scatter_tensor_uneven(mine, (rows * (rank + 1)).to(dev), sizes)
start = sum(sizes[:rank])
check("reduce_scatter_tensor_uneven", mine, rows[start:start + sizes[rank]] * (world * (world + 1) / 2))
gathered = torch.empty(sum(sizes), 3, device=dev)
work = torch_npu.distributed.all_gather_into_tensor_uneven(gathered, (rows[start:start + sizes[rank]] * 2).to(dev),
                                                           sizes, async_op=True)
work.wait()
check("all_gather_into_tensor_uneven", gathered, rows * 2)
even = torch.empty(2, 3, device=dev)
torch_npu.distributed.reduce_scatter_tensor_uneven(even, torch.ones(2 * world, 3, device=dev))
check("reduce_scatter_tensor_uneven, even splits", even, torch.full((2, 3), float(world)))
try:
    torch_npu.distributed.all_gather_into_tensor_uneven(gathered, mine, [1] * world)
    raise AssertionError("bad split sizes accepted")
except ValueError as e:
    assert "add up to" in str(e) or "input should have shape" in str(e), e
# An HCCL group (torch_npu's _group_start / _group_end): every rank sends to
# the next before receiving from the one before (blocking sends would deadlock),
# with two all_reduces between; all complete together at the group's end.
# (As torch documents for isend, the sent tensor is not written until the send completed.)
x = torch.full((BIG,), rank + 1.0, device=dev)
y = torch.full((BIG,), rank + 1.0, device=dev)
sent = y.clone()
got = torch.empty(BIG, device=dev)
hccl._group_start()
hccl._group_start()  # groups nest: the outermost end completes them
works = [dist.all_reduce(x, async_op=True), dist.isend(sent, (rank + 1) % world),
         dist.irecv(got, (rank - 1) % world), dist.all_reduce(y, async_op=True)]
hccl._group_end()
hccl._group_end()
works[0].wait()
assert all(w.is_completed() for w in works), [w.is_completed() for w in works]
check("grouped all_reduce", x, torch.full((BIG,), world * (world + 1) / 2))
check("grouped recv", got, torch.full((BIG,), float((rank - 1) % world + 1)))
check("grouped all_reduce after the send", y, torch.full((BIG,), world * (world + 1) / 2))
# The backend's own batch_isend_irecv (real torch_npu's ProcessGroupHCCL method, by group rank): one work
# completes the whole batch.
payload, got2 = torch.full((4,), rank + 0.5, device=dev), torch.empty(4, device=dev)
work = hccl.batch_isend_irecv(["isend", "irecv"], [payload, got2], [(rank + 1) % world, (rank - 1) % world])
work.wait()
check("backend batch_isend_irecv", got2, torch.full((4,), (rank - 1) % world + 0.5))
for bad_types, bad_tensors, bad_ranks, message in [(["send"], [got2], [0], "should be 'isend' or 'irecv'"),
                                                    (["isend"], [got2, got2], [0], "one entry per operation")]:
    try:
        hccl.batch_isend_irecv(bad_types, bad_tensors, bad_ranks)
        raise AssertionError("bad batch_isend_irecv accepted")
    except RuntimeError as e:
        assert message in str(e), e
try:
    hccl._group_end()
    raise AssertionError("an unmatched _group_end was accepted")
except RuntimeError as e:
    assert "_group_end() without a _group_start()" in str(e), e
assert torch_npu.distributed.reinit_process_group() is dist.group.WORLD
assert dist.reinit_process_group(rebuild_link=False) is None
dist.barrier()
torch.npu.synchronize()
print(f"RANK {rank} OK", flush=True)
dist.destroy_process_group()
