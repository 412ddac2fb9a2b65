"""Run under torchrun with 2 ranks: npu fused operators on DTensors (torch_npu/distributed/tensor/_sharding.py).

Each operator runs on DTensors of every placement the real tests use and is
compared with the same operator on the whole tensors, forward and backward
(the gradients of replicated weights are partial sums). Prints "RANK r OK"."""

import itertools
import os

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor, init_device_mesh

import torch_npu

rank = int(os.environ["RANK"])
dist.init_process_group("hccl")
torch.npu.set_device(rank)
mesh = init_device_mesh("npu", (2,))
torch.manual_seed(0)
PLACEMENTS = [Shard(0), Shard(1), Shard(2), Replicate()]
failures = []


def dt(t, placement, m=mesh):
    return distribute_tensor(t.detach().requires_grad_(t.requires_grad), m, [placement] * m.ndim)


def same(a, b):
    a = a.full_tensor() if isinstance(a, DTensor) else a
    return torch.allclose(a, b, atol=1e-4, rtol=1e-4)


def expect(name, ok):
    if not ok:
        failures.append(name)


def backward(out, grad):
    out.backward(distribute_tensor(grad, out.device_mesh, out.placements))


# --- npu_fusion_attention, every layout and placement, forward and backward
B, N, S, Dh = 4, 8, 16, 16
for layout, shape in [("BNSD", (B, N, S, Dh)), ("BSND", (B, S, N, Dh)), ("BSH", (B, S, N * Dh))]:
    q, k, v = (torch.randn(shape, device="npu", requires_grad=True) for _ in range(3))
    ref = torch_npu.npu_fusion_attention(q, k, v, N, layout, scale=0.125)
    grad = torch.randn_like(ref[0])
    ref[0].backward(grad)
    for p in PLACEMENTS + ([Shard(3)] if len(shape) == 4 else []):
        dq, dk, dv = dt(q, p), dt(k, p), dt(v, p)
        out = torch_npu.npu_fusion_attention(dq, dk, dv, N, layout, scale=0.125)
        backward(out[0], grad)
        expect(f"attention {layout} {p}", all(same(o, r) for o, r in zip(out[:3], ref[:3]))
               and same(dq.grad, q.grad) and same(dk.grad, k.grad) and same(dv.grad, v.grad))
    # sharded by batch or head, the output stays sharded: no gather
    out = torch_npu.npu_fusion_attention(dt(q, Shard(0)), dt(k, Shard(0)), dt(v, Shard(0)), N, layout, scale=0.125)
    expect(f"attention {layout} keeps the batch sharding", out[0].placements == (Shard(0),))

# v2 and v3 shard the same way (v3's seed and offset are replicated tensors)
q, k, v = (torch.randn(B, S, N * Dh, device="npu") for _ in range(3))
for op in (torch_npu.npu_fusion_attention_v2, torch_npu.npu_fusion_attention_v3):
    ref = op(q, k, v, N, "BSH", scale=0.125)
    out = op(dt(q, Shard(2)), dt(k, Shard(2)), dt(v, Shard(2)), N, "BSH", scale=0.125)
    expect(f"{op.__name__} by head", out[0].placements == (Shard(2),) and same(out[0], ref[0])
           and same(out[1], ref[1]))

# a 4-d mask follows the batch sharding; the gradient operator called directly
q, k, v = (torch.randn(B, N, S, Dh, device="npu") for _ in range(3))
mask = torch.rand(B, 1, S, S, device="npu") > 0.7
ref = torch_npu.npu_fusion_attention(q, k, v, N, "BNSD", atten_mask=mask, scale=0.125)
out = torch_npu.npu_fusion_attention(dt(q, Shard(0)), dt(k, Shard(0)), dt(v, Shard(0)), N, "BNSD",
                                     atten_mask=dt(mask, Shard(0)), scale=0.125)
expect("attention with a mask", out[0].placements == (Shard(0),) and same(out[0], ref[0]))
dy = torch.randn_like(ref[0])
ref_grads = torch_npu.npu_fusion_attention_grad(q, k, v, dy, N, "BNSD", softmax_max=ref[1], softmax_sum=ref[2],
                                                attention_in=ref[0], scale_value=0.125)
