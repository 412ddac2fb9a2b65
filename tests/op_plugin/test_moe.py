"""torch_npu.op_plugin.moe: npu_grouped_matmul and the MoE routing operators (gating,
permute, unpermute, init routing) against plain PyTorch."""

import pytest
import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import rnd


@pytest.mark.parametrize("group_list_type", [0, 1])
def test_grouped_matmul(group_list_type):
    x = rnd(7, 4, seed=61).npu()
    ws = [rnd(4, 3, seed=62 + i).npu() for i in range(3)]
    sizes = [2, 0, 5]
    group_list = sizes if group_list_type == 1 else [2, 2, 7]
    ys = torch_npu.npu_grouped_matmul([x], ws, group_list=group_list, group_list_type=group_list_type,
                                      group_type=0)
    parts = x.cpu().split(sizes)
    for y, p, w in zip(ys, parts, ws):
        assert_close(y.cpu(), p @ w.cpu())
    (cat,) = torch_npu.npu_grouped_matmul([x], ws, group_list=group_list, group_list_type=group_list_type,
                                          group_type=0, split_item=3)
    assert_close(cat.cpu(), torch.cat([p @ w.cpu() for p, w in zip(parts, ws)]))
    with pytest.raises(RuntimeError, match="does not split"):
        torch_npu.npu_grouped_matmul([x], ws, group_list=[2, 2, 9], group_type=0)


def test_grouped_matmul_weights_in_one_tensor_and_quantised():
    x = rnd(8, 4, seed=63).npu()
    w = rnd(2, 4, 3, seed=64).npu()      # (E, K, N): two experts in one tensor
    b = rnd(2, 3, seed=65).npu()
    (y,) = torch_npu.npu_grouped_matmul([x], [w], bias=[b], group_list=[2, 8], group_type=0, split_item=3)
    want = torch.cat([x[:2].cpu() @ w[0].cpu() + b[0].cpu(), x[2:].cpu() @ w[1].cpu() + b[1].cpu()])
    assert_close(y.cpu(), want)
    # A8W8: (x @ w + bias) * scale * per_token_scale, int32 accumulation, float16 out
    gen = torch.Generator().manual_seed(66)
    xq = torch.randint(-8, 8, (6, 16), dtype=torch.int8, generator=gen)
    wq = [torch.randint(-8, 8, (16, 4), dtype=torch.int8, generator=gen) for _ in range(2)]
    bq = [torch.randint(-5, 5, (4,), dtype=torch.int32, generator=gen) for _ in range(2)]
    sq = [torch.rand(4, generator=gen) for _ in range(2)]
    pts = torch.rand(6, generator=gen)
    (yq,) = torch_npu.npu_grouped_matmul([xq.npu()], [t.npu() for t in wq], bias=[t.npu() for t in bq],
                                         scale=[t.npu() for t in sq], per_token_scale=[pts.npu()],
                                         group_list=[4, 6], group_type=0, split_item=3)
    acc = [xq[:4].int() @ wq[0].int() + bq[0], xq[4:].int() @ wq[1].int() + bq[1]]
    want = torch.cat([a.float() * s for a, s in zip(acc, sq)]) * pts.unsqueeze(1)
    assert yq.dtype == torch.float16
    assert_close(yq.cpu(), want.half())
    # an int8 weight dequantised by antiquant_scale / antiquant_offset
    xa, wa = rnd(3, 16, seed=67).npu(), torch.randint(-8, 8, (16, 4), dtype=torch.int8, generator=gen)
    sa, oa = torch.rand(4, generator=gen), torch.rand(4, generator=gen)
    (ya,) = torch_npu.npu_grouped_matmul([xa], [wa.npu()], antiquant_scale=[sa.npu()], antiquant_offset=[oa.npu()])
    assert_close(ya.cpu(), xa.cpu() @ ((wa.float() + oa) * sa))
    with pytest.raises(RuntimeError, match="scale\\[0\\] of shape"):
        torch_npu.npu_grouped_matmul([xq.npu()], [wq[0].npu()], scale=[torch.rand(3).npu()])
    with pytest.raises(RuntimeError, match="dequantise an int8 x times int8 weight"):
        torch_npu.npu_grouped_matmul([x], [w[0]], scale=[torch.rand(3).npu()])
    with pytest.raises(RuntimeError, match="bias holds 3 experts"):
        torch_npu.npu_grouped_matmul([x], [w], bias=[rnd(3, 3, seed=1).npu()], group_list=[2, 8], group_type=0)


