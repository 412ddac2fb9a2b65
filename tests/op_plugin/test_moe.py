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