grads = torch_npu.npu_fusion_attention_grad(dt(q, Shard(1)), dt(k, Shard(1)), dt(v, Shard(1)), dt(dy, Shard(1)), N,
                                            "BNSD", softmax_max=dt(ref[1], Shard(1)),
                                            softmax_sum=dt(ref[2], Shard(1)), attention_in=dt(ref[0], Shard(1)),
                                            scale_value=0.125)
expect("attention grad by head", grads[0].placements == (Shard(1),)
       and all(same(g, r) for g, r in zip(grads[:3], ref_grads[:3])))

# --- RMS norm, rotary embedding, SwiGLU: forward and backward
x = torch.randn(4, 8, 16, device="npu", requires_grad=True)
gamma = torch.randn(16, device="npu", requires_grad=True)
y, rstd = torch_npu.npu_rms_norm(x, gamma)
gy = torch.randn_like(y)
y.backward(gy)
for p in PLACEMENTS:
    dx, dg = dt(x, p), dt(gamma, Replicate())
    dy, drstd = torch_npu.npu_rms_norm(dx, dg)
    backward(dy, gy)
    expect(f"rms_norm {p}", same(dy, y) and same(drstd, rstd) and same(dx.grad, x.grad) and same(dg.grad, gamma.grad))

x1, x2 = torch.randn(4, 8, 16, device="npu"), torch.randn(4, 8, 16, device="npu")
ref = torch_npu.npu_add_rms_norm(x1, x2, gamma.detach())
for p in PLACEMENTS:
    out = torch_npu.npu_add_rms_norm(dt(x1, p), dt(x2, p), dt(gamma.detach(), Replicate()))
    expect(f"add_rms_norm {p}", all(same(o, r) for o, r in zip(out, ref)))

for table_shape in [(1, 1, 8, 16), (2, 1, 8, 16), (2, 4, 8, 16)]:
    x = torch.randn(2, 4, 8, 16, device="npu", requires_grad=True)
    r1, r2 = (torch.randn(table_shape, device="npu", requires_grad=True) for _ in range(2))
    y = torch_npu.npu_rotary_mul(x, r1, r2)
    gy = torch.randn_like(y)
    y.backward(gy)
    for p in PLACEMENTS:
        tp = Replicate() if isinstance(p, Shard) and table_shape[p.dim] == 1 else p
        dx, d1, d2 = dt(x, p), dt(r1, tp), dt(r2, tp)
        dy = torch_npu.npu_rotary_mul(dx, d1, d2)
        backward(dy, gy)
        expect(f"rotary_mul {table_shape} {p}", same(dy, y) and same(dx.grad, x.grad) and same(d1.grad, r1.grad)
               and same(d2.grad, r2.grad))

x = torch.randn(4, 8, 16, device="npu", requires_grad=True)
y = torch_npu.npu_swiglu(x)
gy = torch.randn_like(y)
y.backward(gy)
for p in PLACEMENTS:
    dx = dt(x, p)
    dy = torch_npu.npu_swiglu(dx)
    backward(dy, gy)
    # sharded anywhere but the gated (last) dimension, the output keeps the sharding
    expect(f"swiglu {p}", same(dy, y) and same(dx.grad, x.grad) and (dy.placements == dx.placements) == (p != Shard(2)))

# --- npu_conv2d by batch and by output channel
x = torch.randn(4, 3, 8, 8, device="npu", requires_grad=True)
w = torch.randn(6, 3, 3, 3, device="npu", requires_grad=True)
b = torch.randn(6, device="npu", requires_grad=True)
y = torch_npu.npu_conv2d(x, w, b, [1, 1], [0, 0], [1, 1], 1)
gy = torch.randn_like(y)
y.backward(gy)
for px, pw in [(Shard(0), Replicate()), (Replicate(), Shard(0)), (Replicate(), Replicate()), (Shard(1), Replicate())]:
    dx, dw, db = dt(x, px), dt(w, pw), dt(b, pw)
    dy = torch_npu.npu_conv2d(dx, dw, db, [1, 1], [0, 0], [1, 1], 1)
    backward(dy, gy)
    expect(f"conv2d {px} {pw}", same(dy, y) and same(dx.grad, x.grad) and same(dw.grad, w.grad)
           and same(db.grad, b.grad))

x = torch.randn(4, 4, 8, 8, device="npu")
w = torch.randn(6, 4, 3, 3, device="npu")
out = torch_npu.npu_conv2d(dt(x, Shard(1)), dt(w, Shard(1)), None, [1, 1], [0, 0], [1, 1], 1)
expect("conv2d by input channel", out.placements[0].is_partial()
       and same(out, torch_npu.npu_conv2d(x, w, None, [1, 1], [0, 0], [1, 1], 1)))

