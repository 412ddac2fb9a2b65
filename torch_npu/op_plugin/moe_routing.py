"""MoE routing operators of vllm-ascend and MindSpeed: npu_moe_gating_top_k,
npu_moe_init_routing_v2, npu_moe_finalize_routing, npu_moe_compute_expert_tokens,
npu_moe_re_routing, npu_grouped_matmul_finalize_routing.

Conventions, as on the Ascend kernels (op-plugin's documentation and tests):

- npu_moe_init_routing_v2 flattens ``expert_idx`` (N, K) token-major: choice j of
  token i is expanded row ``i * K + j`` (its v1, npu_moe_init_routing, counts
  k-major, ``j * N + i``). npu_moe_finalize_routing reads ``expanded_src_to_dst_row``
  k-major for drop_pad_mode 0 / 1 ("column" order, v1's) and token-major for 2 / 3
  ("row" order, v2's).
- An index of -1 in a row map means "no row" (a choice outside the active expert
  range, or dropped over an expert's capacity).
- Sorting by expert is stable, so a choice keeps its expanded-row order inside its
  expert, and top-k ties go to the lower expert index.

Every result has a shape fixed by the argument shapes and integers, and nothing
reads tensor values back to the host (but npu_grouped_matmul_finalize_routing's
group_list, as npu_grouped_matmul's): the ops queue without synchronising and
trace under FakeTensor / torch.compile. Rows of an output the kernel leaves
unwritten (beyond the active rows, padding slots) are zeros here.
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_INT32_MAX = 2**31 - 1


def _unsupported(fn, what, reason):
    raise RuntimeError(f"{fn}: {what} is not supported on vNPU: {reason}.")


def _names(dtypes):
    return ", ".join(str(d) for d in dtypes)


# ---------------------------------------------------------------- gating top-k


def npu_moe_gating_top_k(x, k, *, bias=None, input_ids=None, tid2eid=None, k_group=1, group_count=1,
                         group_select_mode=0, renorm=0, norm_type=0, out_flag=False, routed_scaling_factor=1.0,
                         eps=1e-20):
    """(y, expert_idx int32, norm_out float32). Scores are softmax (norm_type 0) or
    sigmoid (1) of x in float32, plus bias for the selection only; experts are split
    into group_count groups, the k_group best groups kept (group score: its best
    expert, or with group_select_mode 1 its two best summed), and the top k of their
    experts chosen. y is the unbiased score of each choice, divided by the choices'
    sum + eps for sigmoid, times routed_scaling_factor. norm_out is returned whatever
    out_flag says (the kernel may leave it unwritten); like the kernel's backward, only
    y carries a gradient."""
    fn = "npu_moe_gating_top_k"
    check(x.dim() == 2, f"{fn}: x should be 2-dimensional (tokens, experts), got shape {list(x.shape)}.")
    check(x.dtype in _FLOATS, f"{fn}: x should be one of {_names(_FLOATS)}, got {x.dtype}.")
    rows, experts = x.shape
    check(experts <= 2048, f"{fn}: x has {experts} experts (last dimension); the kernel allows at most 2048.")
    if bias is not None:
        check(bias.dim() == 1 and bias.shape[0] == experts,
              f"{fn}: bias should be 1-dimensional of shape [{experts}] (x's expert count), got {list(bias.shape)}.")
        check(bias.dtype == x.dtype, f"{fn}: bias dtype {bias.dtype} should match x dtype {x.dtype}.")
    check((input_ids is None) == (tid2eid is None),
          f"{fn}: input_ids and tid2eid should be given together or both omitted.")
    if input_ids is not None:
        check(input_ids.dtype in (torch.int32, torch.int64) and input_ids.dim() == 1 and input_ids.shape[0] == rows,
              f"{fn}: input_ids should be a 1-dimensional int32 or int64 tensor of shape [{rows}], got "
              f"{input_ids.dtype} of shape {list(input_ids.shape)}.")
        check(tid2eid.dtype in (torch.int32, torch.int64) and tid2eid.dim() == 2 and tid2eid.shape[1] == k,
              f"{fn}: tid2eid should be a 2-dimensional int32 or int64 tensor with {k} (k) columns, got "
              f"{tid2eid.dtype} of shape {list(tid2eid.shape)}.")
        _unsupported(fn, "input_ids/tid2eid (hash routing)", "how the kernel combines the looked-up experts with "
                     "the scores is not documented")
    check(renorm == 0, f"{fn}: renorm should be 0 (normalise, then top-k; the only mode the kernel has), "
          f"got {renorm}.")
    check(norm_type in (0, 1), f"{fn}: norm_type should be 0 (softmax) or 1 (sigmoid), got {norm_type}.")
    check(group_select_mode in (0, 1),
          f"{fn}: group_select_mode should be 0 (group max) or 1 (sum of the group's top 2), got {group_select_mode}.")
    check(group_count >= 1 and experts % group_count == 0,
          f"{fn}: group_count should be a positive divisor of the expert count {experts}, got {group_count}.")
    per_group = experts // group_count
    check(1 <= k_group <= group_count, f"{fn}: k_group should be in [1, {group_count}] (group_count), got {k_group}.")
    check(group_select_mode == 0 or group_count == 1 or per_group >= 2,
          f"{fn}: group_select_mode=1 sums each group's top 2 experts, but group_count={group_count} leaves "
          f"{per_group} expert(s) per group.")
    check(1 <= k <= per_group * k_group,
          f"{fn}: k should be in [1, {per_group * k_group}] (experts per group * k_group), got {k}.")

    logits = x.float()
    norm = torch.softmax(logits, dim=-1) if norm_type == 0 else torch.sigmoid(logits)
    score = norm.detach() if bias is None else norm.detach() + bias.float()
    if group_count > 1 and k_group < group_count:
        grouped = score.view(rows, group_count, per_group)
        if group_select_mode == 0:
            group_score = grouped.amax(dim=-1)
        else:
            group_score = grouped.topk(2, dim=-1).values.sum(dim=-1)
        best_groups = torch.sort(group_score, dim=-1, descending=True, stable=True).indices[:, :k_group]
        keep = torch.zeros_like(group_score, dtype=torch.bool).scatter(1, best_groups, True)
        score = score.masked_fill(~keep.repeat_interleave(per_group, dim=1), float("-inf"))
    expert_idx = torch.sort(score, dim=-1, descending=True, stable=True).indices[:, :k]
    y = norm.gather(1, expert_idx)
    if norm_type == 1:
        y = y / (y.sum(dim=-1, keepdim=True) + eps)
    y = y * routed_scaling_factor
    return y.to(x.dtype), expert_idx.to(torch.int32), norm.detach()


# ---------------------------------------------------------------- init routing v2

_QUANT_MODES = (-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17)


def _expert_range(fn, active_expert_range, expert_num):
    if len(active_expert_range) == 0:
        check(expert_num >= 1, f"{fn}: expert_num should be given (>= 1) when active_expert_range is empty, "
              f"got {expert_num}.")
        return 0, expert_num
    check(len(active_expert_range) == 2,
          f"{fn}: active_expert_range should be [expert_start, expert_end], got {list(active_expert_range)}.")
    start, end = (int(v) for v in active_expert_range)
    check(0 <= start < end <= 10240, f"{fn}: active_expert_range should satisfy 0 <= expert_start < expert_end "
          f"<= 10240, got {[start, end]}.")
    check(expert_num < 0 or end <= expert_num,
          f"{fn}: active_expert_range end {end} should not exceed expert_num {expert_num}.")
    return start, end


def _dynamic_quant(rows, row_scale=None):
    """int8 rows and their float32 scales: each row divided by max|row| / 127."""
    rows = rows.float()
    if row_scale is not None:
        rows = rows * row_scale
    scale = rows.abs().amax(dim=-1) / 127
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    quant = torch.round(rows / safe.unsqueeze(-1)).clamp(-128, 127).to(torch.int8)
    return quant, scale


def npu_moe_init_routing_v2(x, expert_idx, *, scale=None, offset=None, active_num=-1, expert_capacity=-1,
                            expert_num=-1, drop_pad_mode=0, expert_tokens_num_type=0, expert_tokens_num_flag=False,
                            quant_mode=-1, active_expert_range=(), row_idx_type=0, x_dtype=None):
    """(expanded_x, expanded_row_idx int32, expert_token_cumsum_or_count int64, expanded_scale float32).

    The N * K choices (token-major) whose expert is in [expert_start, expert_end) are
    sorted by expert (stable). Dropless (drop_pad_mode 0): expanded_x holds their
    tokens in that order, the first min(active_num, available) rows of
    min(active_num, N * K) (all when active_num is -1 or 0). Drop/pad (1): each
    expert gets expert_capacity slots of an (expert_num, capacity, H) tensor,
    choices beyond capacity dropped. expanded_row_idx is the gather map (row_idx_type
    0: choice -> expanded row, -1 if none) or the scatter map (1: expanded row ->
    choice, the sort order). The per-expert statistics (cumsum, count, or
    (expert, count) pairs of the experts with tokens) are counted before any drop;
    with expert_tokens_num_flag False they are not computed (zeros). quant_mode 0
    (static: round(x * scale + offset), in float16) and 1 (dynamic per row, with
    optional smooth scale) give int8 rows."""
    fn = "npu_moe_init_routing_v2"
    check(x.dim() == 2, f"{fn}: x should be 2-dimensional (NUM_ROWS, H), got shape {list(x.shape)}.")
    check(expert_idx.dim() == 2 and expert_idx.shape[0] == x.shape[0],
          f"{fn}: expert_idx should be 2-dimensional (NUM_ROWS, K) with NUM_ROWS = {x.shape[0]} (x's rows), got "
          f"shape {list(expert_idx.shape)}.")
    check(expert_idx.dtype == torch.int32, f"{fn}: expert_idx should be int32, got {expert_idx.dtype}.")
    check(x.dtype in _FLOATS + (torch.int8,), f"{fn}: x should be one of {_names(_FLOATS + (torch.int8,))}, "
          f"got {x.dtype}.")
    if x_dtype is not None:
        _unsupported(fn, f"x_dtype={x_dtype}", "x_dtype reinterprets x as hifloat8 / float4 / int4, which vNPU "
                     "has no kernels for")
    check(drop_pad_mode in (0, 1), f"{fn}: drop_pad_mode should be 0 (dropless) or 1 (drop/pad), "
          f"got {drop_pad_mode}.")
    check(expert_tokens_num_type in (0, 1, 2),
          f"{fn}: expert_tokens_num_type should be 0 (cumsum), 1 (count) or 2 (key_value), "
          f"got {expert_tokens_num_type}.")
    check(row_idx_type in (0, 1), f"{fn}: row_idx_type should be 0 (gather) or 1 (scatter), got {row_idx_type}.")
    check(quant_mode in _QUANT_MODES, f"{fn}: quant_mode should be one of {list(_QUANT_MODES)}, got {quant_mode}.")
    if quant_mode not in (-1, 0, 1):
        _unsupported(fn, f"quant_mode={quant_mode}", "only -1 (none), 0 (static int8) and 1 (dynamic int8) are "
                     "emulated; the float8 / hifloat8 / float4 / int4 outputs are not")
    check(expert_num <= (5120 if expert_tokens_num_type == 2 else 10240),
          f"{fn}: expert_num should be at most {5120 if expert_tokens_num_type == 2 else 10240}, got {expert_num}.")
    start, end = _expert_range(fn, active_expert_range, expert_num)
    span = end - start
    if expert_tokens_num_type == 2:
        check(expert_num >= 1, f"{fn}: expert_num should be given (>= 1) with expert_tokens_num_type=2 "
              f"(key_value: an (expert_num, 2) result), got {expert_num}.")

    n, h = x.shape
    k = expert_idx.shape[1]
    total = n * k
    if drop_pad_mode == 1:
        check(expert_num >= 1, f"{fn}: expert_num should be given (>= 1) with drop_pad_mode=1, got {expert_num}.")
        check(0 < expert_capacity <= n, f"{fn}: expert_capacity should be in [1, {n}] (NUM_ROWS) with "
              f"drop_pad_mode=1, got {expert_capacity}.")
        check(start == 0 and end == expert_num, f"{fn}: active_expert_range should be [0, expert_num] = "
              f"[0, {expert_num}] with drop_pad_mode=1, got {[start, end]}.")
        check(row_idx_type == 0, f"{fn}: row_idx_type should be 0 (gather) with drop_pad_mode=1, got {row_idx_type}.")
        check(not expert_tokens_num_flag or expert_tokens_num_type == 1,
              f"{fn}: expert_tokens_num_type should be 1 (count) with drop_pad_mode=1, got {expert_tokens_num_type}.")
    else:
        check(active_num >= -1, f"{fn}: active_num should be >= -1 (-1 or 0: all rows), got {active_num}.")

    # scale / offset by quant mode
    if quant_mode == 0:
        check(scale is not None and offset is not None, f"{fn}: scale and offset are required with quant_mode=0.")
        for name, t in (("scale", scale), ("offset", offset)):
            check(t.dtype == torch.float32 and t.dim() == 1 and t.shape[0] == 1,
                  f"{fn}: {name} should be a float32 tensor of shape [1] with quant_mode=0, got {t.dtype} of shape "
                  f"{list(t.shape)}.")
    else:
        check(offset is None, f"{fn}: offset is only used with quant_mode=0 (static), got quant_mode={quant_mode}.")
    if quant_mode == 1:
        check(x.dtype != torch.int8, f"{fn}: x should be floating-point with quant_mode=1, got int8.")
        if scale is not None:
            check(scale.dtype == torch.float32 and scale.dim() == 2 and scale.shape[0] in (1, span)
                  and scale.shape[1] == h,
                  f"{fn}: scale should be a float32 tensor of shape [1, {h}] or [{span}, {h}] "
                  f"(expert_end - expert_start, H) with quant_mode=1, got {scale.dtype} of shape {list(scale.shape)}.")
    if quant_mode == 0:
        check(x.dtype != torch.int8, f"{fn}: x should be floating-point with quant_mode=0, got int8.")
    if quant_mode == -1 and scale is not None:
        check(scale.dtype == torch.float32 and scale.dim() == 1 and scale.shape[0] == n,
              f"{fn}: scale should be a float32 tensor of shape [{n}] (one per row of x) with quant_mode=-1, got "
              f"{scale.dtype} of shape {list(scale.shape)}.")

    device = x.device
    flat = expert_idx.reshape(-1).long()  # choice r = i * K + j
    in_range = (flat >= start) & (flat < end)
    key = torch.where(flat < start, torch.full_like(flat, _INT32_MAX), flat)
    sorted_expert, order = torch.sort(key, stable=True)
    sorted_valid = in_range[order]
    available = in_range.sum()
    pos = torch.arange(total, device=device)

    # statistics, counted before capacity drops
    tokens = torch.zeros(span, dtype=torch.int64, device=device)
    if expert_tokens_num_flag:
        tokens = tokens.scatter_add(0, torch.where(in_range, flat - start, 0), in_range.long())
    if expert_tokens_num_type == 0:
        tokens = tokens.cumsum(0)
    elif expert_tokens_num_type == 2:
        present = tokens > 0
        slot = torch.where(present, present.long().cumsum(0) - 1, max(expert_num, span))
        pairs = torch.stack([torch.arange(start, end, device=device), tokens], dim=1)
        tokens = torch.zeros(max(expert_num, span) + 1, 2, dtype=torch.int64, device=device)
        tokens = tokens.index_put((slot,), pairs)[:expert_num]

    if drop_pad_mode == 0:
        out_rows = total if active_num <= 0 else min(active_num, total)
        used = available if active_num <= 0 else available.clamp(max=active_num)
        if row_idx_type == 1:
            row_idx = order
        else:
            row_idx = torch.empty_like(order).scatter(0, order, torch.where(pos < available, pos, -1))
        src = order[:out_rows]
        live = pos[:out_rows] < used
        rows = x.index_select(0, src // k)
        scale_index = sorted_expert[:out_rows]
    else:
        slots = expert_num * expert_capacity
        first = torch.searchsorted(sorted_expert, sorted_expert)  # each sorted choice's expert starts here
        rank = pos - first
        kept = sorted_valid & (rank < expert_capacity)
        dest = torch.where(kept, sorted_expert * expert_capacity + rank, slots)
        row_idx = torch.empty_like(order).scatter(0, order, torch.where(kept, dest, -1))
        slot_src = torch.full((slots + 1,), total, dtype=torch.int64, device=device).scatter(0, dest, order)[:slots]
        live = slot_src < total
        src = torch.where(live, slot_src, 0)
        rows = x.index_select(0, src // k)
        scale_index = torch.arange(slots, device=device) // expert_capacity
        out_rows = slots

    live_col = live.unsqueeze(-1)
    expanded_scale = torch.zeros(out_rows, dtype=torch.float32, device=device)
    if quant_mode == -1:
        expanded_x = torch.where(live_col, rows, torch.zeros((), dtype=x.dtype, device=device))
        if scale is not None:
            expanded_scale = torch.where(live, scale.index_select(0, src // k), 0.0)
    elif quant_mode == 0:
        static = torch.round(rows.half() * scale.half() + offset.half()).clamp(-128, 127).to(torch.int8)
        expanded_x = torch.where(live_col, static, torch.zeros((), dtype=torch.int8, device=device))
    else:
        smooth = None
        if scale is not None:
            smooth = scale.expand(out_rows, h) if scale.shape[0] == 1 else \
                scale.index_select(0, torch.where(live, scale_index - start, 0))
        quant, row_scale = _dynamic_quant(rows, smooth)
        expanded_x = torch.where(live_col, quant, torch.zeros((), dtype=torch.int8, device=device))
        expanded_scale = torch.where(live, row_scale, 0.0)
    if drop_pad_mode == 1:
        expanded_x = expanded_x.view(expert_num, expert_capacity, h)
    return expanded_x, row_idx.to(torch.int32), tokens, expanded_scale


# ---------------------------------------------------------------- finalize routing


def npu_moe_finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row,
                             export_for_source_row, drop_pad_mode=0, k=1):
    """out[i] = skip1[i] + skip2[i] + sum_j scales[i, j] * (rows[dst(i, j)] + bias[expert(i, j)]),
    dst read k-major (drop_pad_mode 0 / 1) or token-major (2 / 3) from
    expanded_src_to_dst_row, rows (E, C, H) flattened in the drop/pad modes 1 / 3; a
    dst of -1 contributes a zero row (its bias term still counts). K is scales'
    second dimension, or k without scales. Accumulates in float32."""
    fn = "npu_moe_finalize_routing"
    mode = 0 if drop_pad_mode is None else drop_pad_mode
    k = 1 if k is None else k
    rows = expanded_permuted_rows
    check(mode in (0, 1, 2, 3), f"{fn}: drop_pad_mode should be in [0, 3], got {mode}.")
    check(rows.dtype in _FLOATS, f"{fn}: expanded_permuted_rows should be one of {_names(_FLOATS)}, got {rows.dtype}.")
    want_dim = 3 if mode in (1, 3) else 2
    check(rows.dim() == want_dim, f"{fn}: expanded_permuted_rows should be {want_dim}-dimensional "
          f"({'(E, C, H)' if want_dim == 3 else '(NUM_ROWS * K, H)'}) with drop_pad_mode={mode}, got shape "
          f"{list(rows.shape)}.")
    src = expanded_src_to_dst_row
    check(src.dim() == 1 and src.dtype == torch.int32,
          f"{fn}: expanded_src_to_dst_row should be a 1-dimensional int32 tensor, got {src.dtype} of shape "
          f"{list(src.shape)}.")
    h = rows.shape[-1]
    if scales is not None:
        check(scales.dim() == 2 and scales.numel() == src.numel(),
              f"{fn}: scales should be 2-dimensional (NUM_ROWS, K) with NUM_ROWS * K = {src.numel()} "
              f"(expanded_src_to_dst_row's length), got shape {list(scales.shape)}.")
        check(scales.dtype == rows.dtype, f"{fn}: scales dtype {scales.dtype} should match expanded_permuted_rows "
              f"dtype {rows.dtype}.")
        num_rows, k = scales.shape
    else:
        check(k >= 1 and src.numel() % k == 0, f"{fn}: k should be a positive divisor of expanded_src_to_dst_row's "
              f"length {src.numel()}, got {k}.")
        num_rows = src.numel() // k
    check(skip2 is None or skip1 is not None, f"{fn}: skip2 needs skip1 (with skip1 None, skip2 should be None).")
    for name, t in (("skip1", skip1), ("skip2", skip2)):
        if t is not None:
            check(list(t.shape) == [num_rows, h], f"{fn}: {name} should have shape {[num_rows, h]} (the output's), "
                  f"got {list(t.shape)}.")
            check(t.dtype == rows.dtype, f"{fn}: {name} dtype {t.dtype} should match expanded_permuted_rows dtype "
                  f"{rows.dtype}.")
    experts = export_for_source_row
    if experts is not None:
        check(experts.dtype == torch.int32 and list(experts.shape) == [num_rows, k],
              f"{fn}: export_for_source_row should be an int32 tensor of shape {[num_rows, k]} (NUM_ROWS, K), got "
              f"{experts.dtype} of shape {list(experts.shape)}.")
    if bias is not None:
        check(bias.dim() == 2 and bias.shape[1] == h, f"{fn}: bias should be 2-dimensional (E, {h}), got shape "
              f"{list(bias.shape)}.")
        check(bias.dtype == rows.dtype, f"{fn}: bias dtype {bias.dtype} should match expanded_permuted_rows dtype "
              f"{rows.dtype}.")
        check(experts is not None, f"{fn}: bias needs export_for_source_row (each choice's expert picks its bias row).")

    flat = rows.reshape(-1, h)
    index = src.long()
    index = index.view(k, num_rows).t() if mode in (0, 1) else index.view(num_rows, k)
    picked = flat[index.clamp(min=0)].float()  # (NUM_ROWS, K, H)
    picked = picked.masked_fill((index < 0).unsqueeze(-1), 0.0)
    if bias is not None:
        picked = picked + bias.float()[experts.long()]
    if scales is not None:
        picked = picked * scales.float().unsqueeze(-1)
    out = picked.sum(dim=1)
    for t in (skip1, skip2):
        if t is not None:
            out = out + t.float()
    return out.to(rows.dtype)


# ---------------------------------------------------------------- expert tokens and re-routing


def npu_moe_compute_expert_tokens(sorted_expert_for_source_row, num_expert):
    """For each expert e < num_expert, the end of its run in the sorted expert list
    (how many entries are <= e): the cumulative group_list npu_grouped_matmul takes
    with group_list_type 0."""
    fn = "npu_moe_compute_expert_tokens"
    sorted_experts = sorted_expert_for_source_row
    check(sorted_experts.dim() == 1 and sorted_experts.dtype == torch.int32,
          f"{fn}: sorted_expert_for_source_row should be a 1-dimensional int32 tensor, got {sorted_experts.dtype} "
          f"of shape {list(sorted_experts.shape)}.")
    check(sorted_experts.numel() < 2**24,
          f"{fn}: sorted_expert_for_source_row should have fewer than 2^24 elements, got {sorted_experts.numel()}.")
    check(0 < num_expert <= 2048, f"{fn}: num_expert should be in (0, 2048], got {num_expert}.")
    experts = torch.arange(num_expert, dtype=sorted_experts.dtype, device=sorted_experts.device)
    return torch.searchsorted(sorted_experts, experts, right=True).to(sorted_experts.dtype)


def npu_moe_re_routing(tokens, expert_token_num_per_rank, *, per_token_scales=None, expert_token_num_type=1,
                       idx_type=0, tokens_dtype=None):
    """(permute_tokens, permute_per_token_scales, permute_token_idx int32, expert_token_num).
    Tokens received from N ranks arrive rank-major (rank i's block for expert j holds
    expert_token_num_per_rank[i, j] tokens); they leave expert-major (expert j's
    blocks from ranks 0..N-1). permute_token_idx is the gather map (each output row's
    input row). The counts should sum to the token count A, as the kernel requires;
    they are not read back to check. Without per_token_scales the second result is
    zeros."""
    fn = "npu_moe_re_routing"
    counts = expert_token_num_per_rank
    check(tokens.dim() == 2, f"{fn}: tokens should be 2-dimensional (A, H), got shape {list(tokens.shape)}.")
    allowed = (torch.float16, torch.bfloat16, torch.int8)
    check(tokens.dtype in allowed, f"{fn}: tokens should be one of {_names(allowed)}, got {tokens.dtype}.")
    check(counts.dim() == 2 and counts.dtype in (torch.int32, torch.int64),
          f"{fn}: expert_token_num_per_rank should be a 2-dimensional int32 or int64 tensor (ranks, experts), got "
          f"{counts.dtype} of shape {list(counts.shape)}.")
    a = tokens.shape[0]
    if per_token_scales is not None:
        check(per_token_scales.dtype == torch.float32 and list(per_token_scales.shape) == [a],
              f"{fn}: per_token_scales should be a float32 tensor of shape [{a}] (one per token), got "
              f"{per_token_scales.dtype} of shape {list(per_token_scales.shape)}.")
    if tokens_dtype is not None:
        _unsupported(fn, f"tokens_dtype={tokens_dtype}", "it reinterprets tokens as hifloat8 / float4, which vNPU "
                     "has no dtype for")
    check(expert_token_num_type in (0, 1), f"{fn}: expert_token_num_type should be 0 (cumsum) or 1 (count), "
          f"got {expert_token_num_type}.")
    check(expert_token_num_type == 1, f"{fn}: expert_token_num_type should be 1 (count): torch_npu supports only "
          f"count mode, got {expert_token_num_type}.")
    check(idx_type in (0, 1), f"{fn}: idx_type should be 0 (gather) or 1 (scatter), got {idx_type}.")
    check(idx_type == 0, f"{fn}: idx_type should be 0 (gather): torch_npu supports only gather indices, "
          f"got {idx_type}.")

    ranks, experts = counts.shape
    device = tokens.device
    c = counts.long()
    src_start = c.reshape(-1).cumsum(0).view(ranks, experts) - c  # rank-major block starts
    by_expert = c.t().reshape(-1)  # block b = j * ranks + i
    dst_end = by_expert.cumsum(0)
    dst = torch.arange(a, device=device)
    block = torch.searchsorted(dst_end, dst, right=True).clamp(max=max(ranks * experts - 1, 0))
    rank, expert = block % ranks, block // ranks
    index = (src_start[rank, expert] + dst - (dst_end - by_expert)[block]).clamp(0, max(a - 1, 0))
    permuted = tokens.index_select(0, index)
    if per_token_scales is not None:
        scales = per_token_scales.index_select(0, index)
    else:
        scales = torch.zeros(a, dtype=torch.float32, device=device)
    return permuted, scales, index.to(torch.int32), c.sum(0).to(counts.dtype)


def npu_grouped_matmul_finalize_routing(x, w, group_list, *, scale=None, bias=None, offset=None, pertoken_scale=None,
                                        shared_input=None, logit=None, row_index=None, dtype=None,
                                        shared_input_weight=1.0, shared_input_offset=0, output_bs=0, group_list_type=1,
                                        tuning_config=None, x_dtype=None, w_dtype=None, scale_dtype=None,
                                        pertoken_scale_dtype=None):
    """float32 (output_bs or m, n): the A8W8 grouped matmul of int8 x (m, k) rows,
    split by group_list (counts, or cumulative with group_list_type 0), with int8
    w (e, k, n), dequantised per channel (scale (e, n)) and per token
    (pertoken_scale (m,)), weighted by logit (m,), and scatter-added into output row
    row_index[r]; shared_input rows (bfloat16) times shared_input_weight are added
    from output row shared_input_offset on. The products are exact (float64). The A8W4
    (int4 weights, bias, offset) and float8 / float4 forms are not emulated. Reads
    group_list on the host, like npu_grouped_matmul."""
    fn = "npu_grouped_matmul_finalize_routing"
    group_list_type = 1 if group_list_type is None else group_list_type
    check(group_list_type in (0, 1), f"{fn}: group_list_type should be 0 (cumsum) or 1 (count), "
          f"got {group_list_type}.")
    check(x.dim() == 2 and w.dim() == 3, f"{fn}: x should be 2-dimensional (m, k) and w 3-dimensional (e, k, n), "
          f"got shapes {list(x.shape)} and {list(w.shape)}.")
    for name, value in (("x_dtype", x_dtype), ("w_dtype", w_dtype), ("scale_dtype", scale_dtype),
                        ("pertoken_scale_dtype", pertoken_scale_dtype)):
        if value is not None:
            _unsupported(fn, f"{name}={value}", "it reinterprets a tensor as float4 / hifloat8 / float8_e8m0, which "
                         "vNPU has no kernels for")
    check(dtype in (None, torch.float32), f"{fn}: dtype should be torch.float32 (the only output type), got {dtype}.")
    if w.dtype == torch.int32 or bias is not None or offset is not None:
        _unsupported(fn, "A8W4 (int4 weights packed in int32, bias, offset)", "its int4 split of x and int64 "
                     "scales are not documented well enough to emulate")
    check(x.dtype == torch.int8 and w.dtype == torch.int8,
          f"{fn}: x and w should be int8 (A8W8), got {x.dtype} and {w.dtype}.")
    m, k = x.shape
    e, wk, n = w.shape
    check(wk == k, f"{fn}: w of shape {list(w.shape)} should have k = {k} (x's columns) as its second dimension.")
    check(scale is not None and scale.dtype == torch.float32 and list(scale.shape) == [e, n],
          f"{fn}: scale should be a float32 tensor of shape {[e, n]} (per expert and channel), got "
          f"{None if scale is None else (scale.dtype, list(scale.shape))}.")
    check(pertoken_scale is not None and pertoken_scale.dtype == torch.float32 and list(pertoken_scale.shape) == [m],
          f"{fn}: pertoken_scale should be a float32 tensor of shape [{m}] (one per row of x), got "
          f"{None if pertoken_scale is None else (pertoken_scale.dtype, list(pertoken_scale.shape))}.")
    check(group_list.dim() == 1 and group_list.shape[0] == e and group_list.dtype == torch.int64,
          f"{fn}: group_list should be an int64 tensor of shape [{e}] (one per expert), got {group_list.dtype} of "
          f"shape {list(group_list.shape)}.")
    if logit is not None:
        check(logit.dtype == torch.float32 and list(logit.shape) == [m],
              f"{fn}: logit should be a float32 tensor of shape [{m}], got {logit.dtype} of shape {list(logit.shape)}.")
    if row_index is None:
        _unsupported(fn, "row_index=None", "the kernel's combine without a row map is not documented")
    check(row_index.dtype in (torch.int32, torch.int64) and list(row_index.shape) == [m],
          f"{fn}: row_index should be an int32 or int64 tensor of shape [{m}], got {row_index.dtype} of shape "
          f"{list(row_index.shape)}.")
    out_bs = output_bs or m
    check(out_bs > 0, f"{fn}: output_bs should be >= 0 (0: m rows), got {output_bs}.")
    shared_input_offset = shared_input_offset or 0
    if shared_input is not None:
        check(shared_input.dtype == torch.bfloat16 and shared_input.dim() == 2 and shared_input.shape[1] == n,
              f"{fn}: shared_input should be a bfloat16 tensor of shape (rows, {n}), got {shared_input.dtype} of "
              f"shape {list(shared_input.shape)}.")
        check(0 <= shared_input_offset and shared_input_offset + shared_input.shape[0] <= out_bs,
              f"{fn}: shared_input_offset {shared_input_offset} + shared_input's {shared_input.shape[0]} rows should "
              f"fit in the {out_bs} output rows.")
    values = [int(v) for v in group_list.tolist()]
    sizes = values if group_list_type == 1 else [b - a for a, b in zip([0] + values, values)]
    check(all(size >= 0 for size in sizes) and sum(sizes) <= m,
          f"{fn}: group_list {values} (group_list_type {group_list_type}) does not split the {m} rows of x.")
    used = sum(sizes)
    parts = [rows.double() @ w[g].double() for g, rows in enumerate(x[:used].split(sizes))]
    acc = torch.cat(parts)
    expert_of_row = torch.repeat_interleave(torch.arange(e), torch.tensor(sizes, dtype=torch.int64)).to(x.device)
    y = acc.float() * scale.index_select(0, expert_of_row) * pertoken_scale[:used].unsqueeze(1)
    if logit is not None:
        y = y * logit[:used].unsqueeze(1)
    out = torch.zeros(out_bs, n, dtype=torch.float32, device=x.device).index_add(0, row_index[:used].long(), y)
    if shared_input is not None:
        end = shared_input_offset + shared_input.shape[0]
        out[shared_input_offset:end] += shared_input.float() * shared_input_weight
    return out


define("npu_moe_gating_top_k(Tensor x, int k, *, Tensor? bias=None, Tensor? input_ids=None, Tensor? tid2eid=None, "
       "int k_group=1, int group_count=1, int group_select_mode=0, int renorm=0, int norm_type=0, "
       "bool out_flag=False, float routed_scaling_factor=1.0, float eps=1e-20) -> (Tensor, Tensor, Tensor)",
       npu_moe_gating_top_k)
define("npu_moe_init_routing_v2(Tensor x, Tensor expert_idx, *, Tensor? scale=None, Tensor? offset=None, "
       "int active_num=-1, int expert_capacity=-1, int expert_num=-1, int drop_pad_mode=0, "
       "int expert_tokens_num_type=0, bool expert_tokens_num_flag=False, int quant_mode=-1, "
       "int[2] active_expert_range=[], int row_idx_type=0, int? x_dtype=None) -> (Tensor, Tensor, Tensor, Tensor)",
       npu_moe_init_routing_v2)
define("npu_moe_finalize_routing(Tensor expanded_permuted_rows, Tensor? skip1, Tensor? skip2, Tensor? bias, "
       "Tensor? scales, Tensor expanded_src_to_dst_row, Tensor? export_for_source_row, int? drop_pad_mode=0, "
       "int? k=1) -> Tensor", npu_moe_finalize_routing)
define("npu_moe_compute_expert_tokens(Tensor sorted_expert_for_source_row, int num_expert) -> Tensor",
       npu_moe_compute_expert_tokens)
define("npu_moe_re_routing(Tensor tokens, Tensor expert_token_num_per_rank, *, Tensor? per_token_scales=None, "
       "int expert_token_num_type=1, int idx_type=0, int? tokens_dtype=None) -> (Tensor, Tensor, Tensor, Tensor)",
       npu_moe_re_routing)
define("npu_grouped_matmul_finalize_routing(Tensor x, Tensor w, Tensor group_list, *, Tensor? scale=None, "
       "Tensor? bias=None, Tensor? offset=None, Tensor? pertoken_scale=None, Tensor? shared_input=None, "
       "Tensor? logit=None, Tensor? row_index=None, ScalarType? dtype=None, float? shared_input_weight=1.0, "
       "int? shared_input_offset=0, int? output_bs=0, int? group_list_type=1, int[]? tuning_config=None, "
       "int? x_dtype=None, int? w_dtype=None, int? scale_dtype=None, int? pertoken_scale_dtype=None) -> Tensor",
       npu_grouped_matmul_finalize_routing)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
