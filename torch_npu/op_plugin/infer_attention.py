"""Inference attention of vllm-ascend's newer paths: npu_attention_update
(merging partial attentions of context-parallel ranks by their log-sum-exp)
and npu_fused_infer_attention_score_v2 (with its .out overload, the
workspace query and the output-shape query graph capture uses).

npu_fused_infer_attention_score_v2 computes
``softmax(softmax_scale * q k^T + mask) v`` for every batch entry on its own
(so ragged TND batches, actual lengths and paged caches need no padding),
each on ATen's flash-attention CPU kernel. What vNPU supports:

- layouts BSH, BSND, BNSD, NSD, TND, NTD and the input_output pairs
  BNSD_BSND, BSH_BNSD, BSND_BNSD, NTD_TND, BSH_NBSD, BSND_NBSD, BNSD_NBSD,
  TND_NTD;
- GQA (num_key_value_heads), value head dim != query head dim (MLA: value is
  the latent key), query_rope / key_rope (MLA: their product is added to the
  scores, i.e. rope is concatenated to the head dim);
- paged K/V (block_table, block_size; caches (blocks, block_size, H) or
  (blocks, KV_N, block_size, D)); actual_seq_qlen / actual_seq_kvlen, per
  batch for BSH/BSND/BNSD (rows past a query length are zero), cumulative for
  TND/NTD (per batch for a paged cache, as the kernel reads them);
- sparse_mode 0 (optional user mask, with pre/next_tokens only when a mask
  is given), 1 (user mask), 2 / 3 / 4 (left-up causal, right-down causal,
  right-down band; the compressed 2048 x 2048 mask is required and only its
  shape is read). With one query token (Q_S = 1, not TND, no rope) the mode
  and pre/next_tokens are ignored, as the kernel ignores them;
- learnable_sink (TND / NTD_TND): a per-head logit in the softmax
  denominator; softmax_lse then includes it (the documentation does not say;
  this is how sink-aware log-sum-exps are merged);
- rows with every key masked: zero output, softmax_lse -inf (the kernel's
  inner_precise row-invalid correction; the value is not documented).

Not supported (RuntimeError "... is not supported on vNPU"): quantised inputs
and outputs (int8 / int4 / fp8, every dequant_* / quant_* argument), the
reserved *_dtype arguments, pse_shift, sparse_mode 9 (tree mask) and the NZ
cache layout.
"""

import torch
import torch.nn.functional as F

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.attention import _band_masked

_MAX_TOKENS = 2147483647


# --- npu_attention_update ------------------------------------------------------

def npu_attention_update(lse, local_out, update_type):
    """Merges SP partial attentions: ``lse_m = log(sum_i exp(lse_i))`` (via the
    maximum, so large lse stay finite) and ``out = sum_i exp(lse_i - lse_m)
    * out_i``, in float32, out in local_out's dtype. update_type 0 returns
    (out, None) as the kernel does; 1 returns (out, lse_m)."""
    fn = "npu_attention_update"
    check(update_type in (0, 1), f"{fn}: update_type should be 0 (out only) or 1 (out and lse_out), but got "
          f"{update_type}.")
    check(len(lse) == len(local_out), f"{fn}: lse and local_out should have the same length (the SP degree), but "
          f"got {len(lse)} and {len(local_out)}.")
    check(1 <= len(lse) <= 16, f"{fn}: the SP degree (len(lse)) should be in [1, 16], but got {len(lse)}.")
    first = local_out[0]
    check(first.dim() == 2, f"{fn}: local_out[0] should be 2-D (batch * seq_len * head_num, head_dim), but got "
          f"shape {list(first.shape)}.")
    rows, head_dim = first.shape
    check(first.dtype in (torch.float32, torch.float16, torch.bfloat16),
          f"{fn}: local_out should be float32, float16 or bfloat16, but got {first.dtype}.")
    check(8 <= head_dim <= 512 and head_dim % 8 == 0,
          f"{fn}: head_dim (local_out's last dimension) should be a multiple of 8 in [8, 512], but got {head_dim}.")
    for i, (l, o) in enumerate(zip(lse, local_out)):
        check(l.dtype == torch.float32, f"{fn}: lse[{i}] should be float32, but got {l.dtype}.")
        check(l.dim() == 1 and l.shape[0] == rows, f"{fn}: lse[{i}] should have shape [{rows}], but got "
              f"{list(l.shape)}.")
        check(o.dtype == first.dtype and o.shape == first.shape,
              f"{fn}: local_out[{i}] should be {first.dtype} of shape {list(first.shape)} like local_out[0], but "
              f"got {o.dtype} of shape {list(o.shape)}.")
    stacked = torch.stack(list(lse))  # (SP, rows)
    top = stacked.max(dim=0).values
    merged = top + torch.log(torch.exp(stacked - top).sum(dim=0))
    weights = torch.exp(stacked - merged)
    out = (torch.stack([o.float() for o in local_out]) * weights.unsqueeze(-1)).sum(dim=0).to(first.dtype)
    return out, (merged if update_type == 1 else None)