# --- npu_transpose moves the sharded dimension with the permutation (5 rows: uneven)
x = torch.randn(5, 3, 6, 4, device="npu", requires_grad=True)
y = torch_npu.npu_transpose(x, [1, 0, 2, 3])
gy = torch.randn_like(y)
y.backward(gy)
for p, moved in ((Shard(0), Shard(1)), (Shard(1), Shard(0)), (Shard(2), Shard(2)), (Replicate(), Replicate())):
    dx = dt(x, p)
    dy = torch_npu.npu_transpose(dx, [1, 0, 2, 3])
    backward(dy, gy)
    expect(f"npu_transpose {p}", dy.placements == (moved,) and same(dy, y) and same(dx.grad, x.grad))

# --- npu_cross_entropy_loss: rows sharded, uneven too; "mean" runs replicated
for rows, reduction in itertools.product((8, 7), ("none", "sum", "mean")):
    x = torch.randn(rows, 8, device="npu", requires_grad=True)
    target = torch.arange(rows, device="npu") % 8
    weight = torch.rand(8, device="npu")
    loss, log_prob, _, _ = torch_npu.npu_cross_entropy_loss(x, target, weight, reduction)
    grad = torch.randn(loss.shape, device="npu")
    loss.backward(grad)
    dx = dt(x, Shard(0))
    dloss, dlog_prob, _, _ = torch_npu.npu_cross_entropy_loss(dx, dt(target, Shard(0)), dt(weight, Replicate()),
                                                             reduction)
    dloss.backward(distribute_tensor(grad, mesh, [Shard(0) if reduction == "none" else Replicate()]))
    expect(f"cross_entropy_loss {rows} {reduction}", same(dloss, loss) and same(dlog_prob, log_prob)
           and same(dx.grad, x.grad))

# --- grouped matmul: one x per weight, and one x split by group_list
xs = [torch.randn(s, device="npu") for s in [(16, 16), (64, 16), (32, 64)]]
ws = [torch.randn(s, device="npu") for s in [(16, 16), (16, 64), (64, 8)]]
bs = [torch.randn(s[1], device="npu") for s in [(16, 16), (16, 64), (64, 8)]]
for bias in (bs, None):
    ref = torch_npu.npu_grouped_matmul(xs, ws, bias=bias, group_type=-1)
    for px, pw, pb in itertools.product([Shard(0), Shard(1), Replicate()], [Shard(0), Shard(1), Replicate()],
                                        [Shard(0), Replicate()]):
        out = torch_npu.npu_grouped_matmul([dt(t, px) for t in xs], [dt(t, pw) for t in ws],
                                           bias=None if bias is None else [dt(t, pb) for t in bias], group_type=-1)
        expect(f"grouped_matmul {px} {pw} {pb} bias={bias is not None}", all(same(a, r) for a, r in zip(out, ref)))
x = torch.randn(32, 16, device="npu")
ws = [torch.randn(16, 8, device="npu") for _ in range(4)]
group_list = torch.tensor([8, 16, 24, 32], device="npu")
ref = torch_npu.npu_grouped_matmul([x], ws, group_list=group_list, split_item=2, group_type=0)
for px, pw in itertools.product([Shard(0), Shard(1), Replicate()], repeat=2):
    out = torch_npu.npu_grouped_matmul([dt(x, px)], [dt(t, pw) for t in ws], group_list=dt(group_list, Replicate()),
                                       split_item=2, group_type=0)
    expect(f"grouped_matmul by group_list {px} {pw}", same(out[0], ref[0]))

# the experts' weights in one (E, K, N) tensor, and a quantised grouped matmul (replicated only)
x = torch.randn(8, 8, device="npu")
w = torch.randn(2, 8, 6, device="npu")
bias = torch.randn(2, 6, device="npu")
ref = torch_npu.npu_grouped_matmul([x], [w], bias=[bias], group_list=[2, 8], split_item=3, group_type=0)
for px, pw in itertools.product([Shard(0), Shard(1), Replicate()], [Shard(0), Shard(1), Shard(2), Replicate()]):
    out = torch_npu.npu_grouped_matmul([dt(x, px)], [dt(w, pw)], bias=[dt(bias, Replicate())], group_list=[2, 8],
                                       split_item=3, group_type=0)
    expect(f"grouped_matmul (E, K, N) {px} {pw}", same(out[0], ref[0]))
