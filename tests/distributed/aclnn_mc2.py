"""Run under torchrun (tests/test_aclnn.py): MindSpeed-style calls of the aclnn
mc2 operator MatmulAllReduceAddRmsNorm (and its in-place form) through the
extension tests/cpp_extensions/aclnn_extension.cpp, built by the test (its
folder in VNPU_ACLNN_EXT_DIR). Each rank checks the outputs against vNPU's
npu_mm_all_reduce_base + npu_add_rms_norm and against the formula on cpu, that
collectives issued before and after it (on the same and on another stream)
still pair up, and the errors. Each rank prints "RANK r OK"."""

import os
import sys

import torch
import torch.distributed as dist

import torch_npu

sys.path.insert(0, os.environ["VNPU_ACLNN_EXT_DIR"])
import vnpu_aclnn_ext as ext  # noqa: E402

dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.npu.set_device(rank)
hcom = dist.group.WORLD._get_backend(torch.device("npu")).get_hccl_comm_name(rank)
eps = 1e-6


def inputs(dtype):
    shared = torch.Generator().manual_seed(0)
    x2 = torch.randn(16, 12, generator=shared).to(dtype)
    bias = torch.randn(12, generator=shared).to(dtype)
    residual = torch.randn(2, 5, 12, generator=shared).to(dtype)
    gamma = torch.randn(12, generator=shared).to(dtype)
    x1s = [torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(10 + r)).to(dtype) for r in range(world)]
    return x1s, x2, bias, residual, gamma


def cpu_formula(x1s, x2, bias, residual, gamma):
    dtype = x2.dtype
    partial = sum(x1.float() @ x2.float() + bias.float() for x1 in x1s)  # every rank adds its bias
    total = (partial.to(dtype).float() + residual.float()).to(dtype)
    s = total.float()
    norm = (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()).to(dtype)
    return total, norm


for dtype in (torch.bfloat16, torch.float16):
    x1s, x2, bias, residual, gamma = inputs(dtype)
    x1 = x1s[rank].npu()
    y, norm = ext.mm_all_reduce_add_rms_norm(x1, x2.npu(), bias.npu(), residual.npu(), gamma.npu(), eps, hcom,
                                             False, False)
    reduced = torch_npu.npu_mm_all_reduce_base(x1, x2.npu(), hcom, bias=bias.npu())
    ref_norm, _, ref_y = torch_npu.npu_add_rms_norm(reduced, residual.npu(), gamma.npu(), eps)
    assert torch.equal(y.cpu(), ref_y.cpu()), (y - ref_y).abs().max()
    assert torch.equal(norm.cpu(), ref_norm.cpu()), (norm - ref_norm).abs().max()
    cpu_y, cpu_norm = cpu_formula(x1s, x2, bias, residual, gamma)
    torch.testing.assert_close(y.cpu(), cpu_y)
    torch.testing.assert_close(norm.cpu(), cpu_norm)

# in place, without bias, between collectives issued before and after it, on this stream and on another
x1s, x2, _, residual, gamma = inputs(torch.bfloat16)
before = torch.full((4096,), float(rank + 1)).npu()
pending = dist.all_reduce(before, async_op=True)  # still in flight when the mc2 operator is prepared
res = residual.npu()
out, norm = ext.mm_all_reduce_add_rms_norm(x1s[rank].npu(), x2.npu(), None, res, gamma.npu(), eps, hcom, True, False)
side = torch.npu.Stream()
with torch.npu.stream(side):
    other = torch.full((4096,), 10.0 * (rank + 1)).npu()
    dist.all_reduce(other)
after = torch.full((8,), 100.0 * (rank + 1)).npu()
dist.all_reduce(after)
pending.wait()
torch.npu.synchronize()
expected_sum = sum(range(1, world + 1))
assert torch.equal(before.cpu(), torch.full((4096,), float(expected_sum)))
assert torch.equal(other.cpu(), torch.full((4096,), 10.0 * expected_sum))
assert torch.equal(after.cpu(), torch.full((8,), 100.0 * expected_sum))
assert out.data_ptr() == res.data_ptr()
cpu_y, cpu_norm = cpu_formula(x1s, x2, torch.zeros(12, dtype=torch.bfloat16), residual, gamma)
torch.testing.assert_close(res.cpu(), cpu_y)
torch.testing.assert_close(norm.cpu(), cpu_norm)

