"""torch_npu.op_plugin.moe_permute: MoE permute / unpermute with a routing map (and their grads,
as MindSpeed's permutation.py calls them), the grads of npu_moe_token_permute / unpermute,
npu_moe_gating_top_k_softmax_v2, npu_moe_gating_top_k_backward, npu_moe_init_routing_quant and
npu_moe_update_expert -- against Megatron's / op-plugin's formulas written plainly on cpu, grads
against torch.autograd of those formulas, npu against cpu, schemas, FakeTensor and bad input."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen, rnd

SCHEMAS = [
    "npu_moe_token_permute_with_routing_map(Tensor tokens, Tensor routing_map, *, Tensor? probs=None, int? num_out_tokens=None, bool drop_and_pad=False) -> (Tensor, Tensor, Tensor)",  # noqa: E501
    "npu_moe_token_permute_with_routing_map_grad(Tensor permuted_token_out_grad, Tensor? probs_grad, Tensor sorted_indices, Tensor routing_map, SymInt experts_num, SymInt tokens_num, bool drop_and_pad) -> (Tensor, Tensor)",  # noqa: E501
    "npu_moe_token_unpermute_with_routing_map(Tensor permuted_tokens, Tensor sorted_indices, int[] restore_shape, *, Tensor? probs=None, Tensor? routing_map=None, bool drop_and_pad=False) -> Tensor",  # noqa: E501
    "_npu_moe_token_unpermute_with_routing_map(Tensor permuted_tokens, Tensor sorted_indices, int[] restore_shape, *, Tensor? probs=None, Tensor? routing_map=None, bool drop_and_pad=False) -> (Tensor, Tensor, Tensor, Tensor)",  # noqa: E501
    "npu_moe_token_unpermute_with_routing_map_grad(Tensor unpermuted_tokens_grad, Tensor out_index, Tensor permuted_token_id, Tensor? routing_map, Tensor? permuted_tokens, Tensor? probs, bool drop_and_pad, int[] restore_shape) -> (Tensor, Tensor)",  # noqa: E501
    "npu_moe_token_permute_grad(Tensor tokens, Tensor grad_permuted_tokens, Tensor indices, Tensor sorted_indices, bool padded_mode=False) -> Tensor",  # noqa: E501
    "npu_moe_token_permute_grad_v2(Tensor grad_permuted_tokens, Tensor sorted_indices, int tokens_size_0, ScalarType tokens_dtype, int num_topK, bool padded_mode=False) -> Tensor",  # noqa: E501
    "npu_moe_token_unpermute_grad(Tensor permuted_tokens, Tensor grad_unpermuted_tokens, Tensor sorted_indices, Tensor? probs=None, bool padded_mode=False, int[]? restore_shape=None) -> (Tensor, Tensor)",  # noqa: E501
    "npu_moe_token_unpermute_grad_v2(Tensor grad_unpermuted_tokens, Tensor sorted_indices, int permuted_tokens_size_0, ScalarType permuted_tokens_dtype, Tensor? probs=None, bool padded_mode=False, int[]? restore_shape=None, Tensor? permuted_tokens=None) -> (Tensor, Tensor)",  # noqa: E501
    "_npu_moe_token_unpermute(Tensor permuted_tokens, Tensor sorted_indices, Tensor? probs=None, bool padded_mode=False, int[]? restore_shape=None) -> (Tensor unpermuted_tokens, Tensor permuted_tokens_for_backward)",  # noqa: E501
    "npu_moe_gating_top_k_softmax_v2(Tensor x, *, int k=1, Tensor? finished=None, int? renorm=0, bool? output_softmax=False) -> (Tensor, Tensor, Tensor)",  # noqa: E501
    "npu_moe_gating_top_k_backward(Tensor x_norm, Tensor grad_y, Tensor expertIdx, *, int renorm=0, int norm_type=0, float routed_scaling_factor=1.0, float eps=1e-20) -> Tensor",  # noqa: E501
    "npu_moe_init_routing_quant(Tensor x, Tensor expert_idx, *, Tensor? scale=None, Tensor? offset=None, int active_num=1024, int expert_capacity=0, int expert_num=256, int drop_pad_mode=0, int expert_tokens_num_mode=0, bool expert_tokens_before_capacity_flag=False, int quant_mode=1) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",  # noqa: E501
    "npu_moe_update_expert(Tensor expert_ids, Tensor eplb_table, *, Tensor? expert_scales=None, Tensor? pruning_threshold=None, Tensor? active_mask=None, int local_rank_id=-1, int world_size=-1, int balance_mode=0) -> (Tensor, Tensor)",  # noqa: E501
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[s.split("(", 1)[0] for s in SCHEMAS])
def test_schema_is_op_plugins(schema):
    op = getattr(torch.ops.npu, schema.split("(", 1)[0]).default
    assert op._schema == torch._C.parse_schema("npu::" + schema)


# ------------------------------------------------------------------ helpers


def routing_map(tokens, experts, topk, seed, dtype=torch.bool):
    g = gen(seed)
    m = torch.zeros(tokens, experts, dtype=torch.bool)
    for i in range(tokens):
        m[i, torch.randperm(experts, generator=g)[:topk]] = True
    return m.to(dtype)


def leaves(*ts):
    return [t.detach().clone().requires_grad_() for t in ts]


def megatron_permute(tokens, rmap, probs, num_out, drop_and_pad):
    """Megatron's permute with a mask map, as op-plugin's golden writes it: (rows, probs,
    the token of each row)."""
    n, e = rmap.shape
    if drop_and_pad:
        cap = num_out // e
        token_of = rmap.to(torch.int8).T.argsort(dim=-1, descending=True, stable=True)[:, :cap].reshape(-1)
        expert_of = torch.arange(e).repeat_interleave(cap)
        pp = probs[token_of, expert_of] if probs is not None else None
        return tokens.index_select(0, token_of), pp, token_of
    mask_t = rmap.bool().T
    token_of = torch.arange(n).unsqueeze(0).expand(e, -1).masked_select(mask_t)
    pp = probs.T.masked_select(mask_t) if probs is not None else None
    return tokens.index_select(0, token_of), pp, token_of


def megatron_unpermute(rows, token_of, rows_probs, tokens):
    """Each permuted row, times its probability, added into its token."""
    weighted = rows if rows_probs is None else rows * rows_probs.unsqueeze(-1)
    return torch.zeros(tokens, rows.shape[1], dtype=rows.dtype).index_add(0, token_of, weighted)


# ------------------------------------------------------------------ permute with routing map


@pytest.mark.parametrize("device", ["cpu", "npu"])
@pytest.mark.parametrize("drop_and_pad", [False, True])
@pytest.mark.parametrize("with_probs", [False, True])
def test_permute_with_routing_map_and_its_grad(device, drop_and_pad, with_probs):
    n, e, topk, h = 7, 5, 2, 3
    rmap = routing_map(n, e, topk, seed=1, dtype=torch.int8 if drop_and_pad else torch.bool)
    num_out = e * 3 if drop_and_pad else n * topk
    x, probs = rnd(n, h, seed=2), rnd(n, e, seed=3)
    rx, rp = leaves(x, probs)
    want_rows, want_pp, token_of = megatron_permute(rx, rmap, rp if with_probs else None, num_out, drop_and_pad)
    ax, ap = leaves(x.to(device), probs.to(device))
    rows, pp, sorted_indices = torch_npu.npu_moe_token_permute_with_routing_map(
        ax, rmap.to(device), probs=ap if with_probs else None, num_out_tokens=num_out, drop_and_pad=drop_and_pad)
    assert rows.device.type == device and sorted_indices.dtype == torch.int32
    assert_close(rows.cpu(), want_rows.detach(), atol=0, rtol=0)
    if drop_and_pad:
        assert torch.equal(sorted_indices.cpu().long(), token_of)
    else:  # the row of each routed pair in token-major order
        assert torch.equal(sorted_indices.cpu().long(), torch.argsort(token_of, stable=True))
    assert (pp is None) == (not with_probs)
    g_rows, g_pp = rnd(*want_rows.shape, seed=4), rnd(want_rows.shape[0], seed=5)
    want_inputs = [rx] + ([rp] if with_probs else [])
    want_outputs = [want_rows] + ([want_pp] if with_probs else [])
    want = torch.autograd.grad(want_outputs, want_inputs, [g_rows] + ([g_pp] if with_probs else []))
    if with_probs:
        assert_close(pp.cpu(), want_pp.detach(), atol=0, rtol=0)
    # autograd through the forward
    got = torch.autograd.grad([rows] + ([pp] if with_probs else []), [ax] + ([ap] if with_probs else []),
                              [g_rows.to(device)] + ([g_pp.to(device)] if with_probs else []))
    for a, w in zip(got, want):
        assert_close(a.cpu(), w)
    # the explicit grad, called as MindSpeed's MoePermuteMaskMap.backward does
    tokens_grad, probs_grad = torch_npu.npu_moe_token_permute_with_routing_map_grad(
        g_rows.to(device), g_pp.to(device) if with_probs else None, sorted_indices, rmap.to(device), e, n,
        drop_and_pad)
    assert tokens_grad.shape == (n, h) and tokens_grad.device.type == device
    assert_close(tokens_grad.cpu(), want[0])
    if with_probs:
        assert probs_grad.shape == (n, e) and probs_grad.dtype == probs.dtype
        assert_close(probs_grad.cpu(), want[1])
    else:
        assert probs_grad is None


def test_permute_rows_beyond_the_routed_pairs_are_zero():
    rmap = torch.tensor([[True, False], [False, False], [True, True]])  # 3 routed pairs, num_out asks for 6
    x = rnd(3, 2, seed=6)
    rows, pp, si = torch_npu.npu_moe_token_permute_with_routing_map(x, rmap, probs=torch.ones(3, 2),
                                                                    num_out_tokens=6)
    assert torch.equal(rows[:3], x[[0, 2, 2]]) and torch.equal(rows[3:], torch.zeros(3, 2))
    assert torch.equal(pp, torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0]))
    assert torch.equal(si[:3].long(), torch.tensor([0, 1, 2]))


# ------------------------------------------------------------------ unpermute with routing map


@pytest.mark.parametrize("device", ["cpu", "npu"])
@pytest.mark.parametrize("drop_and_pad", [False, True])
@pytest.mark.parametrize("with_probs", [False, True])
def test_unpermute_with_routing_map_and_its_grad(device, drop_and_pad, with_probs):
    n, e, topk, h = 6, 4, 2, 3
    rmap = routing_map(n, e, topk, seed=10)
    num_out = e * 2 if drop_and_pad else n * topk
    probs = rnd(n, e, seed=11)
    _, _, token_of = megatron_permute(rnd(n, h), rmap, None, num_out, drop_and_pad)
    sorted_indices = (token_of if drop_and_pad else torch.argsort(token_of, stable=True)).to(torch.int32)
    permuted = rnd(num_out, h, seed=12)
    rp, rprobs = leaves(permuted, probs)
    _, rows_probs, _ = megatron_permute(rnd(n, h), rmap, rprobs, num_out, drop_and_pad)
    want = megatron_unpermute(rp, token_of, rows_probs if with_probs else None, n)
    p_in, probs_in = leaves(permuted.to(device), probs.to(device))
    kw = dict(probs=probs_in if with_probs else None, routing_map=rmap.to(device), drop_and_pad=drop_and_pad)
    out, out_index, token_id, permute_probs = torch.ops.npu._npu_moe_token_unpermute_with_routing_map(
        p_in, sorted_indices.to(device), [n, h], **kw)
    assert_close(out.cpu(), want.detach())
    assert out_index.shape == token_id.shape == sorted_indices.shape and out_index.dtype == torch.int32
    if with_probs:
        assert_close(permute_probs.cpu(), rows_probs.detach(), atol=0, rtol=0)
    else:
        assert permute_probs is None
    if drop_and_pad:  # permuteTokenId, outIndex = sortedIndices.sort()
        values, order = torch.sort(sorted_indices, stable=True)
        assert torch.equal(token_id.cpu(), values) and torch.equal(out_index.cpu(), order.to(torch.int32))
    assert_close(torch_npu.npu_moe_token_unpermute_with_routing_map(p_in, sorted_indices.to(device), [n, h],
                                                                    **kw).cpu(), out.detach().cpu())
    g = rnd(n, h, seed=13)
    wrt = [rp] + ([rprobs] if with_probs else [])
    want_grads = torch.autograd.grad(want, wrt, g)
    got = torch.autograd.grad(out, [p_in] + ([probs_in] if with_probs else []), g.to(device))
    for a, w in zip(got, want_grads):
        assert_close(a.cpu(), w)
    # the explicit grad, with the arguments MindSpeed's MoeUnpermuteMaskMap.backward passes
    first, second = (out_index, token_id) if drop_and_pad else (sorted_indices.to(device), sorted_indices.to(device))
    d_permuted, d_probs = torch_npu.npu_moe_token_unpermute_with_routing_map_grad(
        g.to(device), first, permuted_token_id=second, routing_map=rmap.to(device),
        permuted_tokens=permuted.to(device) if with_probs else None, probs=probs.to(device) if with_probs else None,
        drop_and_pad=drop_and_pad, restore_shape=[n, h])
    assert d_permuted.shape == permuted.shape
    assert_close(d_permuted.cpu(), want_grads[0])
    if with_probs:
        assert d_probs.shape == probs.shape
        assert_close(d_probs.cpu(), want_grads[1])
    else:
        assert d_probs is None


def test_unpermute_skips_unused_slots():
    permuted = rnd(4, 2, seed=14)
    sorted_indices = torch.tensor([1, -1, 0, 3], dtype=torch.int32)  # 2 tokens, 2 slots each, one unused
    out = torch_npu.npu_moe_token_unpermute_with_routing_map(permuted, sorted_indices, [2, 2])
    assert_close(out, torch.stack([permuted[1], permuted[0] + permuted[3]]))


def test_permute_then_unpermute_round_trip_as_mindspeed_does():
    """Megatron's MoE layer: permute (drop/pad), scale by 2, unpermute with probs -- forward and the
    explicit grads chained as MindSpeed's autograd functions chain them, against autograd."""
    n, e, h = 8, 4, 3
    rmap = routing_map(n, e, 2, seed=20, dtype=torch.int8)
    x, probs = rnd(n, h, seed=21), rnd(n, e, seed=22) * rmap
    rx, rprobs = leaves(x, probs)
    rows, _, token_of = megatron_permute(rx, rmap, None, e * 4, True)
    _, rows_probs, _ = megatron_permute(rx, rmap, rprobs, e * 4, True)
    want = megatron_unpermute(rows * 2, token_of, rows_probs, n)
    g = rnd(n, h, seed=23)
    want_dx, want_dprobs = torch.autograd.grad(want, (rx, rprobs), g)
    permuted, _, si = torch_npu.npu_moe_token_permute_with_routing_map(x.npu(), rmap.npu(), num_out_tokens=e * 4,
                                                                       drop_and_pad=True)
    out, out_index, token_id, _ = torch.ops.npu._npu_moe_token_unpermute_with_routing_map(
        permuted * 2, si, [n, h], probs=probs.npu(), routing_map=rmap.npu(), drop_and_pad=True)
    assert_close(out.cpu(), want.detach())
    d_rows, d_probs = torch_npu.npu_moe_token_unpermute_with_routing_map_grad(
        g.npu(), out_index, token_id, rmap.npu(), permuted * 2, probs.npu(), True, [n, h])
    dx, _ = torch_npu.npu_moe_token_permute_with_routing_map_grad(d_rows * 2, None, si, rmap.npu(), e, n, True)
    assert_close(dx.cpu(), want_dx)
    assert_close(d_probs.cpu(), want_dprobs)