xq = torch.randint(-4, 4, (8, 16), dtype=torch.int8, device="npu")
wq = [torch.randint(-4, 4, (16, 4), dtype=torch.int8, device="npu") for _ in range(2)]
sq = [torch.rand(4, device="npu") for _ in range(2)]
ref = torch_npu.npu_grouped_matmul([xq], wq, scale=sq, group_list=[4, 8], split_item=3, group_type=0)
out = torch_npu.npu_grouped_matmul([dt(xq, Shard(0))], [dt(t, Shard(1)) for t in wq],
                                   scale=[dt(t, Shard(0)) for t in sq], group_list=[4, 8], split_item=3, group_type=0)
expect("quantised grouped_matmul", out[0].placements == (Replicate(),) and torch.equal(out[0].full_tensor(), ref[0]))

# npu_grouped_matmul_add_ updates y where it lies; a y it would have to move is refused
x = torch.randn(8, 8, device="npu", dtype=torch.float16)
w = torch.randn(8, 4, device="npu", dtype=torch.float16)
y = torch.randn(32, 4, device="npu")
group_list = torch.tensor([2, 4, 6, 8], device="npu")
y_ref = torch_npu.npu_grouped_matmul_add_(y.clone(), x, w, group_list)
for p in (Shard(1), Replicate()):
    dy = dt(y.clone(), p)
    ret = torch_npu.npu_grouped_matmul_add_(dy, dt(x, Replicate()), dt(w, p), dt(group_list, Replicate()))
    expect(f"grouped_matmul_add_ {p}", ret is dy and dy.placements == (p,) and same(dy, y_ref))
try:
    torch_npu.npu_grouped_matmul_add_(dt(y, Shard(0)), dt(x, Replicate()), dt(w, Replicate()),
                                      dt(group_list, Replicate()))
    failures.append("grouped_matmul_add_ moved its in-place argument")
except RuntimeError as e:
    expect("in-place message", "in-place argument 'self'" in str(e) and "redistribute it first" in str(e))

# --- the mc2 operators over the mesh's hccl group
hcom = mesh.get_group()._get_backend(torch.device("npu")).get_hccl_comm_name(rank)
x1 = torch.randn(4 * 2, 32, device="npu")
x2 = torch.randn(32, 8, device="npu")
for p1, p2 in itertools.product([Shard(0), Shard(1), Replicate()], repeat=2):
    out, gathered = torch_npu.npu_all_gather_base_mm(dt(x1, p1), dt(x2, p2), hcom, 2)
    expect(f"all_gather_base_mm {p1} {p2}", same(out, x1 @ x2) and same(gathered, x1))
x1 = torch.randn(8, 32, device="npu")
for p1, p2 in itertools.product([Shard(0), Shard(1), Replicate()], repeat=2):
    out = torch_npu.npu_mm_reduce_scatter_base(dt(x1, p1), dt(x2, p2), hcom, 2)
    expect(f"mm_reduce_scatter_base {p1} {p2}", out.placements == (Shard(0),) and same(out, x1 @ x2))

# --- an optimizer step below autograd reaches DTensor's dispatcher
var, m, g = (torch.randn(6, 4, device="npu") for _ in range(3))
v = torch.rand(6, 4, device="npu")
args = (0.9, 0.99, 0.01, 0.01, 0.9, 0.99, 1e-8)
ref = [t.clone() for t in (var, m, v)]
torch_npu.npu_apply_adam_w(*args, g, None, False, False, out=tuple(ref))
for p in (Shard(0), Shard(1), Replicate()):
    dvar, dm, dv = dt(var, p), dt(m, p), dt(v, p)
    torch_npu.npu_apply_adam_w(*args, dt(g, p), None, False, False, out=(dvar, dm, dv))
    expect(f"apply_adam_w {p}", all(same(a, r) for a, r in zip((dvar, dm, dv), ref)))