def test_moe_routing_round_trip():
    tokens, experts, k, h = 6, 4, 2, 8
    logits = rnd(tokens, experts, seed=70).npu()
    y, expert_idx, row_idx = torch_npu.npu_moe_gating_top_k_softmax(logits, k=k)
    want_y, want_idx = torch.softmax(logits.cpu(), -1).topk(k)
    assert_close(y.cpu(), want_y)
    assert torch.equal(expert_idx.cpu().long(), want_idx)
    assert torch.equal(row_idx.cpu(), torch.arange(tokens * k, dtype=torch.int32).view(k, tokens).t())
    x = rnd(tokens, h, seed=71).npu().requires_grad_()
    permuted, sorted_indices = torch_npu.npu_moe_token_permute(x, expert_idx.long())
    # grouped by expert, stable
    assert torch.equal(expert_idx.cpu().reshape(-1)[sorted_indices.cpu().long()].sort().values,
                       expert_idx.cpu().reshape(-1)[sorted_indices.cpu().long()])
    out = torch_npu.npu_moe_token_unpermute(permuted, sorted_indices, y)
    assert_close(out.detach().cpu(), x.detach().cpu() * y.cpu().sum(-1, keepdim=True), atol=1e-6, rtol=1e-5)
    out.sum().backward()
    assert_close(x.grad.cpu(), y.cpu().sum(-1, keepdim=True).expand(tokens, h))
    expanded_x, expanded_row_idx, expanded_expert = torch_npu.npu_moe_init_routing(x.detach(), row_idx,
                                                                                    expert_idx, tokens)
    assert torch.equal(expanded_expert.cpu(), expert_idx.cpu().t().reshape(-1).sort(stable=True).values)
    # each choice's k-major row r = j * tokens + i lands at expanded_row_idx[r], holding token i
    for r in range(tokens * k):
        assert torch.equal(expanded_x[expanded_row_idx[r]].cpu(), x.detach()[r % tokens].cpu())


@pytest.mark.parametrize("split_item", [0, 3])
def test_grouped_matmul_split_along_k_gives_each_groups_weight_gradient(split_item):
    # group_type 2: x (M, K) is split along K by group_list and each group gives
    # x[:, K_i] @ w[K_i]: an MoE layer's per-expert weight gradient x_i^T dy_i
    tokens, hidden, n = rnd(10, 4, seed=3), rnd(10, 5, seed=4), [3, 3, 4]
    group_list = [3, 6, 10]
    ys = torch_npu.npu_grouped_matmul([tokens.npu().t()], [hidden.npu()], group_list=group_list, group_type=2,
                                      split_item=split_item)
    expected = [t.t() @ h for t, h in zip(tokens.split(n), hidden.split(n))]
    if split_item == 3:
        (stacked,) = ys
        assert stacked.shape == (3, 4, 5)
        ys = list(stacked)
    for y, e in zip(ys, expected):
        torch.testing.assert_close(y.cpu(), e, rtol=1e-5, atol=1e-5)
    per_group = torch_npu.npu_grouped_matmul([tokens.npu().t()], [h.npu() for h in hidden.split(n)],
                                             group_list=torch.tensor(group_list).npu(), group_type=2, split_item=3)
    torch.testing.assert_close(per_group[0].cpu(), torch.stack(expected), rtol=1e-5, atol=1e-5)


def test_grouped_matmul_group_types_and_overloads():
    x, w = rnd(6, 4, seed=5), [rnd(4, 3, seed=6), rnd(4, 3, seed=7)]
    ys = torch.ops.npu.npu_grouped_matmul.List([x.npu()], [t.npu() for t in w], group_list=[2, 6], group_type=-1,
                                               split_item=1)
    torch.testing.assert_close(ys[1].cpu(), x[2:] @ w[1], rtol=1e-5, atol=1e-5)
    (half,) = torch.ops.npu.npu_grouped_matmul([x.npu()], [w[0].npu()], output_dtype=torch.float16, split_item=3)
    assert half.dtype == torch.float16  # op-plugin's int output_dtype takes a torch dtype
    for bad in (1, 3):
        with pytest.raises(RuntimeError, match=f"group_type only supports -1, 0 and 2, but got {bad}"):
            torch_npu.npu_grouped_matmul([x.npu()], [w[0].npu()], group_list=[6], group_type=bad)
    with pytest.raises(RuntimeError, match="x_dtype .* is not supported on vNPU"):
        torch.ops.npu.npu_grouped_matmul([x.npu()], [w[0].npu()], x_dtype=torch_npu.hifloat8)
