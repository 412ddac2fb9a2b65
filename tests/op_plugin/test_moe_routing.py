"""torch_npu.op_plugin.moe_routing: npu_moe_gating_top_k, npu_moe_init_routing_v2,
npu_moe_finalize_routing, npu_moe_compute_expert_tokens and npu_moe_re_routing on npu
against per-token / per-choice Python loops on cpu (the formulas of op-plugin's
documentation), their argument errors, autograd, cpu tensors and FakeTensor shapes."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen, rnd

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=1e-3, rtol=1e-3),
       torch.bfloat16: dict(atol=1e-2, rtol=1e-2)}


def experts_tensor(n, k, high, seed, low=0):
    return torch.randint(low, high, (n, k), generator=gen(seed), dtype=torch.int32)


# ------------------------------------------------------------------ npu_moe_gating_top_k


def ref_gating_top_k(x, k, bias, k_group, group_count, group_select_mode, norm_type, scale, eps):
    """Row by row: scores, best groups, best experts (Python's stable sort), weights."""
    xs = x.float()
    ys, idxs, norms = [], [], []
    experts = xs.shape[1]
    per_group = experts // group_count
    for row in xs:
        if norm_type == 0:
            e = torch.exp(row - row.max())
            s = (e / e.sum()).tolist()
        else:
            s = [1.0 / (1.0 + math.exp(-v)) for v in row.tolist()]
        sel = [s[e] + (float(bias[e]) if bias is not None else 0.0) for e in range(experts)]
        groups = [sorted(sel[g * per_group:(g + 1) * per_group], reverse=True) for g in range(group_count)]
        gscore = [g[0] if group_select_mode == 0 else g[0] + g[1] for g in groups]
        chosen = sorted(range(group_count), key=lambda g: -gscore[g])[:k_group]
        candidates = [e for e in range(experts) if e // per_group in chosen]
        top = sorted(candidates, key=lambda e: -sel[e])[:k]
        w = [s[e] for e in top]
        if norm_type == 1:
            total = sum(w) + eps
            w = [v / total for v in w]
        ys.append([v * scale for v in w])
        idxs.append(top)
        norms.append(s)
    return torch.tensor(ys), torch.tensor(idxs, dtype=torch.int32), torch.tensor(norms)


GATING_CASES = [  # k, k_group, group_count, group_select_mode, norm_type, bias, routed_scaling_factor
    (4, 2, 4, 1, 1, True, 1.0),  # DeepSeek-V3 style: sigmoid, top-2-sum groups, bias
    (3, 1, 1, 0, 0, False, 1.0),  # plain softmax top-k
    (5, 3, 8, 0, 1, True, 2.5),  # group max, scaled
    (2, 2, 2, 1, 0, True, 0.5),  # every group kept
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", GATING_CASES)
def test_gating_top_k(dtype, case):
    k, k_group, group_count, mode, norm_type, with_bias, scale = case
    x = rnd(6, 32, seed=100, dtype=dtype)
    bias = rnd(32, seed=101, dtype=dtype) * 0.3 if with_bias else None
    y, idx, norm = torch_npu.npu_moe_gating_top_k(
        x.npu(), k, bias=bias.npu() if with_bias else None, k_group=k_group, group_count=group_count,
        group_select_mode=mode, norm_type=norm_type, routed_scaling_factor=scale, out_flag=True)
    want_y, want_idx, want_norm = ref_gating_top_k(x, k, bias, k_group, group_count, mode, norm_type, scale, 1e-20)
    assert y.dtype == dtype and idx.dtype == torch.int32 and norm.dtype == torch.float32
    assert torch.equal(idx.cpu(), want_idx)
    assert_close(y.cpu(), want_y.to(dtype), **TOL[dtype])
    assert_close(norm.cpu(), want_norm, atol=1e-6, rtol=1e-5)


def test_gating_top_k_gradient_matches_the_analytic_backward():
    """Only y is differentiable; for sigmoid with renormalisation,
    dL/ds_m = c * (g_m / S - (g . s_sel) / S^2) on the chosen experts, ds/dx = s (1 - s)."""
    x = rnd(5, 16, seed=110).npu().requires_grad_()
    bias = rnd(16, seed=111).npu() * 0.2
    g = rnd(5, 3, seed=112)
    c = 1.7
    y, idx, norm = torch_npu.npu_moe_gating_top_k(x, 3, bias=bias, k_group=2, group_count=4, group_select_mode=1,
                                                  norm_type=1, routed_scaling_factor=c)
    assert not norm.requires_grad and not idx.is_floating_point()
    y.backward(g.npu())
    s = torch.sigmoid(x.detach().cpu().double())
    want = torch.zeros(5, 16, dtype=torch.float64)
    for i in range(5):
        chosen = idx[i].cpu().long().tolist()
        total = sum(s[i, e] for e in chosen)
        dot = sum(g[i, j] * s[i, e] for j, e in enumerate(chosen))
        for j, e in enumerate(chosen):
            want[i, e] = c * (g[i, j] / total - dot / total ** 2) * s[i, e] * (1 - s[i, e])
    assert_close(x.grad.cpu().double(), want, atol=1e-6, rtol=1e-5)


# ------------------------------------------------------------------ npu_moe_init_routing_v2


def ref_init_routing_v2(x, ei, start, end, *, active_num=-1, capacity=None, expert_num=None, scale=None):
    """Choice by choice: (expanded rows as source-choice lists, gather map, scatter prefix, counts)."""
    n, k = ei.shape
    choices = [(int(ei[i, j]), i * k + j) for i in range(n) for j in range(k)]
    valid = sorted([c for c in choices if start <= c[0] < end], key=lambda c: c[0])
    counts = [sum(1 for e, _ in valid if e == want) for want in range(start, end)]
    gather = [-1] * (n * k)
    if capacity is None:
        used = len(valid) if active_num <= 0 else min(active_num, len(valid))
        rows = n * k if active_num <= 0 else min(active_num, n * k)
        slots = [valid[p][1] if p < used else None for p in range(rows)]
        for p, (_, r) in enumerate(valid):
            gather[r] = p
    else:
        slots = [None] * (expert_num * capacity)
        filled = {}
        for e, r in valid:
            rank = filled.get(e, 0)
            filled[e] = rank + 1
            if rank < capacity:
                slots[e * capacity + rank] = r
                gather[r] = e * capacity + rank
    return slots, gather, [r for _, r in valid], counts


def expand_rows(x, slots, k):
    out = torch.zeros(len(slots), x.shape[1], dtype=x.dtype)
    for p, r in enumerate(slots):
        if r is not None:
            out[p] = x[r // k]
    return out


INIT_CASES = [  # kwargs of npu_moe_init_routing_v2 beyond x / expert_idx
    dict(expert_num=8, active_expert_range=[2, 6], expert_tokens_num_flag=True, expert_tokens_num_type=1),
    dict(expert_num=8, active_num=5, row_idx_type=1, expert_tokens_num_flag=True, expert_tokens_num_type=0),
    dict(expert_num=8, active_num=0, active_expert_range=[1, 8], expert_tokens_num_flag=True,
         expert_tokens_num_type=2),
    dict(expert_num=8, drop_pad_mode=1, expert_capacity=2, expert_tokens_num_flag=True, expert_tokens_num_type=1),
    dict(expert_num=8, active_num=40),  # active_num beyond N * K
]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int8])
@pytest.mark.parametrize("case", range(len(INIT_CASES)))
def test_init_routing_v2(dtype, case):
    kw = INIT_CASES[case]
    n, k, h = 7, 3, 5
    x = rnd(n, h, seed=120, dtype=torch.float32)
    x = (x * 40).to(dtype) if dtype == torch.int8 else x.to(dtype)
    ei = experts_tensor(n, k, 8, seed=121 + case)
    scale = rnd(n, seed=122) if kw.get("drop_pad_mode", 0) == 0 else None
    ex, row_idx, tokens, ex_scale = torch_npu.npu_moe_init_routing_v2(
        x.npu(), ei.npu(), scale=None if scale is None else scale.npu(), **kw)
    start, end = kw.get("active_expert_range", [0, kw["expert_num"]])
    capacity = kw.get("expert_capacity") if kw.get("drop_pad_mode") == 1 else None
    slots, gather, scatter, counts = ref_init_routing_v2(x, ei, start, end, active_num=kw.get("active_num", -1),
                                                         capacity=capacity, expert_num=kw["expert_num"])
    want_x = expand_rows(x, slots, k)
    if capacity is not None:
        want_x = want_x.view(kw["expert_num"], capacity, h)
    assert ex.dtype == dtype and row_idx.dtype == torch.int32 and tokens.dtype == torch.int64
    assert torch.equal(ex.cpu(), want_x)
    if kw.get("row_idx_type", 0) == 0:
        assert torch.equal(row_idx.cpu(), torch.tensor(gather, dtype=torch.int32))
    else:  # the scatter map: only the first available entries are defined
        assert row_idx.shape == (n * k,)
        assert row_idx.cpu()[:len(scatter)].tolist() == scatter
    kind = kw.get("expert_tokens_num_type", 0)
    if not kw.get("expert_tokens_num_flag", False):
        assert tokens.shape == (end - start,) and not tokens.cpu().any()  # not computed
    elif kind == 1:
        assert tokens.cpu().tolist() == counts
    elif kind == 0:
        assert tokens.cpu().tolist() == [sum(counts[:i + 1]) for i in range(len(counts))]
    else:
        pairs = [[start + i, c] for i, c in enumerate(counts) if c > 0]
        assert tokens.shape == (kw["expert_num"], 2)
        assert tokens.cpu()[:len(pairs)].tolist() == pairs
    if scale is not None:
        want_scale = torch.tensor([0.0 if r is None else float(scale[r // k]) for r in slots])
        assert_close(ex_scale.cpu(), want_scale)
    else:
        assert ex_scale.shape == (len(slots),)


def test_init_routing_v2_flag_off_and_defaults():
    """Without expert_tokens_num_flag the statistics are not computed; shapes stay the kernel's."""
    x, ei = rnd(4, 6, seed=130).npu(), experts_tensor(4, 2, 5, seed=131).npu()
    ex, row_idx, tokens, ex_scale = torch_npu.npu_moe_init_routing_v2(x, ei, expert_num=5)
    assert ex.shape == (8, 6) and row_idx.shape == (8,) and ex_scale.shape == (8,)
    assert tokens.shape == (5,) and tokens.dtype == torch.int64 and not tokens.cpu().any()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("drop_pad", [False, True])
@pytest.mark.parametrize("smooth", [None, "one", "per_expert"])
def test_init_routing_v2_dynamic_quant(dtype, drop_pad, smooth):
    n, k, h, expert_num = 6, 2, 8, 4
    x = rnd(n, h, seed=140, dtype=dtype)
    ei = experts_tensor(n, k, expert_num, seed=141)
    start, end = (0, expert_num) if drop_pad else (1, 4)
    smooth_scale = None if smooth is None else rnd(1 if smooth == "one" else end - start, h, seed=142, lo=0.5, hi=2)
    kw = dict(drop_pad_mode=1, expert_capacity=2) if drop_pad else dict(active_expert_range=[start, end])
    ex, row_idx, _, ex_scale = torch_npu.npu_moe_init_routing_v2(
        x.npu(), ei.npu(), scale=None if smooth_scale is None else smooth_scale.npu(), expert_num=expert_num,
        quant_mode=1, **kw)
    slots, gather, _, _ = ref_init_routing_v2(x, ei, start, end, capacity=2 if drop_pad else None,
                                              expert_num=expert_num)
    want_q = torch.zeros(len(slots), h, dtype=torch.int8)
    want_s = torch.zeros(len(slots))
    for p, r in enumerate(slots):
        if r is None:
            continue
        row = x[r // k].float()
        if smooth_scale is not None:
            e = int(ei.view(-1)[r])
            row = row * smooth_scale[0 if smooth == "one" else e - start]
        s = row.abs().max() / 127
        want_s[p] = s
        want_q[p] = torch.round(row / s).to(torch.int8)
    assert ex.dtype == torch.int8 and ex_scale.dtype == torch.float32
    assert torch.equal(ex.cpu().reshape(len(slots), h), want_q)
    assert_close(ex_scale.cpu(), want_s, atol=1e-7, rtol=1e-5)
    assert torch.equal(row_idx.cpu(), torch.tensor(gather, dtype=torch.int32))


@pytest.mark.parametrize("dtype", FLOATS)
def test_init_routing_v2_static_quant(dtype):
    n, k, h = 5, 2, 6
    x = rnd(n, h, seed=150, dtype=dtype) * 3
    ei = experts_tensor(n, k, 4, seed=151)
    scale, offset = torch.tensor([7.5]), torch.tensor([-1.25])
    ex, _, _, _ = torch_npu.npu_moe_init_routing_v2(x.npu(), ei.npu(), scale=scale.npu(), offset=offset.npu(),
                                                    expert_num=4, quant_mode=0)
    slots, _, _, _ = ref_init_routing_v2(x, ei, 0, 4)
    want = torch.stack([torch.clamp(torch.round(x[r // k].half() * 7.5 + (-1.25)), -128, 127).to(torch.int8)
                        for r in slots])
    assert ex.dtype == torch.int8
    assert torch.equal(ex.cpu(), want)


def test_init_routing_v2_gradient_reaches_the_copied_tokens():
    x = rnd(4, 3, seed=160).npu().requires_grad_()
    ei = torch.tensor([[0, 2], [2, 1], [3, 0], [1, 1]], dtype=torch.int32).npu()
    ex, _, _, _ = torch_npu.npu_moe_init_routing_v2(x, ei, expert_num=4, active_expert_range=[1, 3])
    weights = rnd(8, 3, seed=161)
    (ex * weights.npu()).sum().backward()
    # in-range choices sorted by expert: (1: rows 3, 6, 7), (2: rows 1, 2); rows beyond are zeros
    want = torch.zeros(4, 3)
    for p, r in enumerate([3, 6, 7, 1, 2]):
        want[r // 2] += weights[p]
    assert_close(x.grad.cpu(), want)


# ------------------------------------------------------------------ npu_moe_finalize_routing


def ref_finalize(rows, skip1, skip2, bias, scales, src, experts, mode, k):
    h = rows.shape[-1]
    flat = rows.reshape(-1, h).double()
    n = src.numel() // k
    out = []
    for i in range(n):
        acc = torch.zeros(h, dtype=torch.float64)
        if skip1 is not None:
            acc = acc + skip1[i].double()
        if skip2 is not None:
            acc = acc + skip2[i].double()
        for j in range(k):
            r = int(src[j * n + i] if mode in (0, 1) else src[i * k + j])
            row = flat[r] if r >= 0 else torch.zeros(h, dtype=torch.float64)
            if bias is not None:
                row = row + bias[int(experts[i, j])].double()
            acc = acc + (scales[i, j].double() if scales is not None else 1.0) * row
        out.append(acc)
    return torch.stack(out)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("extras", ["all", "none", "skip1_scales"])
def test_finalize_routing(dtype, mode, extras):
    n, k, h, e, cap = 5, 3, 4, 6, 4
    drop = mode in (1, 3)
    rows = rnd(e, cap, h, seed=170, dtype=dtype) if drop else rnd(n * k, h, seed=170, dtype=dtype)
    if drop:
        src = torch.randint(-1, e * cap, (n * k,), generator=gen(171), dtype=torch.int32)
    else:
        src = torch.randperm(n * k, generator=gen(171)).to(torch.int32)
        src[4] = -1  # a choice outside the active expert range
    experts = experts_tensor(n, k, e, seed=172)
    skip1 = rnd(n, h, seed=173, dtype=dtype) if extras != "none" else None
    skip2 = rnd(n, h, seed=174, dtype=dtype) if extras == "all" else None
    bias = rnd(e, h, seed=175, dtype=dtype) if extras == "all" else None
    scales = rnd(n, k, seed=176, dtype=dtype) if extras != "none" else None
    on = [None if t is None else t.npu() for t in (rows, skip1, skip2, bias, scales, src, experts)]
    out = torch_npu.npu_moe_finalize_routing(*on, drop_pad_mode=mode, k=k)
    want = ref_finalize(rows, skip1, skip2, bias, scales, src, experts, mode, k)
    assert out.dtype == dtype and out.shape == (n, h)
    assert_close(out.cpu(), want.to(dtype), **TOL[dtype])


def test_finalize_routing_gradient():
    n, k, h = 4, 2, 3
    rows, scales = rnd(n * k, h, seed=180), rnd(n, k, seed=181)
    src = torch.randperm(n * k, generator=gen(182)).to(torch.int32)
    got_rows, got_scales = rows.npu().requires_grad_(), scales.npu().requires_grad_()
    out = torch_npu.npu_moe_finalize_routing(got_rows, None, None, None, got_scales, src.npu(), None,
                                             drop_pad_mode=2)
    ref_rows, ref_scales = rows.double().requires_grad_(), scales.double().requires_grad_()
    ref = ref_finalize(ref_rows, None, None, None, ref_scales, src, None, 2, k)
    g = rnd(n, h, seed=183)
    out.backward(g.npu())
    ref.backward(g.double())
    assert_close(got_rows.grad.cpu().double(), ref_rows.grad, atol=1e-6, rtol=1e-5)
    assert_close(got_scales.grad.cpu().double(), ref_scales.grad, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_init_then_finalize_round_trip(version):
    """Identity experts: finalize(init(x)) is each token times the sum of its in-range weights."""
    n, k, h = 6, 2, 5
    x = rnd(n, h, seed=190).npu()
    logits = rnd(n, 8, seed=191).npu()
    w, ei, row_idx = torch_npu.npu_moe_gating_top_k_softmax(logits, k=k)
    if version == "v1":
        ex, src, _ = torch_npu.npu_moe_init_routing(x, row_idx, ei, n)
        out = torch_npu.npu_moe_finalize_routing(ex, None, None, None, w, src, ei)  # mode 0: k-major
        keep = torch.ones(n, k)
    else:
        ex, src, _, _ = torch_npu.npu_moe_init_routing_v2(x, ei, expert_num=8, active_expert_range=[0, 4])
        out = torch_npu.npu_moe_finalize_routing(ex, None, None, None, w, src, None, drop_pad_mode=2)
        keep = (ei.cpu() < 4).float()
    assert_close(out.cpu(), x.cpu() * (w.cpu() * keep).sum(-1, keepdim=True))


# ------------------------------------------------------------------ compute_expert_tokens and re_routing


@pytest.mark.parametrize("num_expert", [1, 5, 9])
def test_compute_expert_tokens(num_expert):
    values = sorted(torch.randint(0, num_expert, (23,), generator=gen(200)).tolist())
    got = torch_npu.npu_moe_compute_expert_tokens(torch.tensor(values, dtype=torch.int32).npu(), num_expert)
    assert got.dtype == torch.int32
    assert got.cpu().tolist() == [sum(1 for v in values if v <= e) for e in range(num_expert)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8])
@pytest.mark.parametrize("count_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("with_scales", [False, True])
def test_re_routing(dtype, count_dtype, with_scales):
    counts = torch.randint(0, 4, (3, 4), generator=gen(210)).to(count_dtype)
    a = int(counts.sum())
    tokens = (rnd(a, 6, seed=211) * 30).to(dtype)
    scales = rnd(a, seed=212) if with_scales else None
    out, out_scales, idx, per_expert = torch_npu.npu_moe_re_routing(
        tokens.npu(), counts.npu(), per_token_scales=None if scales is None else scales.npu())
    starts, src = {}, 0
    for i in range(3):  # rank-major arrival
        for j in range(4):
            starts[i, j] = src
            src += int(counts[i, j])
    want_idx = [starts[i, j] + t for j in range(4) for i in range(3) for t in range(int(counts[i, j]))]
    assert idx.dtype == torch.int32 and idx.cpu().tolist() == want_idx
    assert torch.equal(out.cpu(), tokens[want_idx])
    assert per_expert.dtype == count_dtype
    assert per_expert.cpu().tolist() == [sum(int(counts[i, j]) for i in range(3)) for j in range(4)]
    assert out_scales.shape == (a,) and out_scales.dtype == torch.float32
    if with_scales:
        assert torch.equal(out_scales.cpu(), scales[want_idx])


@pytest.mark.parametrize("group_list_type", [0, 1])
@pytest.mark.parametrize("with_logit", [False, True])
@pytest.mark.parametrize("shared", [None, (1, 0.5)])
def test_grouped_matmul_finalize_routing(group_list_type, with_logit, shared):
    m, k, n, e, out_bs = 9, 16, 6, 3, 5
    x = torch.randint(-128, 128, (m, k), generator=gen(240), dtype=torch.int8)
    w = torch.randint(-128, 128, (e, k, n), generator=gen(241), dtype=torch.int8)
    scale = rnd(e, n, seed=242, lo=0.001, hi=0.01)
    pertoken = rnd(m, seed=243, lo=0.5, hi=1.5)
    logit = rnd(m, seed=244, lo=0, hi=1) if with_logit else None
    row_index = torch.randint(0, out_bs, (m,), generator=gen(245), dtype=torch.int64)
    sizes = [3, 0, 4]  # the last 2 rows of x belong to no group
    group_list = torch.tensor(sizes if group_list_type == 1 else [3, 3, 7])
    shared_input = rnd(3, n, seed=246, dtype=torch.bfloat16) if shared else None
    kw = dict(shared_input_offset=shared[0], shared_input_weight=shared[1]) if shared else {}
    on = lambda t: None if t is None else t.npu()  # noqa: E731
    out = torch_npu.npu_grouped_matmul_finalize_routing(
        x.npu(), w.npu(), group_list.npu(), scale=scale.npu(), pertoken_scale=pertoken.npu(), logit=on(logit),
        row_index=row_index.npu(), shared_input=on(shared_input), output_bs=out_bs, group_list_type=group_list_type,
        **kw)
    want = torch.zeros(out_bs, n, dtype=torch.float64)
    experts = [g for g, size in enumerate(sizes) for _ in range(size)]
    for r, g in enumerate(experts):
        acc = [sum(int(x[r, c]) * int(w[g, c, j]) for c in range(k)) for j in range(n)]
        row = torch.tensor(acc, dtype=torch.float64) * scale[g].double() * float(pertoken[r])
        want[int(row_index[r])] += row * (float(logit[r]) if with_logit else 1.0)
    if shared:
        want[shared[0]:shared[0] + 3] += shared[1] * shared_input.double()
    assert out.dtype == torch.float32 and out.shape == (out_bs, n)
    assert_close(out.cpu().double(), want, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------ cpu tensors and FakeTensor


def test_cpu_tensors_give_the_npu_results():
    x = rnd(6, 16, seed=220)
    hidden = rnd(6, 4, seed=221)
    results = []
    for device in ("cpu", "npu"):
        y, ei, _ = torch_npu.npu_moe_gating_top_k(x.to(device), 2, k_group=2, group_count=4, norm_type=1)
        ex, src, tokens, _ = torch_npu.npu_moe_init_routing_v2(hidden.to(device), ei, expert_num=16,
                                                               expert_tokens_num_flag=True, expert_tokens_num_type=1)
        out = torch_npu.npu_moe_finalize_routing(ex, None, None, None, y, src, None, drop_pad_mode=2)
        assert out.device.type == device
        results.append([t.cpu() for t in (y, ei, ex, src, tokens, out)])
    for got, want in zip(results[1], results[0]):
        assert torch.equal(got, want)


def test_shapes_under_fake_tensors():
    with FakeTensorMode():
        x = torch.empty(10, 64, dtype=torch.bfloat16)
        y, ei, norm = torch.ops.npu.npu_moe_gating_top_k(x, 6, bias=torch.empty(64, dtype=torch.bfloat16),
                                                         k_group=4, group_count=8, group_select_mode=1, norm_type=1)
        assert (y.shape, y.dtype, ei.shape, ei.dtype, norm.shape, norm.dtype) == \
            ((10, 6), torch.bfloat16, (10, 6), torch.int32, (10, 64), torch.float32)
        hidden = torch.empty(10, 32, dtype=torch.bfloat16)
        ex, src, tokens, scale = torch.ops.npu.npu_moe_init_routing_v2(
            hidden, ei, active_num=50, expert_num=64, expert_tokens_num_type=1, expert_tokens_num_flag=True,
            active_expert_range=[8, 24])
        assert (ex.shape, src.shape, tokens.shape, scale.shape) == ((50, 32), (60,), (16,), (50,))
        ex, _, _, scale = torch.ops.npu.npu_moe_init_routing_v2(hidden, ei, expert_num=64, drop_pad_mode=1,
                                                                expert_capacity=3, quant_mode=1)
        assert (ex.shape, ex.dtype, scale.shape) == ((64, 3, 32), torch.int8, (192,))
        out = torch.ops.npu.npu_moe_finalize_routing(torch.empty(60, 32, dtype=torch.bfloat16), None, None, None,
                                                     y, src, None, drop_pad_mode=2)
        assert out.shape == (10, 32) and out.dtype == torch.bfloat16
        out, _, idx, per_expert = torch.ops.npu.npu_moe_re_routing(torch.empty(12, 32, dtype=torch.int8),
                                                                   torch.empty(2, 4, dtype=torch.int64))
        assert (out.shape, idx.shape, per_expert.shape) == ((12, 32), (12,), (4,))
        assert torch.ops.npu.npu_moe_compute_expert_tokens(torch.empty(7, dtype=torch.int32), 3).shape == (3,)


def test_routing_traces_whole_under_torch_compile():
    """Dynamo + AOTAutograd (aot_eager: no Inductor build, which would take the file past its time budget)
    trace gating, init routing and finalize as one graph, and it computes what eager does."""
    x, bias, hidden = rnd(4, 16, seed=230).npu(), rnd(16, seed=231).npu(), rnd(4, 8, seed=232).npu()

    def moe(x, bias, hidden):
        y, ei, _ = torch_npu.npu_moe_gating_top_k(x, 2, bias=bias, k_group=2, group_count=4, norm_type=1)
        ex, src, tokens, _ = torch_npu.npu_moe_init_routing_v2(hidden, ei, expert_num=16, expert_tokens_num_type=1,
                                                               expert_tokens_num_flag=True)
        return torch_npu.npu_moe_finalize_routing(ex * 2, None, None, None, y, src, None, drop_pad_mode=2), tokens

    got = torch.compile(moe, backend="aot_eager", fullgraph=True)(x, bias, hidden)
    for g, w in zip(got, moe(x, bias, hidden)):
        assert torch.equal(g.cpu(), w.cpu())


# ------------------------------------------------------------------ argument errors


def _x(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype).npu()


def _ei(n=4, k=2, dtype=torch.int32):
    return torch.zeros(n, k, dtype=dtype).npu()


def _gmmfr(**kw):
    args = dict(x=_x(4, 8, dtype=torch.int8), w=_x(2, 8, 3, dtype=torch.int8), group_list=torch.tensor([1, 2]).npu(),
                scale=_x(2, 3), pertoken_scale=_x(4), row_index=_ei(4, 1)[:, 0])
    args.update(kw)
    return torch_npu.npu_grouped_matmul_finalize_routing(args.pop("x"), args.pop("w"), args.pop("group_list"), **args)


BAD = [
    # npu_moe_gating_top_k
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 3, 8), 2), "x should be 2-dimensional"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8, dtype=torch.float64), 2), "x should be one of"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 0), r"k should be in \[1, 8\]"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 5, k_group=1, group_count=2), r"k should be in \[1, 4\]"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 2, bias=_x(7)), "bias should be 1-dimensional of shape"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 2, bias=_x(8, dtype=torch.float16)), "bias dtype"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 2, group_count=3), "group_count should be a positive"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 2, k_group=3, group_count=2), r"k_group should be in"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 2, renorm=1), "renorm should be 0"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 2, norm_type=2), "norm_type should be 0"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 2, group_select_mode=2), "group_select_mode should be"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 1, k_group=1, group_count=8, group_select_mode=1),
     "group_select_mode=1 sums"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 4096), 2), "at most 2048"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 2, input_ids=_ei(2, 1)[:, 0]), "input_ids and tid2eid"),
    (lambda: torch_npu.npu_moe_gating_top_k(_x(2, 8), 2, input_ids=_ei(2, 1)[:, 0], tid2eid=_ei(5, 2)),
     "input_ids/tid2eid .* not supported on vNPU"),
    # npu_moe_init_routing_v2
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4), _ei(), expert_num=4), "x should be 2-dimensional"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(5), expert_num=4), "expert_idx should be"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(dtype=torch.int64), expert_num=4),
     "expert_idx should be int32"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3, dtype=torch.float64), _ei(), expert_num=4),
     "x should be one of"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei()), "expert_num should be given"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, active_expert_range=[3, 2]),
     "active_expert_range should satisfy"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, active_expert_range=[0, 6]),
     "active_expert_range end 6 should not exceed expert_num 4"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, drop_pad_mode=2),
     "drop_pad_mode should be 0"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, drop_pad_mode=1),
     r"expert_capacity should be in \[1, 4\]"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, drop_pad_mode=1, expert_capacity=2,
                                               row_idx_type=1), "row_idx_type should be 0"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, drop_pad_mode=1, expert_capacity=2,
                                               active_expert_range=[1, 4]), "active_expert_range should be"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, active_num=-2), "active_num"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, expert_tokens_num_type=3),
     "expert_tokens_num_type should be"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, row_idx_type=2),
     "row_idx_type should be"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, quant_mode=10),
     "quant_mode should be one of"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, quant_mode=2),
     "quant_mode=2 is not supported on vNPU"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, x_dtype=290),
     "x_dtype=290 is not supported on vNPU"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, scale=_x(3)), "scale should be"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, quant_mode=0), "scale and offset"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, quant_mode=1, scale=_x(2, 3)),
     r"scale should be a float32 tensor of shape \[1, 3\] or \[4, 3\]"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3), _ei(), expert_num=4, offset=_x(1)), "offset is only"),
    (lambda: torch_npu.npu_moe_init_routing_v2(_x(4, 3, dtype=torch.int8), _ei(), expert_num=4, quant_mode=1),
     "x should be floating-point"),
    # npu_moe_finalize_routing
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), None, None, None, None, _ei(8, 1)[:, 0], None, 4),
     r"drop_pad_mode should be in \[0, 3\]"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), None, None, None, None, _ei(8, 1)[:, 0], None, 1),
     "expanded_permuted_rows should be 3-dimensional"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3, dtype=torch.int8), None, None, None, None,
                                                _ei(8, 1)[:, 0], None), "expanded_permuted_rows should be one of"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), None, None, None, None,
                                                _ei(8, 1, dtype=torch.int64)[:, 0], None),
     "expanded_src_to_dst_row should be a 1-dimensional int32"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), None, None, None, _x(3, 2), _ei(8, 1)[:, 0], None),
     "scales should be 2-dimensional"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), None, None, None, _x(4, 2, dtype=torch.float16),
                                                _ei(8, 1)[:, 0], None), "scales dtype"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), _x(4, 2), None, None, _x(4, 2), _ei(8, 1)[:, 0], None),
     r"skip1 should have shape \[4, 3\]"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), None, _x(4, 3), None, _x(4, 2), _ei(8, 1)[:, 0], None),
     "skip2 needs skip1"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), None, None, _x(5, 3), _x(4, 2), _ei(8, 1)[:, 0], None),
     "bias needs export_for_source_row"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), None, None, _x(5, 2), _x(4, 2), _ei(8, 1)[:, 0],
                                                _ei(4, 2)), "bias should be 2-dimensional"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), None, None, None, _x(4, 2), _ei(8, 1)[:, 0], _ei(4, 3)),
     "export_for_source_row should be an int32 tensor of shape"),
    (lambda: torch_npu.npu_moe_finalize_routing(_x(8, 3), None, None, None, None, _ei(8, 1)[:, 0], None, k=3),
     "k should be a positive divisor"),
    # npu_moe_compute_expert_tokens
    (lambda: torch_npu.npu_moe_compute_expert_tokens(_ei(2, 2), 3), "sorted_expert_for_source_row should be"),
    (lambda: torch_npu.npu_moe_compute_expert_tokens(_ei(4, 1)[:, 0], 0), r"num_expert should be in \(0, 2048\]"),
    (lambda: torch_npu.npu_moe_compute_expert_tokens(_ei(4, 1)[:, 0], 4096), "num_expert should be in"),
    # npu_moe_re_routing
    (lambda: torch_npu.npu_moe_re_routing(_x(4, dtype=torch.float16), _ei(2, 2)), "tokens should be 2-dimensional"),
    (lambda: torch_npu.npu_moe_re_routing(_x(4, 2), _ei(2, 2)), "tokens should be one of"),
    (lambda: torch_npu.npu_moe_re_routing(_x(4, 2, dtype=torch.float16), _ei(2, 2)[0]),
     "expert_token_num_per_rank should be a 2-dimensional"),
    (lambda: torch_npu.npu_moe_re_routing(_x(4, 2, dtype=torch.float16), _ei(2, 2), per_token_scales=_x(3)),
     r"per_token_scales should be a float32 tensor of shape \[4\]"),
    (lambda: torch_npu.npu_moe_re_routing(_x(4, 2, dtype=torch.float16), _ei(2, 2), expert_token_num_type=0),
     "expert_token_num_type should be 1"),
    (lambda: torch_npu.npu_moe_re_routing(_x(4, 2, dtype=torch.float16), _ei(2, 2), idx_type=1),
     "idx_type should be 0"),
    (lambda: torch_npu.npu_moe_re_routing(_x(4, 2, dtype=torch.float16), _ei(2, 2), tokens_dtype=290),
     "tokens_dtype=290 is not supported on vNPU"),
    # npu_grouped_matmul_finalize_routing
    (lambda: _gmmfr(x=_x(4, 8, dtype=torch.int8)[0]), "x should be 2-dimensional"),
    (lambda: _gmmfr(x=_x(4, 8)), "x and w should be int8"),
    (lambda: _gmmfr(w=_x(2, 6, 3, dtype=torch.int8)), "should have k = 8"),
    (lambda: _gmmfr(w=_x(2, 8, 3, dtype=torch.int32)), "A8W4 .* not supported on vNPU"),
    (lambda: _gmmfr(bias=_x(2, 3)), "A8W4 .* not supported on vNPU"),
    (lambda: _gmmfr(scale=_x(3, 3)), r"scale should be a float32 tensor of shape \[2, 3\]"),
    (lambda: _gmmfr(pertoken_scale=None), "pertoken_scale should be a float32 tensor"),
    (lambda: _gmmfr(group_list=torch.tensor([1, 2, 1]).npu()), "group_list should be an int64 tensor"),
    (lambda: _gmmfr(group_list=torch.tensor([3, 2]).npu()), "group_list .* does not split the 4 rows"),
    (lambda: _gmmfr(group_list_type=2), "group_list_type should be 0"),
    (lambda: _gmmfr(logit=_x(3)), r"logit should be a float32 tensor of shape \[4\]"),
    (lambda: _gmmfr(row_index=None), "row_index=None is not supported on vNPU"),
    (lambda: _gmmfr(row_index=_x(4)), "row_index should be an int32 or int64"),
    (lambda: _gmmfr(dtype=torch.bfloat16), "dtype should be torch.float32"),
    (lambda: _gmmfr(shared_input=_x(2, 3)), "shared_input should be a bfloat16"),
    (lambda: _gmmfr(shared_input=_x(3, 3, dtype=torch.bfloat16), shared_input_offset=2),
     "shared_input_offset 2 .* should fit"),
    (lambda: _gmmfr(x_dtype=290), "x_dtype=290 is not supported on vNPU"),
]


@pytest.mark.parametrize("call, message", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_arguments(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()