# ------------------------------------------------------------------ npu_moe_token_permute / unpermute grads


@pytest.mark.parametrize("num_out", [12, 9])  # every routed copy, or the first 9 (the rest dropped)
def test_permute_and_unpermute_grads_equal_autograd(num_out):
    n, topk, h = 6, 2, 4
    indices = torch.randint(0, 4, (n, topk), generator=gen(30))
    x, probs = rnd(n, h, seed=31), rnd(n, topk, seed=32)
    # Megatron's permute: row r holds choice order[r] (the stable argsort of the flat expert ids)
    order = torch.argsort(indices.reshape(-1), stable=True)[:num_out]
    rx = leaves(x)[0]
    want_rows = rx.index_select(0, order // topk)
    g_rows = rnd(num_out, h, seed=33)
    want_dx = torch.autograd.grad(want_rows, rx, g_rows)[0]
    permuted, sorted_indices = torch_npu.npu_moe_token_permute(x.npu(), indices.npu(), num_out_tokens=num_out)
    assert_close(permuted.cpu(), want_rows.detach())
    got = torch_npu.npu_moe_token_permute_grad(x.npu(), g_rows.npu(), indices.npu(), sorted_indices)
    assert got.shape == (n, h) and got.dtype == x.dtype
    assert_close(got.cpu(), want_dx)
    got = torch_npu.npu_moe_token_permute_grad_v2(g_rows.npu(), sorted_indices, n, torch.float16, topk)
    assert got.dtype == torch.float16
    assert_close(got.cpu().float(), want_dx, atol=1e-3, rtol=1e-3)
    if num_out != n * topk:
        return
    # unpermute: choice order[r] takes row r; each token sums its choices weighted by probs
    rp, rprobs = leaves(want_rows.detach(), probs)
    per_choice = torch.zeros(n * topk, h).index_copy(0, order, rp)
    want = (per_choice.view(n, topk, h) * rprobs.unsqueeze(-1)).sum(1)
    g = rnd(n, h, seed=34)
    want_dp, want_dprobs = torch.autograd.grad(want, (rp, rprobs), g)
    out = torch_npu.npu_moe_token_unpermute(permuted, sorted_indices, probs.npu())
    assert_close(out.cpu(), want.detach())
    for got in (torch_npu.npu_moe_token_unpermute_grad(permuted, g.npu(), sorted_indices, probs.npu()),
                torch_npu.npu_moe_token_unpermute_grad_v2(g.npu(), sorted_indices, n * topk, torch.float32,
                                                          probs.npu(), permuted_tokens=permuted)):
        assert_close(got[0].cpu(), want_dp)
        assert_close(got[1].cpu(), want_dprobs)
    g_rows = rnd(n * topk, h, seed=35)  # no probs: topk 1, every choice its own output row
    d_rows, d_probs = torch_npu.npu_moe_token_unpermute_grad(permuted, g_rows.npu(), sorted_indices)
    assert d_probs is None
    assert_close(d_rows.cpu(), g_rows.index_select(0, order))
    unpermuted, saved = torch.ops.npu._npu_moe_token_unpermute(permuted, sorted_indices, probs.npu())
    assert saved is permuted and torch.equal(unpermuted, out)
    assert torch.ops.npu._npu_moe_token_unpermute(permuted, sorted_indices)[1] is None


# ------------------------------------------------------------------ gating


def ref_top_k_softmax_v2(x, k, finished, renorm):
    """Row by row with Python's stable sort: (weights, experts)."""
    rows = x.float().reshape(-1, x.shape[-1])
    fin = finished.reshape(-1) if finished is not None else None
    ys, ids = [], []
    for i, row in enumerate(rows):
        vals = [math.exp(v) for v in row.tolist()]
        total = sum(vals)
        probs = [v / total for v in vals]
        key = probs if renorm == 0 else row.tolist()
        chosen = sorted(range(len(key)), key=lambda j: -key[j])[:k]
        if renorm == 0:
            y = [probs[j] for j in chosen]
        else:
            ex = [math.exp(row[j].item()) for j in chosen]
            y = [v / sum(ex) for v in ex]
        if fin is not None and bool(fin[i]):
            chosen = [rows.shape[1]] * k
        ys.append(y)
        ids.append(chosen)
    shape = (*x.shape[:-1], k)
    return torch.tensor(ys).view(shape), torch.tensor(ids, dtype=torch.int32).view(shape)


@pytest.mark.parametrize("renorm", [0, 1])
@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 6)])
def test_gating_top_k_softmax_v2(renorm, shape):
    x = rnd(*shape, seed=40)
    finished = torch.rand(shape[:-1], generator=gen(41)) > 0.6
    want_y, want_idx = ref_top_k_softmax_v2(x, 3, finished, renorm)
    for device in ("cpu", "npu"):
        y, idx, soft = torch_npu.npu_moe_gating_top_k_softmax_v2(x.to(device), k=3, finished=finished.to(device),
                                                                 renorm=renorm, output_softmax=True)
        assert y.dtype == x.dtype and idx.dtype == torch.int32
        assert_close(y.cpu(), want_y)
        assert torch.equal(idx.cpu(), want_idx)
        if renorm == 0:
            assert soft.dtype == torch.float32 and soft.shape == x.shape
            assert_close(soft.cpu(), torch.softmax(x, -1))
        else:
            assert soft.shape == (0,)
    assert torch_npu.npu_moe_gating_top_k_softmax_v2(x, k=2)[2].shape == (0,)