# --- npu_fused_infer_attention_score_v2: layouts -------------------------------

# input_layout -> (layout of query / key / value, layout of attention_out)
_LAYOUTS = {
    "BSH": ("BSH", "BSH"), "BSND": ("BSND", "BSND"), "BNSD": ("BNSD", "BNSD"), "NSD": ("NSD", "NSD"),
    "TND": ("TND", "TND"), "NTD": ("NTD", "NTD"), "BNSD_BSND": ("BNSD", "BSND"), "BSH_BNSD": ("BSH", "BNSD"),
    "BSND_BNSD": ("BSND", "BNSD"), "NTD_TND": ("NTD", "TND"), "BSH_NBSD": ("BSH", "NBSD"),
    "BSND_NBSD": ("BSND", "NBSD"), "BNSD_NBSD": ("BNSD", "NBSD"), "TND_NTD": ("TND", "NTD"),
}
_DIMS = {"BSH": 3, "BSND": 4, "BNSD": 4, "NSD": 3, "TND": 3, "NTD": 3}
_FIA = "npu_fused_infer_attention_score_v2"


def _split_layout(input_layout):
    check(input_layout in _LAYOUTS, f"{_FIA}: input_layout should be one of {list(_LAYOUTS)}, but got "
          f"'{input_layout}'.")
    return _LAYOUTS[input_layout]


def _to_bnsd(x, layout, heads, arg):
    """x in a batched layout as (B, N, S, D); BSH splits H into `heads`."""
    check(x.dim() == _DIMS[layout], f"{_FIA}: {arg} should be {_DIMS[layout]}-D for layout {layout}, but got "
          f"shape {list(x.shape)}.")
    if layout == "BSH":
        check(x.shape[2] % heads == 0, f"{_FIA}: the hidden size {x.shape[2]} of {arg} is not a multiple of its "
              f"head count {heads}.")
        return x.view(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)
    if layout == "BSND":
        return x.transpose(1, 2)
    if layout == "NSD":
        return x.unsqueeze(0)
    return x


def _to_tnd(x, layout, arg):
    check(x.dim() == 3, f"{_FIA}: {arg} should be 3-D for layout {layout}, but got shape {list(x.shape)}.")
    return x if layout == "TND" else x.transpose(0, 1)


def _lengths(values, batch, full, arg):
    """Per-batch lengths from actual_seq_*: one value for all, or the first `batch`."""
    if values is None:
        return [full] * batch
    values = [int(v) for v in values]
    check(len(values) == 1 or len(values) >= batch, f"{_FIA}: {arg} should have 1 or at least B = {batch} "
          f"entries, but got {len(values)}.")
    values = values * batch if len(values) == 1 else values[:batch]
    check(all(0 <= v <= full for v in values), f"{_FIA}: {arg} {values} should be in [0, {full}].")
    return values


def _per_sequence(t, spans):
    """A (T, N, D) tensor of packed sequences split into each one's (N, S, D)."""
    return [t[a:b].transpose(0, 1) for a, b in spans]


def _rope_per_sequence(rope, rope_name, tnd, original, name, in_layout, spans):
    """The rope part of query or key in TND layouts, split like it (None when absent)."""
    if rope is None:
        return None
    rope_tnd = _to_tnd(rope, in_layout, rope_name)
    check(rope_tnd.shape[:2] == tnd.shape[:2], f"{_FIA}: {rope_name} {list(rope.shape)} should match {name} "
          f"{list(original.shape)} except in D.")
    return _per_sequence(rope_tnd, spans)


def _cumulative(values, total, arg):
    """Per-batch (start, end) from cumulative lengths (TND / NTD)."""
    check(values is not None, f"{_FIA}: input_layout TND / NTD needs {arg} (cumulative lengths).")
    values = [int(v) for v in values]
    check(len(values) > 0 and all(b >= a for a, b in zip([0] + values, values)) and values[-1] <= total,
          f"{_FIA}: {arg} should be non-decreasing cumulative lengths ending at most at {total}, but got {values}.")
    return list(zip([0] + values[:-1], values))