# --- under inference mode DTensor's dispatcher sees the operator itself and runs the rule by its handler
with torch.inference_mode():
    x, gamma = torch.randn(4, 8, 16, device="npu"), torch.randn(16, device="npu")
    y, _ = torch_npu.npu_rms_norm(dt(x, Shard(0)), dt(gamma, Replicate()))
    expect("rms_norm under inference mode",
           y.placements == (Shard(0),) and same(y, torch_npu.npu_rms_norm(x, gamma)[0]))
    q = torch.randn(2, 4, 8, 8, device="npu")
    out = torch_npu.npu_fusion_attention(dt(q, Shard(3)), dt(q, Shard(3)), dt(q, Shard(3)), 4, "BNSD")
    expect("attention under inference mode", same(out[0], torch_npu.npu_fusion_attention(q, q, q, 4, "BNSD")[0]))

# --- a 2-d mesh (1 x 2): each mesh dimension chooses its own candidate
mesh2 = init_device_mesh("npu", (1, 2))
q, k, v = (torch.randn(B, N, S, Dh, device="npu") for _ in range(3))
ref = torch_npu.npu_fusion_attention(q, k, v, N, "BNSD", scale=0.125)
out = torch_npu.npu_fusion_attention(dt(q, Shard(1), mesh2), dt(k, Shard(1), mesh2), dt(v, Shard(1), mesh2), N,
                                     "BNSD", scale=0.125)
expect("attention on a 2-d mesh", same(out[0], ref[0]) and out[0].placements == (Shard(1), Shard(1)))

# --- repeat_interleave with an int count: recorded whole, sharded with its gradient
# (csrc/ops/repeat_interleave.cpp, _repeat_interleave_rules.py); odd sizes split unevenly over 2 ranks
for shape, dim in [((3, 5), 1), ((4, 3), 0), ((3, 5), 0), ((4, 6), None), ((5, 2), -1)]:
    x = torch.randn(shape, device="npu", requires_grad=True)
    ref = torch.repeat_interleave(x, 3, dim=dim)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    for p in [Shard(0), Shard(1), Replicate()]:
        dx = dt(x, p)
        out = torch.repeat_interleave(dx, 3, dim=dim)
        backward(out, grad)
        expect(f"repeat_interleave {shape} dim={dim} {p}", same(out, ref.detach()) and same(dx.grad, x.grad))
x = torch.randn(3, 4, device="npu")
out = torch.repeat_interleave(dt(x, Shard(0)), 2, dim=1)  # along another dimension: the sharding stays
expect("repeat_interleave keeps a sharding off its dim", out.placements == (Shard(0),))
out = torch.repeat_interleave(dt(x, Shard(1)), 2, dim=1)  # 4 columns split evenly: each rank repeats its own
expect("repeat_interleave keeps an even sharding on its dim", out.placements == (Shard(1),))

# --- one_hot: one npu operator, sharded wherever its input is (_one_hot_rules.py)
labels = torch.tensor([[0, 3, 1, 2], [2, 2, 0, 4]], device="npu")
ref = torch.nn.functional.one_hot(labels, 5)
for p in [Shard(0), Shard(1), Replicate()]:
    out = torch.nn.functional.one_hot(dt(labels, p), 5)
    expect(f"one_hot {p}", same(out, ref) and out.placements == (p,))
out = torch.nn.functional.one_hot(dt(labels, Shard(1)))  # classes counted over the whole tensor
expect("one_hot without num_classes", same(out, ref) and out.placements == (Shard(1),))

try:  # a class past num_classes, on every rank: the local kernel's message
    torch.nn.functional.one_hot(dt(labels, Replicate()), 4)
    failures.append("one_hot with a class past num_classes accepted")
except RuntimeError as e:
    expect("one_hot message", "Class values must be smaller than num_classes" in str(e))

# --- bad input
try:
    torch_npu.npu_rms_norm(dt(torch.randn(4, 16, device="npu"), Shard(0)), torch.randn(16, device="npu"))
    failures.append("mixed Tensor and DTensor accepted")
except RuntimeError as e:
    expect("mixed message", "mixed torch.Tensor and DTensor" in str(e) and "'gamma'" in str(e))
q = torch.randn(2, 4, 6 * 8, device="npu")
try:  # 6 heads over 2 shards of H is fine; 3 heads are not
    torch_npu.npu_fusion_attention(dt(q, Shard(2)), dt(q, Shard(2)), dt(q, Shard(2)), 3, "BSH")
    failures.append("indivisible heads accepted")
except RuntimeError as e:
    expect("heads message", "head_num 3 is not divisible" in str(e))

assert not failures, failures
dist.destroy_process_group()
print(f"RANK {rank} OK", flush=True)