# the quantised forms, each against npu_mm_all_reduce_base with the same quantisation + npu_add_rms_norm
g = torch.Generator().manual_seed(3)
x1_8 = torch.randint(-20, 20, (2, 3, 16), generator=torch.Generator().manual_seed(20 + rank), dtype=torch.int8)
x2_8 = torch.randint(-20, 20, (16, 12), generator=g, dtype=torch.int8)
bias32 = torch.randint(-50, 50, (12,), generator=g, dtype=torch.int32)
dequant = (torch.rand(12, generator=g) / 100).bfloat16()
res_q = torch.randn(2, 3, 12, generator=g).bfloat16()
gamma_q = torch.randn(12, generator=g).bfloat16()
for inplace in (False, True):
    res = res_q.npu()
    y, norm = ext.quant_mm_all_reduce_add_rms_norm(x1_8.npu(), x2_8.npu(), bias32.npu(), dequant.npu(), None, None, 0,
                                                   res, gamma_q.npu(), eps, hcom, inplace)
    reduced = torch_npu.npu_mm_all_reduce_base(x1_8.npu(), x2_8.npu(), hcom, bias=bias32.npu(),
                                               dequant_scale=dequant.npu())
    ref_norm, _, ref_y = torch_npu.npu_add_rms_norm(reduced, res_q.npu(), gamma_q.npu(), eps)
    assert torch.equal(y.cpu(), ref_y.cpu()) and torch.equal(norm.cpu(), ref_norm.cpu()), "quant"
    assert not inplace or torch.equal(res.cpu(), ref_y.cpu())
x1_f = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(30 + rank)).half()
a_scale = (torch.rand(4, 12, generator=g) / 50).half()
a_offset = torch.randn(4, 12, generator=g).half()
res_w, gamma_w = torch.randn(2, 3, 12, generator=g).half(), torch.randn(12, generator=g).half()
for inplace in (False, True):
    y, norm = ext.quant_mm_all_reduce_add_rms_norm(x1_f.npu(), x2_8.npu(), None, None, a_scale.npu(), a_offset.npu(),
                                                   4, res_w.npu(), gamma_w.npu(), eps, hcom, inplace)
    reduced = torch_npu.npu_mm_all_reduce_base(x1_f.npu(), x2_8.npu(), hcom, antiquant_scale=a_scale.npu(),
                                               antiquant_offset=a_offset.npu(), antiquant_group_size=4)
    ref_norm, _, ref_y = torch_npu.npu_add_rms_norm(reduced, res_w.npu(), gamma_w.npu(), eps)
    assert torch.equal(y.cpu(), ref_y.cpu()) and torch.equal(norm.cpu(), ref_norm.cpu()), "weight quant"

# GroupedMatMulAllReduce: y_i = sum over ranks of x_i @ w_i, + bias_i once
def rank_tensor(r, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(100 + r)).half()


per_rank = [[rank_tensor(r, 6, 8), rank_tensor(r + 50, 4, 16)] for r in range(world)]
weights = [[rank_tensor(r + 10, 8, 5), rank_tensor(r + 60, 16, 3)] for r in range(world)]
biases = [torch.randn(5).half(), torch.randn(3).half()]
ys = ext.grouped_mm_all_reduce([t.npu() for t in per_rank[rank]], [t.npu() for t in weights[rank]],
                               [b.npu() for b in biases], [], 0, hcom)
for i in range(2):
    expected = sum(per_rank[r][i].float() @ weights[r][i].float() for r in range(world)) + biases[i].float()
    torch.testing.assert_close(ys[i].cpu(), expected.half(), rtol=2e-3, atol=2e-3)
x_split = [rank_tensor(r + 70, 10, 8) for r in range(world)]
w_split = [[rank_tensor(r + 80, 8, 4), rank_tensor(r + 90, 8, 4)] for r in range(world)]
(y_split,) = ext.grouped_mm_all_reduce([x_split[rank].npu()], [t.npu() for t in w_split[rank]], [], [3, 10], 3, hcom)
expected = sum(torch.cat([x_split[r][:3].float() @ w_split[r][0].float(), x_split[r][3:].float() @ w_split[r][1].float()])
               for r in range(world))
torch.testing.assert_close(y_split.cpu(), expected.half(), rtol=2e-3, atol=2e-3)

# errors: an unknown group name at the call; preparing inside a stream task at the next sync
try:
    ext.mm_all_reduce_add_rms_norm(x1s[rank].npu(), x2.npu(), None, residual.npu(), gamma.npu(), eps,
                                   "hccl_comm_nope_0", False, False)
    raise AssertionError("an unknown group name was accepted")
except RuntimeError as e:
    assert "'hccl_comm_nope_0' is not the hccl comm name of a process group" in str(e), e
ext.mm_all_reduce_add_rms_norm(x1s[rank].npu(), x2.npu(), None, residual.npu(), gamma.npu(), eps, hcom, True, True)
try:
    torch.npu.synchronize()
    raise AssertionError("preparing inside a stream task was accepted")
except RuntimeError as e:
    assert "must be called on the host thread" in str(e), e
# the group still works after both refusals
check = torch.ones(3).npu()
dist.all_reduce(check)
assert check.cpu().tolist() == [float(world)] * 3

dist.destroy_process_group()
print(f"RANK {rank} OK")