def _page(cache, table_row, length, kv_heads):
    """One sequence's (KV_N, length, D) out of a paged cache."""
    if length == 0:
        shape = (kv_heads, 0, cache.shape[-1] // kv_heads if cache.dim() == 3 else cache.shape[-1])
        return cache.new_empty(shape)
    block = cache.shape[1] if cache.dim() == 3 else cache.shape[2]
    blocks = cache[table_row[:(length + block - 1) // block].long()]
    if cache.dim() == 3:  # (blocks, block_size, H)
        return blocks.reshape(-1, kv_heads, cache.shape[2] // kv_heads)[:length].transpose(0, 1)
    return blocks.transpose(0, 1).reshape(kv_heads, -1, cache.shape[3])[:, :length]  # (blocks, KV_N, bs, D)


# --- masks -----------------------------------------------------------------------

def _check_mask(atten_mask, sparse_mode, tnd, decode):
    if sparse_mode in (2, 3, 4):
        if decode:
            return
        check(atten_mask is not None and list(atten_mask.shape[-2:]) == [2048, 2048] and atten_mask.dim() <= 4
              and all(s == 1 for s in atten_mask.shape[:-2]),
              f"{_FIA}: sparse_mode {sparse_mode} needs the compressed atten_mask of shape [2048, 2048] "
              "(or [1, 2048, 2048], [1, 1, 2048, 2048]): torch.triu(torch.ones(2048, 2048), diagonal=1).bool(), "
              f"but got {None if atten_mask is None else list(atten_mask.shape)}.")
        return
    if sparse_mode == 1:
        check(atten_mask is not None, f"{_FIA}: sparse_mode 1 (allMask) needs atten_mask.")
    if atten_mask is not None:
        check(not tnd, f"{_FIA}: an explicit atten_mask with sparse_mode {sparse_mode} is not supported for "
              "TND / NTD layouts (use sparse_mode 2, 3 or 4 with the compressed mask).")
        check(atten_mask.dtype in (torch.bool, torch.int8, torch.uint8),
              f"{_FIA}: atten_mask should be bool, int8 or uint8 (1 = masked out), but got {atten_mask.dtype}.")
        check(atten_mask.dim() in (2, 3, 4), f"{_FIA}: atten_mask should be 2-, 3- or 4-D, but got shape "
              f"{list(atten_mask.shape)}.")


def _user_rows(atten_mask, b, batch, sq, skv, decode):
    """Batch b's (sq, skv) block of a user mask: (Q_S, KV_S) / (B, KV_S) for one
    query token, (1 or B, Q_S, KV_S), (1 or B, 1, Q_S, KV_S); the last two
    dimensions may be padded beyond Q_S / KV_S."""
    m = atten_mask
    if m.dim() == 2 and decode:
        check(m.shape[0] in (1, batch) and m.shape[1] >= skv, f"{_FIA}: atten_mask of shape {list(m.shape)} should "
              f"be (B, KV_S) = ({batch}, >= {skv}) for one query token.")
        return m[b if m.shape[0] > 1 else 0, :skv].unsqueeze(0).bool()
    if m.dim() == 4:
        check(m.shape[1] == 1, f"{_FIA}: a 4-D atten_mask should be (B or 1, 1, Q_S, KV_S), but got "
              f"{list(m.shape)}.")
        m = m[:, 0]
    if m.dim() == 3:
        check(m.shape[0] in (1, batch), f"{_FIA}: atten_mask of shape {list(atten_mask.shape)} should have a batch "
              f"dimension of 1 or B = {batch}.")
        m = m[b if m.shape[0] > 1 else 0]
    check(m.shape[0] >= sq and m.shape[1] >= skv, f"{_FIA}: atten_mask of shape {list(atten_mask.shape)} is "
          f"smaller than the attention (Q_S, KV_S) = ({sq}, {skv}).")
    return m[:sq, :skv].bool()


def _masked(atten_mask, sparse_mode, pre, nxt, b, batch, sq, skv, device, decode):
    """(sq, skv) bool, True = masked out, or None."""
    if decode:  # one query token: sparse_mode and pre/next_tokens do not apply
        if sparse_mode in (0, 1) and atten_mask is not None:
            return _user_rows(atten_mask, b, batch, sq, skv, True)
        return None
    if sparse_mode in (0, 1):
        if atten_mask is None:
            return None
        masked = _user_rows(atten_mask, b, batch, sq, skv, False)
        if sparse_mode == 0 and (pre < sq + skv or nxt < sq + skv):
            masked = masked | _band_masked(sq, skv, device, 0, pre, nxt)
        return masked
    if sparse_mode == 2:
        return _band_masked(sq, skv, device, 0, _MAX_TOKENS, 0)
    if sparse_mode == 3:
        return _band_masked(sq, skv, device, skv - sq, _MAX_TOKENS, 0)
    return _band_masked(sq, skv, device, skv - sq, pre, nxt)  # 4: band, right-down aligned


# --- the computation -------------------------------------------------------------

def _attend(q, k, v, masked, scale, sink):
    """One batch entry: q (N, Sq, Dq), k (KV_N, Skv, Dq), v (KV_N, Skv, Dv) ->
    (out (N, Sq, Dv), lse (N, Sq) float32)."""
    n, sq = q.shape[0], q.shape[1]
    dv = v.shape[-1]
    if k.shape[0] != n:  # GQA: each key/value head serves a group of query heads
        k = k.repeat_interleave(n // k.shape[0], dim=0)
        v = v.repeat_interleave(n // v.shape[0], dim=0)
    skv = k.shape[1]
    if skv == 0 or sq == 0:
        out = q.new_zeros((n, sq, dv))
        lse = torch.full((n, sq), float("-inf"), device=q.device)
    else:
        width = max(q.shape[-1], dv)  # the CPU flash kernel wants one head size: zero-pad
        if q.shape[-1] < width:
            q = F.pad(q, (0, width - q.shape[-1]))
            k = F.pad(k, (0, width - k.shape[-1]))
        if dv < width:
            v = F.pad(v, (0, width - dv))
        bias = None
        if masked is not None:
            bias = torch.zeros((1, 1, sq, skv), dtype=q.dtype, device=q.device).masked_fill_(masked, float("-inf"))
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), 0.0, False, attn_mask=bias, scale=scale)
        out, lse = out[0, ..., :dv], lse[0].float()
        if masked is not None:  # rows with no key left: zero output, lse -inf
            empty = masked.all(dim=-1)
            out = out.masked_fill(empty.view(1, sq, 1), 0)
            lse = lse.masked_fill(empty.view(1, sq), float("-inf"))
    if sink is not None:  # one more logit per head in the denominator, no value
        total = torch.logaddexp(lse, sink.float().view(n, 1).to(lse.device))
        out = (out.float() * torch.exp(lse - total).unsqueeze(-1)).to(q.dtype)
        lse = total
    return out, lse


def _check_unsupported(query, key, value, query_rope, key_rope, pse_shift, quantised, dtypes, sparse_mode,
                       inner_precise, num_query_heads):
    check(all(t is None for t in quantised.values()),
          f"{_FIA}: {[n for n, t in quantised.items() if t is not None]} (quantised attention) is not supported on "
          "vNPU: only float16 / bfloat16 attention is emulated.")
    check(all(d is None for d in dtypes.values()),
          f"{_FIA}: {[n for n, d in dtypes.items() if d is not None]} is not supported on vNPU: these arguments "
          "reinterpret tensor dtypes (hifloat8, fp4, ...) that vNPU does not emulate.")
    check(pse_shift is None, f"{_FIA}: pse_shift is not supported on vNPU: where the kernel adds it relative to "
          "the scaling is not documented.")
    check(query.dtype in (torch.float16, torch.bfloat16),
          f"{_FIA}: query should be float16 or bfloat16, but got {query.dtype}"
          + (" (quantised attention is not supported on vNPU)." if query.dtype in (torch.int8, torch.uint8) else "."))
    for name, t in (("key", key), ("value", value)):
        check(t.dtype == query.dtype, f"{_FIA}: {name} dtype {t.dtype} should be query's dtype {query.dtype} "
              "(int8 / int4 key and value, i.e. quantised attention, are not supported on vNPU).")
        check(t.device == query.device, f"{_FIA}: {name} is on {t.device} but query is on {query.device}.")
    check((query_rope is None) == (key_rope is None),
          f"{_FIA}: query_rope and key_rope should be given together (MLA), but got only "
          f"{'query_rope' if query_rope is not None else 'key_rope'}.")
    if query_rope is not None:
        check(query_rope.dtype == query.dtype and key_rope.dtype == key.dtype,
              f"{_FIA}: query_rope / key_rope should have the dtypes of query / key, but got {query_rope.dtype} and "
              f"{key_rope.dtype}.")
    check(sparse_mode in (0, 1, 2, 3, 4, 9), f"{_FIA}: sparse_mode should be one of 0, 1, 2, 3, 4, 9, but got "
          f"{sparse_mode}.")
    check(sparse_mode != 9, f"{_FIA}: sparse_mode=9 is not supported on vNPU: the tree mask's layout against the "
          "key/value cache is not documented.")
    check(inner_precise in (0, 1, 2, 3), f"{_FIA}: inner_precise should be 0, 1, 2 or 3, but got {inner_precise}.")
    check(num_query_heads > 0, f"{_FIA}: num_query_heads should be positive, but got {num_query_heads}.")


def _fia_v2(query, key, value, query_rope, key_rope, atten_mask, actual_seq_qlen, actual_seq_kvlen, block_table,
            learnable_sink, num_query_heads, num_key_value_heads, softmax_scale, pre_tokens, next_tokens,
            input_layout, sparse_mode, block_size, return_softmax_lse):
    in_layout, out_layout = _split_layout(input_layout)
    tnd = in_layout in ("TND", "NTD")
    nq = num_query_heads
    check(query.dim() == _DIMS[in_layout], f"{_FIA}: query should be {_DIMS[in_layout]}-D for input_layout "
          f"'{input_layout}', but got shape {list(query.shape)}.")
    paged = block_table is not None
    if learnable_sink is not None:
        check(input_layout in ("TND", "NTD_TND"), f"{_FIA}: learnable_sink needs input_layout 'TND' or 'NTD_TND', "
              f"but got '{input_layout}'.")
        check(learnable_sink.is_floating_point() and list(learnable_sink.shape) == [nq],
              f"{_FIA}: learnable_sink should be a floating tensor of shape [{nq}] (num_query_heads), but got "
              f"{learnable_sink.dtype} of shape {list(learnable_sink.shape)}.")

    # query (and query_rope) per batch entry: (N, Sq, D)
    if tnd:
        qt = _to_tnd(query, in_layout, "query")
        check(qt.shape[1] == nq, f"{_FIA}: num_query_heads {nq} does not match query's head count {qt.shape[1]}.")
        spans = _cumulative(actual_seq_qlen, qt.shape[0], "actual_seq_qlen")
        batch = len(spans)
        qs = _per_sequence(qt, spans)
        qrs = _rope_per_sequence(query_rope, "query_rope", qt, query, "query", in_layout, spans)
        q_len = [b - a for a, b in spans]
        decode = False
    else:
        qb = _to_bnsd(query, in_layout, nq, "query")
        check(qb.shape[1] == nq, f"{_FIA}: num_query_heads {nq} does not match query's head count {qb.shape[1]}.")
        batch, q_full = qb.shape[0], qb.shape[2]
        decode = q_full == 1 and query_rope is None
        q_len = [q_full] * batch if decode else _lengths(actual_seq_qlen, batch, q_full, "actual_seq_qlen")
        qs = [qb[i, :, :q_len[i]] for i in range(batch)]
        qrs = None
        if query_rope is not None:
            qrb = _to_bnsd(query_rope, in_layout, nq, "query_rope")
            check(qrb.shape[:3] == qb.shape[:3], f"{_FIA}: query_rope {list(query_rope.shape)} should match query "
                  f"{list(query.shape)} except in D.")
            qrs = [qrb[i, :, :q_len[i]] for i in range(batch)]

    # key / value (and key_rope) per batch entry: (KV_N, Skv, D)
    kvn = num_key_value_heads or nq
    if paged:
        check(block_table.dim() == 2 and block_table.shape[0] == batch,
              f"{_FIA}: block_table should be (B, max_blocks) with B = {batch}, but got shape "
              f"{list(block_table.shape)}.")
        check(block_table.dtype in (torch.int32, torch.int64), f"{_FIA}: block_table should be int32, but got "
              f"{block_table.dtype}.")
        check(key.dim() in (3, 4), f"{_FIA}: the paged key / value cache should be (blocks, block_size, H) or "
              f"(blocks, KV_N, block_size, D), but got shape {list(key.shape)}"
              + (" (the NZ layout is not supported on vNPU)." if key.dim() == 5 else "."))
        check(key.dim() == 3 or in_layout not in ("BSH", "BSND"),
              f"{_FIA}: with input_layout '{input_layout}' the paged cache should be (blocks, block_size, H), but "
              f"got shape {list(key.shape)}.")
        check(value.dim() == key.dim() and value.shape[:-1] == key.shape[:-1],
              f"{_FIA}: value {list(value.shape)} should match key {list(key.shape)} except in the last dimension.")
        cache_block = key.shape[1] if key.dim() == 3 else key.shape[2]
        check(block_size == cache_block, f"{_FIA}: block_size {block_size} should be the cache's block size "
              f"{cache_block} (key of shape {list(key.shape)}).")
        if key.dim() == 4:
            check(num_key_value_heads in (0, key.shape[1]), f"{_FIA}: num_key_value_heads {num_key_value_heads} "
                  f"does not match the cache's head count {key.shape[1]}.")
            kvn = key.shape[1]
        else:
            check(key.shape[2] % kvn == 0 and value.shape[2] % kvn == 0,
                  f"{_FIA}: the cache's hidden sizes {key.shape[2]} / {value.shape[2]} are not multiples of the "
                  f"key/value head count {kvn}.")
        capacity = block_table.shape[1] * block_size
        check(actual_seq_kvlen is not None, f"{_FIA}: a paged cache (block_table) needs actual_seq_kvlen.")
        if tnd:
            kv_len = [int(v) for v in actual_seq_kvlen]
            check(len(kv_len) == batch and all(0 <= v <= capacity for v in kv_len),
                  f"{_FIA}: with a paged cache actual_seq_kvlen should hold B = {batch} per-sequence lengths in "
                  f"[0, {capacity}], but got {kv_len}.")
        else:
            kv_len = _lengths(actual_seq_kvlen, batch, capacity, "actual_seq_kvlen")
        ks = [_page(key, block_table[i], kv_len[i], kvn) for i in range(batch)]
        vs = [_page(value, block_table[i], kv_len[i], kvn) for i in range(batch)]
        krs = None
        if key_rope is not None:
            check(key_rope.dim() == key.dim() and key_rope.shape[:-1] == key.shape[:-1],
                  f"{_FIA}: key_rope {list(key_rope.shape)} should match key {list(key.shape)} except in the last "
                  "dimension.")
            krs = [_page(key_rope, block_table[i], kv_len[i], kvn) for i in range(batch)]
    elif tnd:
        kt, vt = _to_tnd(key, in_layout, "key"), _to_tnd(value, in_layout, "value")
        check(kt.shape[:2] == vt.shape[:2], f"{_FIA}: key {list(key.shape)} and value {list(value.shape)} should "
              "match except in D.")
        check(num_key_value_heads in (0, kt.shape[1]), f"{_FIA}: num_key_value_heads {num_key_value_heads} does "
              f"not match key's head count {kt.shape[1]}.")
        kvn = kt.shape[1]
        kv_spans = _cumulative(actual_seq_kvlen, kt.shape[0], "actual_seq_kvlen")
        check(len(kv_spans) == batch, f"{_FIA}: actual_seq_kvlen has {len(kv_spans)} entries but actual_seq_qlen "
              f"has {batch}.")
        kv_len = [b - a for a, b in kv_spans]
        ks, vs = _per_sequence(kt, kv_spans), _per_sequence(vt, kv_spans)
        krs = _rope_per_sequence(key_rope, "key_rope", kt, key, "key", in_layout, kv_spans)
    else:
        kb, vb = _to_bnsd(key, in_layout, kvn, "key"), _to_bnsd(value, in_layout, kvn, "value")
        check(kb.shape[:3] == vb.shape[:3] and kb.shape[0] == batch,
              f"{_FIA}: key {list(key.shape)} and value {list(value.shape)} should match query's batch {batch} "
              "and each other except in D.")
        check(num_key_value_heads in (0, kb.shape[1]), f"{_FIA}: num_key_value_heads {num_key_value_heads} does "
              f"not match key's head count {kb.shape[1]}.")
        kvn = kb.shape[1]
        kv_len = _lengths(actual_seq_kvlen, batch, kb.shape[2], "actual_seq_kvlen")
        ks = [kb[i, :, :kv_len[i]] for i in range(batch)]
        vs = [vb[i, :, :kv_len[i]] for i in range(batch)]
        krs = None
        if key_rope is not None:
            krb = _to_bnsd(key_rope, in_layout, kvn, "key_rope")
            check(krb.shape[:3] == kb.shape[:3], f"{_FIA}: key_rope {list(key_rope.shape)} should match key "
                  f"{list(key.shape)} except in D.")
            krs = [krb[i, :, :kv_len[i]] for i in range(batch)]
    check(kvn > 0 and nq % kvn == 0, f"{_FIA}: num_query_heads {nq} should be a multiple of the key/value head "
          f"count {kvn}.")
    check(ks[0].shape[-1] == qs[0].shape[-1], f"{_FIA}: key's head dim {ks[0].shape[-1]} should equal query's "
          f"{qs[0].shape[-1]}.")
    if qrs is not None:
        check(krs[0].shape[-1] == qrs[0].shape[-1], f"{_FIA}: key_rope's head dim {krs[0].shape[-1]} should equal "
              f"query_rope's {qrs[0].shape[-1]}.")

    _check_mask(atten_mask, sparse_mode, tnd, decode)
    outs, lses = [], []
    for i in range(batch):
        q, k = qs[i], ks[i]
        if qrs is not None:  # MLA: q_rope . k_rope adds to q . k
            q, k = torch.cat((q, qrs[i]), dim=-1), torch.cat((k, krs[i]), dim=-1)
        masked = _masked(atten_mask, sparse_mode, pre_tokens, next_tokens, i, batch, q.shape[1], k.shape[1],
                         query.device, decode)
        out, lse = _attend(q, k, vs[i], masked, softmax_scale, learnable_sink)
        outs.append(out)
        lses.append(lse)

    dv = vs[0].shape[-1]
    if tnd:
        total = qt.shape[0]
        out = query.new_zeros((total, nq, dv))
        lse = torch.full((total, nq), float("-inf"), device=query.device)
        if spans:
            used = spans[-1][1]
            out = torch.cat([o.transpose(0, 1) for o in outs] + [out[used:]], dim=0)
            lse = torch.cat([l.transpose(0, 1) for l in lses] + [lse[used:]], dim=0)
        out = out if out_layout == "TND" else out.transpose(0, 1).contiguous()
        lse = lse.unsqueeze(-1)
    else:
        q_full = qb.shape[2]
        out = torch.stack([F.pad(o, (0, 0, 0, q_full - o.shape[1])) for o in outs])  # (B, N, S, Dv)
        lse = torch.stack([F.pad(l, (0, q_full - l.shape[1]), value=float("-inf")) for l in lses]).unsqueeze(-1)
        if out_layout == "BSH":
            out = out.transpose(1, 2).reshape(batch, q_full, nq * dv)
        elif out_layout == "BSND":
            out = out.transpose(1, 2).contiguous()
        elif out_layout == "NBSD":
            out = out.transpose(0, 1).contiguous()
        elif out_layout == "NSD":
            out = out[0]
    if not return_softmax_lse:
        lse = torch.empty((0,), dtype=torch.float32, device=query.device)
    return out, lse


def _v2(query, key, value, query_rope=None, key_rope=None, pse_shift=None, atten_mask=None, actual_seq_qlen=None,
        actual_seq_kvlen=None, block_table=None, dequant_scale_query=None, dequant_scale_key=None,
        dequant_offset_key=None, dequant_scale_value=None, dequant_offset_value=None, dequant_scale_key_rope=None,
        quant_scale_out=None, quant_offset_out=None, quant_scale_p=None, learnable_sink=None, num_query_heads=1,
        num_key_value_heads=0, softmax_scale=1.0, pre_tokens=_MAX_TOKENS, next_tokens=_MAX_TOKENS,
        input_layout="BSH", sparse_mode=0, block_size=0, query_quant_mode=0, key_quant_mode=0, value_quant_mode=0,
        inner_precise=0, return_softmax_lse=False, query_dtype=None, key_dtype=None, value_dtype=None,
        query_rope_dtype=None, key_rope_dtype=None, key_shared_prefix_dtype=None, value_shared_prefix_dtype=None,
        dequant_scale_query_dtype=None, dequant_scale_key_dtype=None, dequant_scale_value_dtype=None,
        dequant_scale_key_rope_dtype=None, out_dtype=None, compute=True):
    quantised = dict(dequant_scale_query=dequant_scale_query, dequant_scale_key=dequant_scale_key,
                     dequant_offset_key=dequant_offset_key, dequant_scale_value=dequant_scale_value,
                     dequant_offset_value=dequant_offset_value, dequant_scale_key_rope=dequant_scale_key_rope,
                     quant_scale_out=quant_scale_out, quant_offset_out=quant_offset_out, quant_scale_p=quant_scale_p)
    dtypes = dict(query_dtype=query_dtype, key_dtype=key_dtype, value_dtype=value_dtype,
                  query_rope_dtype=query_rope_dtype, key_rope_dtype=key_rope_dtype,
                  key_shared_prefix_dtype=key_shared_prefix_dtype, value_shared_prefix_dtype=value_shared_prefix_dtype,
                  dequant_scale_query_dtype=dequant_scale_query_dtype, dequant_scale_key_dtype=dequant_scale_key_dtype,
                  dequant_scale_value_dtype=dequant_scale_value_dtype,
                  dequant_scale_key_rope_dtype=dequant_scale_key_rope_dtype, out_dtype=out_dtype)
    _check_unsupported(query, key, value, query_rope, key_rope, pse_shift, quantised, dtypes, sparse_mode,
                       inner_precise, num_query_heads)
    check(query_quant_mode == 0 and key_quant_mode == 0 and value_quant_mode == 0,
          f"{_FIA}: query/key/value_quant_mode ({query_quant_mode}, {key_quant_mode}, {value_quant_mode}) select "
          "quantised attention, which is not supported on vNPU.")
    _split_layout(input_layout)
    if not compute:
        return None
    return _fia_v2(query, key, value, query_rope, key_rope, atten_mask, actual_seq_qlen, actual_seq_kvlen,
                   block_table, learnable_sink, num_query_heads, num_key_value_heads, softmax_scale, pre_tokens,
                   next_tokens, input_layout, sparse_mode, block_size, return_softmax_lse)


def npu_fused_infer_attention_score_v2(query, key, value, **kwargs):
    return _v2(query, key, value, **kwargs)


def npu_fused_infer_attention_score_v2_out(query, key, value, workspace=None, attention_out=None, softmax_lse=None,
                                           **kwargs):
    """The .out overload: the result is written into attention_out (of the
    result's shape and dtype; an empty tensor is resized) and, with
    return_softmax_lse, into softmax_lse. Without return_softmax_lse,
    softmax_lse is left as it is: the kernel does not write it (vllm-ascend
    passes a one-element placeholder). ``workspace`` is accepted and unused."""
    fn = f"{_FIA}.out"
    out, lse = _v2(query, key, value, **kwargs)
    targets = [(attention_out, out, "attention_out")]
    if kwargs.get("return_softmax_lse", False):
        targets.append((softmax_lse, lse, "softmax_lse"))
    for target, result, name in targets:
        check(target.dtype == result.dtype, f"{fn}: {name} should have dtype {result.dtype}, but got {target.dtype}.")
        check(target.device == result.device, f"{fn}: {name} should be on {result.device}, but got {target.device}.")
        if target.numel() == 0 and target.shape != result.shape:
            target.resize_(result.shape)
        check(target.shape == result.shape, f"{fn}: {name} should have shape {list(result.shape)}, but got "
              f"{list(target.shape)}.")
        target.copy_(result)
    return attention_out, softmax_lse


def _npu_fused_infer_attention_score_v2_get_max_workspace(query, key, value, **kwargs):
    """The workspace for the .out overload: the arguments are checked as the
    operator checks them; vNPU's kernels need no workspace, so it is an empty
    tensor of query's dtype (the kernel's workspace has query's dtype too)."""
    _v2(query, key, value, compute=False, **kwargs)
    return query.new_empty((0,))


def _npu_fused_infer_attention_score_v2_infer_output(query, value, query_dtype=None, value_dtype=None,
                                                     input_layout="BSH", quant_scale_out=None, block_table=None,
                                                     num_query_heads=1, num_key_value_heads=0,
                                                     return_softmax_lse=False, query_rope=None, out_dtype=None):
    """Empty (attention_out, softmax_lse) of the shapes and dtypes the operator
    returns, computed from query, value and the layout alone (graph capture
    allocates the .out tensors with it)."""
    fn = "_npu_fused_infer_attention_score_v2_infer_output"
    check(quant_scale_out is None and query_dtype is None and value_dtype is None and out_dtype is None,
          f"{fn}: quantised outputs (quant_scale_out) and reinterpreted dtypes (query_dtype, value_dtype, out_dtype) "
          "are not supported on vNPU.")
    check(num_query_heads > 0, f"{fn}: num_query_heads should be positive, but got {num_query_heads}.")
    in_layout, out_layout = _split_layout(input_layout)
    check(query.dim() == _DIMS[in_layout], f"{fn}: query should be {_DIMS[in_layout]}-D for input_layout "
          f"'{input_layout}', but got shape {list(query.shape)}.")
    kvn = num_key_value_heads or num_query_heads
    if block_table is not None:
        check(value.dim() in (3, 4), f"{fn}: the paged value cache should be 3- or 4-D, but got shape "
              f"{list(value.shape)}.")
        dv = value.shape[2] // kvn if value.dim() == 3 else value.shape[3]
    else:
        dv = value.shape[2] // kvn if in_layout == "BSH" else value.shape[-1]
    n = num_query_heads
    if in_layout in ("TND", "NTD"):
        t = query.shape[0] if in_layout == "TND" else query.shape[1]
        n = query.shape[1] if in_layout == "TND" else query.shape[0]
        out_shape = (t, n, dv) if out_layout == "TND" else (n, t, dv)
        lse_shape = (t, n, 1)
    else:
        b, s = {"BSH": (0, 1), "BSND": (0, 1), "BNSD": (0, 2), "NSD": (None, 1)}[in_layout]
        b = 1 if b is None else query.shape[b]
        s = query.shape[s]
        if in_layout in ("BSND", "BNSD", "NSD"):
            n = query.shape[2] if in_layout == "BSND" else query.shape[1 if in_layout == "BNSD" else 0]
        out_shape = {"BSH": (b, s, n * dv), "BSND": (b, s, n, dv), "BNSD": (b, n, s, dv), "NBSD": (n, b, s, dv),
                     "NSD": (n, s, dv)}[out_layout]
        lse_shape = (b, n, s, 1)
    out = query.new_empty(out_shape)
    lse = query.new_empty(lse_shape if return_softmax_lse else (0,), dtype=torch.float32)
    return out, lse


_V2_ARGS = ("Tensor query, Tensor key, Tensor value, *, Tensor? query_rope=None, Tensor? key_rope=None, "
            "Tensor? pse_shift=None, Tensor? atten_mask=None, SymInt[]? actual_seq_qlen=None, "
            "SymInt[]? actual_seq_kvlen=None, Tensor? block_table=None, Tensor? dequant_scale_query=None, "
            "Tensor? dequant_scale_key=None, Tensor? dequant_offset_key=None, Tensor? dequant_scale_value=None, "
            "Tensor? dequant_offset_value=None, Tensor? dequant_scale_key_rope=None, Tensor? quant_scale_out=None, "
            "Tensor? quant_offset_out=None, Tensor? quant_scale_p=None, Tensor? learnable_sink=None, "
            "int num_query_heads=1, int num_key_value_heads=0, float softmax_scale=1.0, "
            "int pre_tokens=2147483647, int next_tokens=2147483647, str input_layout=\"BSH\", int sparse_mode=0, "
            "int block_size=0, int query_quant_mode=0, int key_quant_mode=0, int value_quant_mode=0, "
            "int inner_precise=0, bool return_softmax_lse=False, int? query_dtype=None, int? key_dtype=None, "
            "int? value_dtype=None, int? query_rope_dtype=None, int? key_rope_dtype=None, "
            "int? key_shared_prefix_dtype=None, int? value_shared_prefix_dtype=None, "
            "int? dequant_scale_query_dtype=None, int? dequant_scale_key_dtype=None, "
            "int? dequant_scale_value_dtype=None, int? dequant_scale_key_rope_dtype=None, int? out_dtype=None")

define("npu_attention_update(Tensor[] lse, Tensor[] local_out, int update_type) -> (Tensor, Tensor)",
       npu_attention_update)
define(f"npu_fused_infer_attention_score_v2({_V2_ARGS}) -> (Tensor, Tensor)", npu_fused_infer_attention_score_v2)
define(f"npu_fused_infer_attention_score_v2.out({_V2_ARGS}, Tensor? workspace=None, Tensor(a!) attention_out, "
       "Tensor(b!) softmax_lse) -> (Tensor(a!), Tensor(b!))", npu_fused_infer_attention_score_v2_out)
define(f"_npu_fused_infer_attention_score_v2_get_max_workspace({_V2_ARGS}) -> Tensor",
       _npu_fused_infer_attention_score_v2_get_max_workspace)
define("_npu_fused_infer_attention_score_v2_infer_output(Tensor query, Tensor value, *, int? query_dtype=None, "
       "int? value_dtype=None, str input_layout=\"BSH\", Tensor? quant_scale_out=None, Tensor? block_table=None, "
       "int num_query_heads=1, int num_key_value_heads=0, bool return_softmax_lse=False, Tensor? query_rope=None, "
       "int? out_dtype=None) -> (Tensor, Tensor)", _npu_fused_infer_attention_score_v2_infer_output)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
