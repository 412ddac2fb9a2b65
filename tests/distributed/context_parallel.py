"""Run under torchrun (tests/test_dtensor_npu_ops.py): torch's context parallelism
on npu. Each rank holds the whole q, k, v; context_parallel shards them on the
sequence dimension, F.scaled_dot_product_attention runs the ring attention over
npu kernels (torch_npu.distributed.tensor.experimental._context_parallel), and the
unsharded output and gradients must equal the whole attention on one rank, with
the blocks merged by torch_npu.npu_ring_attention_update. Then DTensor SDPA with
heads or batch sharded, and an attention mask under context parallelism (refused).
Each rank prints "RANK r OK"."""

import itertools

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

import torch_npu
from torch_npu.distributed.tensor.experimental._context_parallel import (
    _cp_options,
    _RotateMethod,
    context_parallel,
    context_parallel_unshard,
    set_rotate_method,
)

dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.npu.set_device(rank)
mesh = init_device_mesh("npu", (world,))

merges = 0
ring_update = torch_npu.npu_ring_attention_update


def counted(*args, **kwargs):
    global merges
    merges += 1
    return ring_update(*args, **kwargs)


torch_npu.npu_ring_attention_update = counted

TOLERANCE = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
for is_causal, load_balance, rotate, dtype in itertools.product((True, False), (False, True), ("alltoall", "allgather"),
                                                                (torch.float32, torch.bfloat16)):
    if load_balance and not is_causal:
        continue  # torch's load balancing is for causal masks
    set_rotate_method(rotate)
    assert _cp_options.rotate_method == (_RotateMethod.ALL_TO_ALL if rotate == "alltoall" else _RotateMethod.ALL_GATHER)
    _cp_options.enable_load_balance = load_balance
    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, 4, 16 * world, 8, generator=gen).to(dtype).npu().requires_grad_() for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    out.sum().backward()

    cq, ck, cv = (t.detach().clone() for t in (q, k, v))
    merges = 0
    with context_parallel(mesh, buffers=(cq, ck, cv), buffer_seq_dims=(2, 2, 2)):
        assert cq.shape[2] == 16, cq.shape  # sharded in place
        for t in (cq, ck, cv):
            t.requires_grad_()
        cp_out = F.scaled_dot_product_attention(cq, ck, cv, is_causal=is_causal)
        cp_out.sum().backward()
        grads = [t.grad for t in (cq, ck, cv)]
        for t in (cq, ck, cv):
            t.requires_grad_(False)  # the context restores the whole buffers when it ends
    count = torch.tensor([merges]).npu()
    dist.all_reduce(count)  # with a causal mask the first rank attends to its own block only
    assert count.item() > 0, "the ring merged no blocks with npu_ring_attention_update"
    full = context_parallel_unshard(mesh, [cp_out.detach(), *grads], [2, 2, 2, 2])
    case = f"causal={is_causal} load_balance={load_balance} rotate={rotate} {dtype}"
    for name, mine, ref in zip(("out", "dq", "dk", "dv"), full, (out, q.grad, k.grad, v.grad)):
        torch.testing.assert_close(mine.float(), ref.float(), **TOLERANCE[dtype], msg=lambda m: f"{case} {name}: {m}")

# without context parallelism: DTensor SDPA on npu with heads or batch sharded (torch_npu's _sdpa_rules)
for placement in (Shard(1), Shard(0)):
    gen = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(2, 4, 12, 8, generator=gen).npu().requires_grad_() for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.backward(torch.ones_like(out))
    dq, dk, dv = (distribute_tensor(t.detach(), mesh, [placement]).requires_grad_() for t in (q, k, v))
    dout = F.scaled_dot_product_attention(dq, dk, dv, is_causal=True)
    assert dout.placements == (placement,), dout.placements
    dout.backward(torch.ones_like(dout))
    torch.testing.assert_close(dout.full_tensor(), out)
    for mine, ref in zip((dq, dk, dv), (q, k, v)):
        torch.testing.assert_close(mine.grad.full_tensor(), ref.grad)

# an attention mask is refused, naming what to use
_cp_options.enable_load_balance = False
q = torch.randn(1, 2, 8 * world, 4).npu()
mask = torch.ones(1, 1, 8 * world, 8 * world, dtype=torch.bool).tril().npu()
try:
    with context_parallel(mesh, buffers=(q,), buffer_seq_dims=(2,)):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    raise AssertionError("an attn_mask was accepted")
except RuntimeError as e:
    assert "context parallel attention on npu takes no attn_mask (use is_causal)" in str(e), e

dist.destroy_process_group()
print(f"RANK {rank} OK")