@pytest.mark.parametrize("norm_type", [0, 1])
def test_gating_top_k_backward_equals_autograd(norm_type):
    x = rnd(6, 8, seed=50)
    y, idx, norm = torch_npu.npu_moe_gating_top_k(x, 3, norm_type=norm_type, routed_scaling_factor=1.5)
    g = rnd(6, 3, seed=51)
    # the formula in float64: y = s[idx] * r (softmax), s[idx] / (sum + eps) * r (sigmoid)
    x64 = x.double().requires_grad_()
    s = torch.softmax(x64, -1) if norm_type == 0 else torch.sigmoid(x64)
    chosen = s.gather(1, idx.long())
    if norm_type == 1:
        chosen = chosen / (chosen.sum(-1, keepdim=True) + 1e-20)
    want = torch.autograd.grad(chosen * 1.5, x64, g.double())[0]
    for device in ("cpu", "npu"):
        got = torch_npu.npu_moe_gating_top_k_backward(norm.to(device), g.to(device), idx.to(device),
                                                      norm_type=norm_type, routed_scaling_factor=1.5)
        assert got.shape == x.shape and got.dtype == g.dtype and got.device.type == device
        assert_close(got.cpu().double(), want, atol=1e-6, rtol=1e-5)
    # npu_moe_gating_top_k's own autograd agrees (its derivative is this op)
    xg = x.clone().requires_grad_()
    auto = torch.autograd.grad(torch_npu.npu_moe_gating_top_k(xg, 3, norm_type=norm_type,
                                                              routed_scaling_factor=1.5)[0], xg, g)[0]
    assert_close(auto.double(), want, atol=1e-6, rtol=1e-5)


# ------------------------------------------------------------------ init routing quant


def ref_init_routing_quant(x, expert_idx, scale, offset, quant_mode):
    """op-plugin's golden for the dropless case: (expanded_x, expanded_row_idx, counts, scales)."""
    n, k = expert_idx.shape
    flat = expert_idx.reshape(-1)
    order = torch.argsort(flat, stable=True)
    row_idx = torch.empty(n * k, dtype=torch.int32)
    row_idx[order] = torch.arange(n * k, dtype=torch.int32)
    rows = x[order // k]
    if quant_mode == 0:
        q = torch.round(rows.half() * scale.half() + offset.half()).clamp(-128, 127).to(torch.int8)
        return q, row_idx, None
    rows = rows.float()
    s = rows.abs().amax(-1) / 127
    return torch.round(rows / s.unsqueeze(-1)).clamp(-128, 127).to(torch.int8), row_idx, s


@pytest.mark.parametrize("quant_mode", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_init_routing_quant_dropless(quant_mode, dtype):
    n, k, h, e = 5, 3, 8, 6
    x = rnd(n, h, seed=60, dtype=dtype)
    expert_idx = torch.randint(0, e, (n, k), generator=gen(61), dtype=torch.int32)
    scale, offset = torch.tensor([0.7]), torch.tensor([0.25])
    want_x, want_row, want_scale = ref_init_routing_quant(x, expert_idx, scale, offset, quant_mode)
    counts = torch.bincount(expert_idx.reshape(-1).long(), minlength=e).to(torch.int32)
    for device in ("cpu", "npu"):
        ex, row, tokens, before, ex_scale = torch_npu.npu_moe_init_routing_quant(
            x.to(device), expert_idx.to(device), scale=scale.to(device) if quant_mode == 0 else None,
            offset=offset.to(device) if quant_mode == 0 else None, active_num=0, expert_num=e,
            expert_tokens_num_mode=2, quant_mode=quant_mode)
        assert ex.dtype == torch.int8 and row.dtype == torch.int32 and before is None
        assert torch.equal(ex.cpu(), want_x) and torch.equal(row.cpu(), want_row)
        assert tokens.dtype == torch.int32 and torch.equal(tokens.cpu(), counts)
        if quant_mode == 1:
            assert_close(ex_scale.cpu(), want_scale)
        else:
            assert ex_scale is None
    cumsum = torch_npu.npu_moe_init_routing_quant(x, expert_idx, active_num=0, expert_num=e,
                                                  expert_tokens_num_mode=1)[2]
    assert torch.equal(cumsum, counts.cumsum(0).to(torch.int32))
    active = torch_npu.npu_moe_init_routing_quant(x, expert_idx, active_num=4, expert_num=e)
    assert active[0].shape == (4, h) and active[2] is None and active[4].shape == (4,)


def test_init_routing_quant_drop_pad():
    n, k, h, e, cap = 6, 2, 4, 3, 2
    x = rnd(n, h, seed=62)
    expert_idx = torch.randint(0, e, (n, k), generator=gen(63), dtype=torch.int32)
    ex, row, tokens, before, ex_scale = torch_npu.npu_moe_init_routing_quant(
        x, expert_idx, expert_num=e, expert_capacity=cap, drop_pad_mode=1, expert_tokens_before_capacity_flag=True)
    assert ex.shape == (e, cap, h) and tokens is None and ex_scale.shape == (e * cap,)
    assert torch.equal(before, torch.bincount(expert_idx.reshape(-1).long(), minlength=e).to(torch.int32))
    seen = [0] * e
    for choice in torch.argsort(expert_idx.reshape(-1), stable=True).tolist():
        expert = int(expert_idx.reshape(-1)[choice])
        slot = seen[expert]
        seen[expert] += 1
        if slot < cap:
            assert int(row[choice]) == expert * cap + slot
            rows = x[choice // k].float()
            s = rows.abs().amax() / 127
            assert torch.equal(ex[expert, slot], torch.round(rows / s).clamp(-128, 127).to(torch.int8))
            assert_close(ex_scale[expert * cap + slot], s)
        else:
            assert int(row[choice]) == -1


# ------------------------------------------------------------------ update expert


@pytest.mark.parametrize("balance_mode", [0, 1])
def test_update_expert(balance_mode):
    bs, k, experts, world = 6, 3, 5, 4
    g = gen(70)
    counts = torch.randint(1, 4, (experts, 1), generator=g)
    table = torch.cat([counts, torch.stack([torch.randperm(8, generator=g)[:3] for _ in range(experts)])], 1)
    table = table.to(torch.int32)
    ids = torch.randint(0, experts, (bs, k), generator=g, dtype=torch.int32)
    scales = -torch.sort(-torch.rand(bs, k, generator=g), dim=1).values
    threshold = torch.rand(1, k, generator=g) * 0.5
    active = torch.tensor([True, True, True, True, False, False])
    rank = 3
    want_ids, want_mask = torch.zeros(bs, k, dtype=torch.int32), torch.zeros(bs, k, dtype=torch.bool)
    for i in range(bs):
        for j in range(k):
            e = int(ids[i, j])
            count = int(table[e, 0])
            place = rank // math.ceil(world / count) if balance_mode == 0 else i % count
            want_ids[i, j] = table[e, place + 1]
            want_mask[i, j] = bool(active[i]) and bool(scales[i, j] >= threshold[0, j] * scales[i].sum())
    for device in ("cpu", "npu"):
        got_ids, got_mask = torch_npu.npu_moe_update_expert(
            ids.to(device), table.to(device), expert_scales=scales.to(device), pruning_threshold=threshold.to(device),
            active_mask=active.to(device), local_rank_id=rank, world_size=world, balance_mode=balance_mode)
        assert got_ids.dtype == torch.int32 and got_mask.dtype == torch.bool
        assert torch.equal(got_ids.cpu(), want_ids) and torch.equal(got_mask.cpu(), want_mask)
    got_ids, got_mask = torch_npu.npu_moe_update_expert(ids.long(), table, local_rank_id=rank, world_size=world,
                                                        balance_mode=balance_mode)
    assert got_ids.dtype == torch.int64 and torch.equal(got_ids, want_ids.long()) and bool(got_mask.all())


# ------------------------------------------------------------------ tracing


def test_shapes_under_fake_tensors_and_compile():
    with FakeTensorMode():
        x = torch.empty(10, 16, dtype=torch.bfloat16)
        rmap = torch.empty(10, 4, dtype=torch.bool)
        probs = torch.empty(10, 4, dtype=torch.float32)
        rows, pp, si = torch.ops.npu.npu_moe_token_permute_with_routing_map(x, rmap, probs=probs, num_out_tokens=25)
        assert (rows.shape, pp.shape, pp.dtype, si.shape, si.dtype) == ((20, 16), (20,), torch.float32, (20,),
                                                                        torch.int32)
        rows, pp, si = torch.ops.npu.npu_moe_token_permute_with_routing_map(x, rmap, num_out_tokens=14,
                                                                            drop_and_pad=True)
        assert rows.shape == (12, 16) and pp is None and si.shape == (12,)
        out = torch.ops.npu._npu_moe_token_unpermute_with_routing_map(rows, si, [10, 16], probs=probs,
                                                                      routing_map=rmap, drop_and_pad=True)
        assert [t.shape for t in out] == [(10, 16), (12,), (12,), (12,)]
        ex, row, tokens, before, scale = torch.ops.npu.npu_moe_init_routing_quant(
            x, torch.empty(10, 2, dtype=torch.int32), expert_num=8, expert_tokens_num_mode=2)
        assert (ex.shape, row.shape, tokens.shape, before, scale.shape) == ((20, 16), (20,), (8,), None, (20,))
        y, idx, soft = torch.ops.npu.npu_moe_gating_top_k_softmax_v2(torch.empty(3, 5, 8), k=2, output_softmax=True)
        assert (y.shape, idx.shape, soft.shape) == ((3, 5, 2), (3, 5, 2), (3, 5, 8))
    rmap = routing_map(6, 4, 2, seed=80).npu()
    x, probs = rnd(6, 3, seed=81).npu(), rnd(6, 4, seed=82).npu()

    def moe(x, probs):
        rows, _, si = torch_npu.npu_moe_token_permute_with_routing_map(x, rmap, num_out_tokens=12)
        return torch_npu.npu_moe_token_unpermute_with_routing_map(rows * 2, si, [6, 3], probs=probs,
                                                                  routing_map=rmap)

    assert_close(torch.compile(moe, backend="eager")(x, probs), moe(x, probs), atol=0, rtol=0)


# ------------------------------------------------------------------ bad input


def _x(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


_MAP = torch.ones(4, 2, dtype=torch.bool)

BAD = [
    (lambda: torch_npu.npu_moe_token_permute_with_routing_map(_x(4, 3), _x(4, 2)), "routing_map should be bool or int8"),
    (lambda: torch_npu.npu_moe_token_permute_with_routing_map(_x(4, 3), _MAP[:3]), "routing_map has 3 rows"),
    (lambda: torch_npu.npu_moe_token_permute_with_routing_map(_x(4, 3), _MAP, probs=_x(4, 3)),
     "probs of shape .* should have routing_map's shape"),
    (lambda: torch_npu.npu_moe_token_permute_with_routing_map(_x(4, 3), _MAP, num_out_tokens=12),
     "asks for 3 experts per token"),
    (lambda: torch_npu.npu_moe_token_permute_with_routing_map(_x(4, 3), _MAP, num_out_tokens=10, drop_and_pad=True),
     "capacity 5 per expert, more than the 4 tokens"),
    (lambda: torch_npu.npu_moe_token_permute_with_routing_map_grad(_x(8, 3), None, _x(8, dtype=torch.int32), _MAP, 3,
                                                                   4, False), "routing_map has 2 columns"),
    (lambda: torch_npu.npu_moe_token_permute_with_routing_map_grad(_x(8, 3), _x(7), _x(8, dtype=torch.int32), _MAP, 2,
                                                                   4, False), "probs_grad should be 1-dimensional"),
    (lambda: torch_npu.npu_moe_token_unpermute_with_routing_map(_x(8, 3), _x(8, dtype=torch.int32), [4, 2]),
     "restore_shape should be"),
    (lambda: torch_npu.npu_moe_token_unpermute_with_routing_map(_x(8, 3), _x(8, dtype=torch.int32), [3, 3]),
     "should be tokens \\* topk"),
    (lambda: torch_npu.npu_moe_token_unpermute_with_routing_map(_x(8, 3), _x(8, dtype=torch.int32), [4, 3],
                                                                probs=_x(4, 2)), "probs needs routing_map"),
    (lambda: torch_npu.npu_moe_token_unpermute_with_routing_map(_x(8, 3), _x(8), [4, 3]),
     "sorted_indices should be a 1-dimensional int32"),
    (lambda: torch_npu.npu_moe_token_unpermute_with_routing_map_grad(_x(4, 3), _x(8, dtype=torch.int32),
                                                                     _x(8, dtype=torch.int32), _MAP, None, _x(4, 2),
                                                                     False, [4, 3]), "probs needs permuted_tokens"),
    (lambda: torch_npu.npu_moe_token_permute_grad(_x(4, 3), _x(8, 3), _x(4, 2, dtype=torch.int64),
                                                  _x(8, dtype=torch.int32), True), "padded_mode=True is not supported"),
    (lambda: torch_npu.npu_moe_token_permute_grad_v2(_x(8, 3), _x(9, dtype=torch.int32), 4, torch.float32, 2),
     "sorted_indices' length 9"),
    (lambda: torch_npu.npu_moe_token_unpermute_grad_v2(_x(4, 3), _x(8, dtype=torch.int32), 8, torch.float32,
                                                       _x(4, 2)), "probs needs permuted_tokens"),
    (lambda: torch_npu.npu_moe_gating_top_k_softmax_v2(_x(4, 8), k=9), r"k should be in \[0, 8\]"),
    (lambda: torch_npu.npu_moe_gating_top_k_softmax_v2(_x(4, 8), renorm=2), "renorm should be 0 or 1"),
    (lambda: torch_npu.npu_moe_gating_top_k_softmax_v2(_x(4, 8), finished=_x(4)), "finished should be bool"),
    (lambda: torch_npu.npu_moe_gating_top_k_softmax_v2(_x(8), k=1), "x should be 2- or 3-dimensional"),
    (lambda: torch_npu.npu_moe_gating_top_k_backward(_x(4, 8), _x(4, 2), _x(4, 2, dtype=torch.int32), renorm=1),
     "renorm should be 0"),
    (lambda: torch_npu.npu_moe_gating_top_k_backward(_x(4, 8), _x(4, 2), _x(4, 3, dtype=torch.int32)),
     "expertIdx should be an int32 tensor"),
    (lambda: torch_npu.npu_moe_init_routing_quant(_x(4, 8), _x(4, 2, dtype=torch.int32), quant_mode=2),
     "quant_mode should be 0"),
    (lambda: torch_npu.npu_moe_init_routing_quant(_x(4, 8), _x(3, 2, dtype=torch.int32)),
     "expert_idx should be 2-dimensional"),
    (lambda: torch_npu.npu_moe_init_routing_quant(_x(4, 8), _x(4, 2, dtype=torch.int32), quant_mode=0),
     "scale and offset are required"),
    (lambda: torch_npu.npu_moe_init_routing_quant(_x(4, 8), _x(4, 2, dtype=torch.int32), drop_pad_mode=1,
                                                  expert_num=2), "expert_capacity should be in"),
    (lambda: torch_npu.npu_moe_update_expert(_x(4, 2, dtype=torch.int32), _x(3, 3, dtype=torch.int32)),
     "balance_mode 0 needs world_size"),
    (lambda: torch_npu.npu_moe_update_expert(_x(4, 2, dtype=torch.int32), _x(3, 3, dtype=torch.int32),
                                             balance_mode=1, pruning_threshold=_x(2)),
     "expert_scales and pruning_threshold should be given together"),
    (lambda: torch_npu.npu_moe_update_expert(_x(4, 2, dtype=torch.int32), _x(3, 3), balance_mode=1),
     "eplb_table should be a 2-dimensional int32"),
]


@pytest.mark.parametrize("call, message", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_arguments(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()
