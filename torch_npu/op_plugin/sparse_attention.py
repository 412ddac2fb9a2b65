"""Sparse attention of DeepSeek-V3.2 (DSA), MLA's prolog and NSA:

- DSA lightning indexer: npu_lightning_indexer (+ npu_lightning_indexer_grad),
  npu_quant_lightning_indexer (int8 / fp8 / hifloat8 index query and key with per
  token-head dequant scales), and the indexer's training losses
  npu_dense_lightning_indexer_softmax_lse, npu_dense_lightning_indexer_grad_kl_loss,
  npu_sparse_lightning_indexer_grad_kl_loss;
- attention over the selected KV: npu_sparse_flash_attention
  (+ npu_sparse_flash_attention_grad) and npu_kv_quant_sparse_flash_attention (the packed
  per-token-tile int8 / fp8 / hifloat8 MLA cache);
- MLA prolog (query / KV down- and up-projection, RmsNorm, interleaved RoPE, cache write):
  npu_mla_prolog, npu_mla_prolog_v2, npu_mla_prolog_v3 (in place, with a Functionalize
  kernel) and npu_mla_prolog_v3_functional;
- npu_block_sparse_attention (+ _backward);
- NSA: npu_nsa_compress (+ _grad), npu_nsa_compress_attention, npu_nsa_select_attention
  (+ _grad), and at decode npu_nsa_select_attention_infer and npu_nsa_compress_infer.cache
  (npu_nsa_compress_attention_infer is not defined).

Emulation choices (see the sparse-attention section of docs/fused_ops.md):

- Every score / softmax / matmul is computed in float32 (int8 and fp8 GEMMs in float64,
  exact) and cast to the output dtype at the end, as the kernels accumulate.
- The lightning indexer and the sparse attentions are vectorised over query rows: each
  row's batch, position and lengths come from the (tensor) actual lengths by tensor ops,
  so they never read a tensor on the host and trace under FakeTensor. Query rows are
  processed in chunks that keep the gathered keys near 2**24 elements.
- Indexer candidates of a row are the key positions j < len_kv (and, sparse_mode 3,
  j <= len_kv - len_q + i); the top sparse_count are returned by descending score (ties:
  lower position first), the rest of the row and rows past the query length are -1
  (sparse_values: -inf there).
- Sparse attention: an index of -1 ends a row's selection (the docs put valid indices
  first); index b selects positions [b * sparse_block_size, (b + 1) * sparse_block_size)
  clipped to the kv length; sparse_mode 3 masks positions > len_kv - len_q + i. A row with
  nothing left (and no sink) gives zeros, softmax_max -inf and softmax_sum 0.
- Paged caches (PA_BSND) are read through block_table. MLA prolog writes its caches in
  place at cache_index (negative slots skipped); its PA_NZ / PA_BLK_NZ caches get the NZ
  byte arrangement of each block ([H / c, block_size, c], c = 32 bytes) inside the
  [blocks, block_size, N, D] tensor they are given.
- HiFloat8 (query_dtype / key_dtype / value_dtype = torch_npu.hifloat8 on uint8 / int8
  bytes) is decoded with torch_npu._hifloat8.decode and then goes through the same
  formula as int8 / fp8 (the indexer's scores, the cache's k_nope times its tile scales).
  MLA prolog's hif8 full-quantisation mode (weight_quant_mode=5, the *_dtype arguments of
  v3) is not emulated and raises "not supported on vNPU".
- The *_grad / *_backward operators implement the gradient formulas from the forward's
  saved statistics; autograd through the forward compositions gives the same gradients.
"""

import math

import torch
import torch.nn.functional as F

from torch_npu import _dtypes, _hifloat8
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define, define_functionalization

_I64MAX = 9223372036854775807
_HALF = (torch.float16, torch.bfloat16)
_HIF8 = _dtypes.DType.hifloat8
_BYTES = (torch.uint8, torch.int8)
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_CHUNK = 1 << 24
_NEG_INF = float("-inf")


def _chunks(total, per_row):
    """Slices of at most max(1, _CHUNK // per_row) rows covering range(total)."""
    step = max(1, _CHUNK // max(1, per_row))
    return [(a, min(a + step, total)) for a in range(0, total, step)]


def _unsupported(fn, what, reason):
    raise RuntimeError(f"{fn}: {what} is not supported on vNPU: {reason}")


# --- query rows and key addresses ------------------------------------------------

class _Rows:
    """Query rows of a BSND (B, S, N, D) or TND (T, N, D) tensor: per row its batch b,
    its position i in the sequence, the query length of its batch and whether it is a
    real token (i < length, or within the cumulative lengths for TND)."""

    def __init__(self, fn, layout, query, actual, arg, device):
        check(layout in ("BSND", "TND"), f"{fn}: the query layout should be 'BSND' or 'TND', but got '{layout}'.")
        if layout == "BSND":
            check(query.dim() == 4, f"{fn}: query should be 4-D (B, S, N, D) for layout BSND, but got shape "
                  f"{list(query.shape)}.")
            self.batch, s = query.shape[0], query.shape[1]
            r = torch.arange(self.batch * s, device=device)
            self.b, self.pos = r // s, r % s
            if actual is None:
                self.qlen = torch.full_like(r, s)
            else:
                check(actual.dim() == 1 and actual.shape[0] >= self.batch and not actual.is_floating_point(),
                      f"{fn}: {arg} should be a 1-D integer tensor of B = {self.batch} lengths, but got "
                      f"{actual.dtype} of shape {list(actual.shape)}.")
                self.qlen = actual.to(device=device, dtype=torch.long)[self.b].clamp(0, s)
            self.valid = self.pos < self.qlen
        else:
            check(query.dim() == 3, f"{fn}: query should be 3-D (T, N, D) for layout TND, but got shape "
                  f"{list(query.shape)}.")
            check(actual is not None, f"{fn}: {arg} (cumulative lengths) is required for layout TND.")
            check(actual.dim() == 1 and actual.shape[0] > 0 and not actual.is_floating_point(),
                  f"{fn}: {arg} should be a non-empty 1-D integer tensor, but got {actual.dtype} of shape "
                  f"{list(actual.shape)}.")
            cum = actual.to(device=device, dtype=torch.long)
            self.batch = cum.shape[0]
            r = torch.arange(query.shape[0], device=device)
            b = torch.searchsorted(cum, r, right=True)
            self.valid = b < self.batch
            self.b = b.clamp(max=self.batch - 1)
            start = torch.where(self.b > 0, cum[(self.b - 1).clamp(min=0)], 0)
            self.pos = r - start
            self.qlen = cum[self.b] - start
        self.count = self.b.shape[0]


class _KV:
    """Where key position j of batch b lives in a BSND (B, S, N, D), TND (T, N, D) or
    paged PA_BSND (blocks, block_size, N, D) key, as a row of key.reshape(-1, N, D)."""

    def __init__(self, fn, layout, key, actual, block_table, batch, device, arg):
        check(layout in ("BSND", "TND", "PA_BSND"), f"{fn}: the key layout should be 'BSND', 'TND' or 'PA_BSND', "
              f"but got '{layout}'.")
        self.layout = layout
        if layout == "TND":
            check(key.dim() == 3, f"{fn}: key should be 3-D (T, N, D) for layout TND, but got shape "
                  f"{list(key.shape)}.")
            check(actual is not None and actual.dim() == 1 and actual.shape[0] == batch,
                  f"{fn}: {arg} should hold the B = {batch} cumulative key lengths for layout TND, but got "
                  f"{None if actual is None else list(actual.shape)}.")
            cum = actual.to(device=device, dtype=torch.long)
            self.start = torch.cat([cum.new_zeros(1), cum[:-1]])
            self.len = cum - self.start
            self.rows_total = key.shape[0]
            self.maxpos = key.shape[0]
            self.heads = key.shape[1]
            return
        check(key.dim() == 4, f"{fn}: key should be 4-D for layout {layout}, but got shape {list(key.shape)}.")
        self.heads = key.shape[2]
        if layout == "BSND":
            check(key.shape[0] == batch, f"{fn}: key's batch {key.shape[0]} should equal query's B = {batch}.")
            s = key.shape[1]
            self.s = s
            self.maxpos = s
            self.rows_total = batch * s
            if actual is None:
                self.len = torch.full((batch,), s, dtype=torch.long, device=device)
            else:
                check(actual.dim() == 1 and actual.shape[0] >= batch, f"{fn}: {arg} should hold B = {batch} "
                      f"lengths, but got shape {list(actual.shape)}.")
                self.len = actual[:batch].to(device=device, dtype=torch.long).clamp(0, s)
            return
        check(block_table is not None and block_table.dim() == 2 and not block_table.is_floating_point(),
              f"{fn}: layout PA_BSND needs block_table, a 2-D integer tensor (B, max blocks per sequence), but got "
              f"{None if block_table is None else list(block_table.shape)}.")
        check(block_table.shape[0] >= batch, f"{fn}: block_table has {block_table.shape[0]} rows for B = {batch}.")
        check(actual is not None and actual.dim() == 1 and actual.shape[0] >= batch,
              f"{fn}: layout PA_BSND needs {arg} with the B = {batch} key lengths.")
        self.bs = key.shape[1]
        self.blocks = key.shape[0]
        self.table = block_table.to(device=device, dtype=torch.long)
        self.maxpos = block_table.shape[1] * self.bs
        self.rows_total = key.shape[0] * key.shape[1]
        self.len = actual[:batch].to(device=device, dtype=torch.long).clamp(0, self.maxpos)

    def flat(self, t):
        """t (laid out like key) as (rows, N, ...)."""
        lead = 1 if self.layout == "TND" else 2
        return t.reshape((self.rows_total,) + tuple(t.shape[lead:]))

    def rows(self, b, pos):
        """(row, valid) for batch b and key position pos (broadcast together)."""
        kvlen = self.len[b]
        valid = (pos >= 0) & (pos < kvlen)
        p = torch.where(valid, pos, 0)
        if self.layout == "BSND":
            row = b * self.s + p
        elif self.layout == "TND":
            row = (self.start[b] + p).clamp(max=max(self.rows_total - 1, 0))
        else:
            slot = (p // self.bs).clamp(max=self.table.shape[1] - 1)
            block = self.table[b, slot].clamp(0, max(self.blocks - 1, 0))
            row = block * self.bs + p % self.bs
        return row, valid


def _limit(rows, kv):
    """Per query row, the last key position rightDownCausal (sparse_mode 3) lets it see."""
    return kv.len[rows.b] - rows.qlen + rows.pos


def _expand(t, like):
    """(r,) t viewed to broadcast against like (r, ...)."""
    return t.view((-1,) + (1,) * (like.dim() - 1))


def _check_tokens(fn, sparse_mode, pre_tokens, next_tokens, modes=(0, 3)):
    check(sparse_mode in modes, f"{fn}: sparse_mode should be one of {list(modes)}, but got {sparse_mode}.")
    check(pre_tokens == _I64MAX and next_tokens == _I64MAX,
          f"{fn}: pre_tokens and next_tokens support only their default 2**63 - 1, but got {pre_tokens} and "
          f"{next_tokens}.")


# --- lightning indexer ----------------------------------------------------------

def _li_scores(rows, kv, key_flat, q, w, a, b, sparse_mode, limit, qscale=None, kscale_flat=None):
    """Index scores I[r, n2, j] = sum_g w[r, g] * relu(q[r, g] . k[j]) of query rows a:b over
    every key position j < kv.maxpos, in float32; -inf where j is not a candidate."""
    r = b - a
    n2, n1, d = kv.heads, q.shape[1], q.shape[2]
    g = n1 // n2
    pos = torch.arange(kv.maxpos, device=q.device)
    krow, valid = kv.rows(rows.b[a:b, None], pos[None, :])
    keys = key_flat[krow].float()  # (r, P, N2, D)
    s = torch.einsum("rngd,rpnd->rngp", q[a:b].float().reshape(r, n2, g, d), keys)
    if qscale is not None:
        ks = kscale_flat[krow].float().permute(0, 2, 1).unsqueeze(2)  # (r, N2, 1, P)
        s = s * qscale[a:b].float().reshape(r, n2, g, 1) * ks
    score = (torch.relu(s) * w[a:b].float().reshape(r, n2, g, 1)).sum(2)  # (r, N2, P)
    valid = valid & rows.valid[a:b, None]
    if sparse_mode == 3:
        valid = valid & (pos[None, :] <= limit[a:b, None])
    return score.masked_fill(~valid[:, None, :], _NEG_INF)


def _topk(score, count):
    """The `count` best positions of each row (descending, ties by position), -1 / -inf past
    the candidates."""
    vals, idx = torch.sort(score, dim=-1, descending=True, stable=True)
    k = min(count, score.shape[-1])
    vals, idx = vals[..., :k], idx[..., :k]
    idx = torch.where(vals == _NEG_INF, -1, idx)
    if k < count:
        idx = F.pad(idx, (0, count - k), value=-1)
        vals = F.pad(vals, (0, count - k), value=_NEG_INF)
    return idx.to(torch.int32), vals


def _indexer(fn, query, key, weights, actual_q, actual_k, block_table, layout_query, layout_key, sparse_count,
             sparse_mode, pre_tokens, next_tokens, qscale=None, kscale=None):
    """(indices, values) of the (quantised) lightning indexer; values in float32."""
    check(sparse_count > 0, f"{fn}: sparse_count should be greater than 0, but got {sparse_count}.")
    _check_tokens(fn, sparse_mode, pre_tokens, next_tokens)
    check(layout_key == "PA_BSND" or layout_key == layout_query,
          f"{fn}: layout_key '{layout_key}' should equal layout_query '{layout_query}' unless it is 'PA_BSND'.")
    check(query.numel() > 0 and key.numel() > 0, f"{fn}: query and key should not be empty.")
    rows = _Rows(fn, layout_query, query, actual_q, "actual_seq_lengths_query", query.device)
    kv = _KV(fn, layout_key, key, actual_k, block_table, rows.batch, query.device, "actual_seq_lengths_key")
    n1, d = query.shape[-2], query.shape[-1]
    check(key.shape[-1] == d, f"{fn}: key's head dim {key.shape[-1]} should equal query's {d}.")
    check(n1 % kv.heads == 0, f"{fn}: query's head count {n1} should be a multiple of key's {kv.heads}.")
    wshape = tuple(query.shape[:-1])
    check(tuple(weights.shape) == wshape, f"{fn}: weights should have shape {list(wshape)}, but got "
          f"{list(weights.shape)}.")
    q = query.reshape(rows.count, n1, d)
    w = weights.reshape(rows.count, n1)
    if qscale is not None:
        check(tuple(qscale.shape) == wshape, f"{fn}: query_dequant_scale should have shape {list(wshape)}, but "
              f"got {list(qscale.shape)}.")
        kshape = tuple(key.shape[:-1])
        check(tuple(kscale.shape) == kshape, f"{fn}: key_dequant_scale should have shape {list(kshape)}, but got "
              f"{list(kscale.shape)}.")
        qscale = qscale.reshape(rows.count, n1)
        kscale = kv.flat(kscale)
    key_flat = kv.flat(key)
    limit = _limit(rows, kv)
    idx_parts, val_parts = [], []
    for a, b in _chunks(rows.count, kv.maxpos * (kv.heads * d + n1)):
        score = _li_scores(rows, kv, key_flat, q, w, a, b, sparse_mode, limit, qscale, kscale)
        i, v = _topk(score, sparse_count)
        idx_parts.append(i)
        val_parts.append(v)
    shape = wshape[:-1] + (kv.heads, sparse_count)
    return torch.cat(idx_parts).reshape(shape), torch.cat(val_parts).reshape(shape)


def npu_lightning_indexer(query, key, weights, *, actual_seq_lengths_query=None, actual_seq_lengths_key=None,
                          block_table=None, layout_query="BSND", layout_key="BSND", sparse_count=2048, sparse_mode=3,
                          pre_tokens=_I64MAX, next_tokens=_I64MAX, return_value=False):
    """Top-k of I[t, j] = sum_h w[t, h] * relu(q[t, h] . k[j]) over the key positions each
    query token may see: (sparse_indices int32, sparse_values in query's dtype or empty)."""
    fn = "npu_lightning_indexer"
    check(query.dtype in _HALF and key.dtype == query.dtype,
          f"{fn}: query and key should both be float16 or bfloat16, but got {query.dtype} and {key.dtype}.")
    check(weights.dtype == query.dtype or weights.dtype == torch.float32,
          f"{fn}: weights should be float32 or query's dtype {query.dtype}, but got {weights.dtype}.")
    check(not (return_value and layout_key == "PA_BSND"),
          f"{fn}: return_value is supported only when layout_key is not PA_BSND (training).")
    idx, vals = _indexer(fn, query, key, weights, actual_seq_lengths_query, actual_seq_lengths_key, block_table,
                         layout_query, layout_key, sparse_count, sparse_mode, pre_tokens, next_tokens)
    values = vals.to(query.dtype) if return_value else query.new_empty((0,))
    return idx, values


def npu_quant_lightning_indexer(query, key, weights, query_dequant_scale, key_dequant_scale, query_quant_mode,
                                key_quant_mode, *, actual_seq_lengths_query=None, actual_seq_lengths_key=None,
                                block_table=None, layout_query="BSND", layout_key="BSND", sparse_count=2048,
                                sparse_mode=3, pre_tokens=_I64MAX, next_tokens=_I64MAX, query_dtype=None,
                                key_dtype=None):
    """The lightning indexer on int8 / float8_e4m3fn index query and key:
    I[t, j] = sum_h w[t, h] * relu(scale_q[t, h] * scale_k[j] * (q[t, h] . k[j]))."""
    fn = "npu_quant_lightning_indexer"
    hif8 = query_dtype is not None or key_dtype is not None
    check(query_quant_mode == 0 and key_quant_mode == 0,
          f"{fn}: query_quant_mode and key_quant_mode support only 0 (per token-head), but got {query_quant_mode} "
          f"and {key_quant_mode}.")
    if hif8:  # HiFloat8 bytes: decoded to their (exact) float32 values
        check(query_dtype == _HIF8 and key_dtype == _HIF8, f"{fn}: query_dtype and key_dtype should both be "
              f"torch_npu.hifloat8 (or both None), but got {query_dtype} and {key_dtype}.")
        check(query.dtype in _BYTES and key.dtype in _BYTES, f"{fn}: hifloat8 query and key should be uint8 / int8 "
              f"bytes, but got {query.dtype} and {key.dtype}.")
        query, key = _hifloat8.decode(query), _hifloat8.decode(key)
    else:
        check(query.dtype in (torch.int8, torch.float8_e4m3fn) and key.dtype == query.dtype,
              f"{fn}: query and key should both be int8 or float8_e4m3fn, but got {query.dtype} and {key.dtype}.")
    check(weights.dtype in (torch.float16, torch.bfloat16),
          f"{fn}: weights should be float16 or bfloat16, but got {weights.dtype}.")
    for name, t in (("query_dequant_scale", query_dequant_scale), ("key_dequant_scale", key_dequant_scale)):
        check(t.dtype in (torch.float16, torch.float32), f"{fn}: {name} should be float16 or float32, but got "
              f"{t.dtype}.")
    idx, _ = _indexer(fn, query, key, weights, actual_seq_lengths_query, actual_seq_lengths_key, block_table,
                      layout_query, layout_key, sparse_count, sparse_mode, pre_tokens, next_tokens,
                      query_dequant_scale, key_dequant_scale)
    return idx


def _gather_heads(flat, rows):
    """flat (rows_total, N2, ...) gathered at rows (r, N2, K): (r, N2, K, ...)."""
    heads = torch.arange(flat.shape[1], device=rows.device).view(1, -1, 1)
    return flat[rows, heads]


def _scatter_heads(grad, rows, valid, flat_shape):
    """Sums grad (r, N2, K, D) into a zero (rows_total, N2, D) at rows (invalid ones drop)."""
    total, n2 = flat_shape[0], flat_shape[1]
    heads = torch.arange(n2, device=rows.device).view(1, -1, 1)
    index = (rows * n2 + heads).reshape(-1)
    src = (grad * valid.unsqueeze(-1)).reshape(index.shape[0], -1)
    out = torch.zeros((total * n2, src.shape[1]), dtype=src.dtype, device=src.device)
    return out.index_add(0, index, src).reshape(tuple(flat_shape))


def npu_lightning_indexer_grad(query, key, dy, sparse_indices, weights, actual_seq_lengths_query=None,
                               actual_seq_lengths_key=None, layout="BSND", sparse_mode=3, pre_tokens=_I64MAX,
                               next_tokens=_I64MAX):
    """(d_query, d_key, d_weights) of the indexer's sparse_values for their gradient dy:
    for a selected key j, dW[h] = dy_j * relu(S_hj), dS_hj = dy_j * w_h * [S_hj > 0],
    dq_h = sum_j dS_hj k_j, dk_j = sum_(t, h) dS_hj q_h."""
    fn = "npu_lightning_indexer_grad"
    layout = "BSND" if layout is None else layout
    sparse_mode = 3 if sparse_mode is None else sparse_mode
    pre_tokens = _I64MAX if pre_tokens is None else pre_tokens
    next_tokens = _I64MAX if next_tokens is None else next_tokens
    _check_tokens(fn, sparse_mode, pre_tokens, next_tokens)
    check(query.dtype in _HALF and key.dtype == query.dtype,
          f"{fn}: query and key should both be float16 or bfloat16, but got {query.dtype} and {key.dtype}.")
    rows = _Rows(fn, layout, query, actual_seq_lengths_query, "actual_seq_lengths_query", query.device)
    kv = _KV(fn, layout, key, actual_seq_lengths_key, None, rows.batch, query.device, "actual_seq_lengths_key")
    n1, d = query.shape[-2], query.shape[-1]
    n2 = kv.heads
    check(n1 % n2 == 0 and key.shape[-1] == d, f"{fn}: key {list(key.shape)} does not match query "
          f"{list(query.shape)} (head dim, head count divisor).")
    check(sparse_indices.shape[:-1] == query.shape[:-2] + (n2,),
          f"{fn}: sparse_indices should have shape {list(query.shape[:-2]) + [n2, 'K']}, but got "
          f"{list(sparse_indices.shape)}.")
    check(dy.shape == sparse_indices.shape, f"{fn}: dy should have sparse_indices' shape "
          f"{list(sparse_indices.shape)}, but got {list(dy.shape)}.")
    check(tuple(weights.shape) == tuple(query.shape[:-1]), f"{fn}: weights should have shape "
          f"{list(query.shape[:-1])}, but got {list(weights.shape)}.")
    g, kc = n1 // n2, sparse_indices.shape[-1]
    q = query.reshape(rows.count, n2, g, d)
    w = weights.reshape(rows.count, n2, g)
    idx = sparse_indices.reshape(rows.count, n2, kc).long()
    grad = dy.reshape(rows.count, n2, kc)
    key_flat = kv.flat(key)
    limit = _limit(rows, kv)
    dq_parts, dw_parts = [], []
    dk = torch.zeros(tuple(key_flat.shape), dtype=torch.float32, device=key.device)
    for a, b in _chunks(rows.count, kc * n2 * d):
        krow, valid = kv.rows(rows.b[a:b, None, None], idx[a:b])
        valid = valid & (idx[a:b] >= 0) & rows.valid[a:b, None, None]
        if sparse_mode == 3:
            valid = valid & (idx[a:b] <= limit[a:b, None, None])
        keys = _gather_heads(key_flat, krow).float()  # (r, N2, K, D)
        qf = q[a:b].float()
        s = torch.einsum("rngd,rnkd->rngk", qf, keys)
        dyv = (grad[a:b].float() * valid).unsqueeze(2)  # (r, N2, 1, K)
        dw_parts.append((torch.relu(s) * dyv).sum(-1))
        ds = dyv * w[a:b].float().unsqueeze(-1) * (s > 0)
        dq_parts.append(torch.einsum("rngk,rnkd->rngd", ds, keys))
        dk = dk + _scatter_heads(torch.einsum("rngk,rngd->rnkd", ds, qf), krow, valid, key_flat.shape)
    d_query = torch.cat(dq_parts).reshape(query.shape).to(query.dtype)
    d_weights = torch.cat(dw_parts).reshape(weights.shape).to(weights.dtype)
    return d_query, dk.reshape(key.shape).to(key.dtype), d_weights


# --- the indexer's training losses (dense and sparse) ------------------------------

def _host_lens(fn, values, arg):
    check(values is not None, f"{fn}: {arg} (cumulative lengths) is required for layout TND.")
    values = [int(v) for v in values]
    check(len(values) > 0 and all(b >= a for a, b in zip([0] + values, values)),
          f"{fn}: {arg} should be non-decreasing cumulative lengths, but got {values}.")
    return values


def _dense_spans(fn, layout, query, key, actual_q, actual_k):
    """Per batch (q_start, q_end, k_start, k_end) in the rows of query / key flattened to (rows, N, D)."""
    check(layout in ("BSND", "TND"), f"{fn}: layout should be 'BSND' or 'TND', but got '{layout}'.")
    if layout == "BSND":
        check(query.dim() == 4 and key.dim() == 4 and query.shape[0] == key.shape[0],
              f"{fn}: query and key should be 4-D (B, S, N, D) with the same B for layout BSND, but got shapes "
              f"{list(query.shape)} and {list(key.shape)}.")
        s1, s2 = query.shape[1], key.shape[1]
        return [(b * s1, (b + 1) * s1, b * s2, (b + 1) * s2) for b in range(query.shape[0])]
    check(query.dim() == 3 and key.dim() == 3, f"{fn}: query and key should be 3-D (T, N, D) for layout TND, but "
          f"got shapes {list(query.shape)} and {list(key.shape)}.")
    cq = _host_lens(fn, actual_q, "actual_seq_qlen")
    ck = _host_lens(fn, actual_k, "actual_seq_klen")
    check(len(cq) == len(ck), f"{fn}: actual_seq_qlen and actual_seq_klen should have the same length (B), but got "
          f"{len(cq)} and {len(ck)}.")
    check(cq[-1] <= query.shape[0] and ck[-1] <= key.shape[0], f"{fn}: the cumulative lengths {cq[-1]} / {ck[-1]} "
          f"exceed query's T {query.shape[0]} / key's T {key.shape[0]}.")
    return list(zip([0] + cq[:-1], cq, [0] + ck[:-1], ck))


def _index_scores(qi, ki, w):
    """qi (r, N2, G, D), ki (S, N2, D), w (r, N2, G): S (r, N2, G, S) and I (r, N2, S), float32."""
    s = torch.einsum("qngd,knd->qngk", qi.float(), ki.float())
    return s, (torch.relu(s) * w.float().unsqueeze(-1)).sum(2)


def _causal_mask(rows_from, rows_to, sq, skv, device):
    """(r, skv) True where key j is visible to query row i (rightDownCausal)."""
    i = torch.arange(rows_from, rows_to, device=device).view(-1, 1)
    j = torch.arange(skv, device=device).view(1, -1)
    return j <= skv - sq + i


def _safe_exp(x, m):
    """exp(x - m) with m = -inf treated as 0 (then every x is -inf too)."""
    return torch.exp(x - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))


def _per_row_stat(t, layout, rows, n2, g=None):
    """softmax_max / softmax_sum of the layout, (B, N2, S1[, G]) or (N2, T1[, G]), as (rows, N2[, G])."""
    if layout == "BSND":
        t = t.permute(0, 2, 1, 3) if g is not None else t.permute(0, 2, 1)
    else:
        t = t.permute(1, 0, 2) if g is not None else t.permute(1, 0)
    return t.reshape((rows, n2) + ((g,) if g is not None else ())).float()


def _layout_stat(t, layout, batch):
    """(rows, N2) as (B, N2, S1) or (N2, T1)."""
    if layout == "BSND":
        return t.reshape(batch, -1, t.shape[-1]).permute(0, 2, 1).contiguous()
    return t.transpose(0, 1).contiguous()


def npu_dense_lightning_indexer_softmax_lse(query_index, key_index, weights, *, actual_seq_qlen=None,
                                            actual_seq_klen=None, layout="BSND", sparse_mode=3,
                                            pre_tokens=_I64MAX, next_tokens=_I64MAX):
    """(softmax_max_index, softmax_sum_index) of the indexer scores over every visible key:
    max_j I[t, j] and sum_j exp(I[t, j] - max), rightDownCausal, float32."""
    fn = "npu_dense_lightning_indexer_softmax_lse"
    layout = "BSND" if layout is None else layout
    sparse_mode = 3 if sparse_mode is None else sparse_mode
    check(sparse_mode == 3, f"{fn}: sparse_mode supports only 3 (rightDownCausal), but got {sparse_mode}.")
    check(query_index.dtype in _HALF and key_index.dtype == query_index.dtype,
          f"{fn}: query_index and key_index should both be float16 or bfloat16, but got {query_index.dtype} and "
          f"{key_index.dtype}.")
    spans = _dense_spans(fn, layout, query_index, key_index, actual_seq_qlen, actual_seq_klen)
    n1, d, n2 = query_index.shape[-2], query_index.shape[-1], key_index.shape[-2]
    check(n1 % n2 == 0 and key_index.shape[-1] == d, f"{fn}: key_index {list(key_index.shape)} does not match "
          f"query_index {list(query_index.shape)}.")
    check(tuple(weights.shape) == tuple(query_index.shape[:-1]), f"{fn}: weights should have shape "
          f"{list(query_index.shape[:-1])}, but got {list(weights.shape)}.")
    rows = query_index.numel() // (n1 * d)
    g = n1 // n2
    q = query_index.reshape(rows, n2, g, d)
    k = key_index.reshape(-1, n2, d)
    w = weights.reshape(rows, n2, g)
    maxes = torch.full((rows, n2), _NEG_INF, device=query_index.device)
    sums = torch.zeros((rows, n2), device=query_index.device)
    for qs, qe, ks, ke in spans:
        sq, skv = qe - qs, ke - ks
        for a, b in _chunks(sq, max(1, skv) * n1):
            _, score = _index_scores(q[qs + a:qs + b], k[ks:ke], w[qs + a:qs + b])
            visible = _causal_mask(a, b, sq, skv, q.device).unsqueeze(1)
            score = score.masked_fill(~visible, _NEG_INF)
            m = score.amax(-1) if skv else torch.full(score.shape[:2], _NEG_INF, device=q.device)
            maxes[qs + a:qs + b] = m
            sums[qs + a:qs + b] = _safe_exp(score, m.unsqueeze(-1)).sum(-1)
    batch = query_index.shape[0]
    return _layout_stat(maxes, layout, batch), _layout_stat(sums, layout, batch)


def _kl_rows(p, sy, valid):
    """KL(p || sy) summed over valid entries, clipping both at 1e-8 inside the logs."""
    tiny = 1e-8
    kl = p * (torch.log(p.clamp(min=tiny)) - torch.log(sy.clamp(min=tiny)))
    return (kl * valid).sum()


def _check_kl_inputs(fn, query, key, query_index, key_index, weights, query_rope, key_rope):
    check(query.dtype in _HALF and all(t.dtype == query.dtype for t in (key, query_index, key_index)),
          f"{fn}: query, key, query_index and key_index should share one dtype (float16 or bfloat16), but got "
          f"{query.dtype}, {key.dtype}, {query_index.dtype} and {key_index.dtype}.")
    check(weights.dtype in (query.dtype, torch.float32), f"{fn}: weights should be float32 or {query.dtype}, but "
          f"got {weights.dtype}.")
    check(tuple(weights.shape) == tuple(query_index.shape[:-1]), f"{fn}: weights should have shape "
          f"{list(query_index.shape[:-1])}, but got {list(weights.shape)}.")
    check((query_rope is None) == (key_rope is None), f"{fn}: query_rope and key_rope should be given together.")
    if query_rope is not None:
        check(query_rope.shape[:-1] == query.shape[:-1] and key_rope.shape[:-1] == key.shape[:-1],
              f"{fn}: query_rope {list(query_rope.shape)} / key_rope {list(key_rope.shape)} should match query "
              f"{list(query.shape)} / key {list(key.shape)} except in the last dimension.")


def npu_dense_lightning_indexer_grad_kl_loss(query, key, query_index, key_index, weights, softmax_max, softmax_sum,
                                             softmax_max_index, softmax_sum_index, scale_value, *, query_rope=None,
                                             key_rope=None, actual_seq_qlen=None, actual_seq_klen=None,
                                             layout="BSND", sparse_mode=3, pre_tokens=_I64MAX,
                                             next_tokens=_I64MAX):
    """The indexer's warm-up loss over every visible key and its gradients:
    p[t] = sum_h softmax_h(scale * q k^T)[t] / N1 (from softmax_max / softmax_sum),
    sy[t] = exp(I[t] - max_index) / sum_index, loss = sum_t KL(p[t] || sy[t]),
    dI = sy - p, then (d_query_index, d_key_index, d_weights, loss)."""
    fn = "npu_dense_lightning_indexer_grad_kl_loss"
    layout = "BSND" if layout is None else layout
    sparse_mode = 3 if sparse_mode is None else sparse_mode
    check(sparse_mode == 3, f"{fn}: sparse_mode supports only 3 (rightDownCausal), but got {sparse_mode}.")
    _check_kl_inputs(fn, query, key, query_index, key_index, weights, query_rope, key_rope)
    spans = _dense_spans(fn, layout, query, key, actual_seq_qlen, actual_seq_klen)
    _dense_spans(fn, layout, query_index, key_index, actual_seq_qlen, actual_seq_klen)
    n1, n2 = query.shape[-2], key.shape[-2]
    n1i, d, n2i = query_index.shape[-2], query_index.shape[-1], key_index.shape[-2]
    check(n1 % n2 == 0 and n1i % n2i == 0, f"{fn}: the query head counts ({n1}, {n1i}) should be multiples of the "
          f"key head counts ({n2}, {n2i}).")
    rows = query.numel() // (n1 * query.shape[-1])
    g, gi = n1 // n2, n1i // n2i
    qm = query if query_rope is None else torch.cat((query, query_rope), -1)
    km = key if key_rope is None else torch.cat((key, key_rope), -1)
    qm = qm.reshape(rows, n2, g, -1)
    km = km.reshape(-1, n2, km.shape[-1])
    smax = _per_row_stat(softmax_max, layout, rows, n2, g)
    ssum = _per_row_stat(softmax_sum, layout, rows, n2, g)
    imax = _per_row_stat(softmax_max_index, layout, rows, n2i)
    isum = _per_row_stat(softmax_sum_index, layout, rows, n2i)
    qi = query_index.reshape(rows, n2i, gi, d)
    ki = key_index.reshape(-1, n2i, d)
    w = weights.reshape(rows, n2i, gi)
    dq = torch.zeros(qi.shape, device=query.device)
    dw = torch.zeros(w.shape, device=query.device)
    dk = torch.zeros(ki.shape, device=query.device)
    loss = torch.zeros((), device=query.device)
    for qs, qe, ks, ke in spans:
        sq, skv = qe - qs, ke - ks
        for a, b in _chunks(sq, max(1, skv) * (n1 + n1i)):
            r0, r1 = qs + a, qs + b
            visible = _causal_mask(a, b, sq, skv, query.device)  # (r, skv)
            s = torch.einsum("qngd,knd->qngk", qm[r0:r1].float(), km[ks:ke].float()) * scale_value
            p = torch.exp(s - smax[r0:r1].unsqueeze(-1)) / ssum[r0:r1].unsqueeze(-1)
            p = torch.where(visible[:, None, None, :], p, 0)
            target = (p.sum((1, 2)) / n1).unsqueeze(1)  # (r, 1, skv)
            s_idx, score = _index_scores(qi[r0:r1], ki[ks:ke], w[r0:r1])
            sy = torch.exp(score - imax[r0:r1].unsqueeze(-1)) / isum[r0:r1].unsqueeze(-1)
            vis = visible.unsqueeze(1)
            sy = torch.where(vis, sy, 0)
            loss = loss + _kl_rows(target.expand_as(sy), sy, vis)
            d_i = torch.where(vis, sy - target, 0)  # (r, N2i, skv)
            dw[r0:r1] = (d_i.unsqueeze(2) * torch.relu(s_idx)).sum(-1)
            ds = d_i.unsqueeze(2) * w[r0:r1].float().unsqueeze(-1) * (s_idx > 0)
            dq[r0:r1] = torch.einsum("qngk,knd->qngd", ds, ki[ks:ke].float())
            dk[ks:ke] += torch.einsum("qngk,qngd->knd", ds, qi[r0:r1].float())
    return (dq.reshape(query_index.shape).to(query_index.dtype), dk.reshape(key_index.shape).to(key_index.dtype),
            dw.reshape(weights.shape).to(weights.dtype), loss.reshape(1))


def npu_sparse_lightning_indexer_grad_kl_loss(query, key, query_index, key_index, weights, sparse_indices,
                                              softmax_max, softmax_sum, scale_value, *, query_rope=None,
                                              key_rope=None, actual_seq_qlen=None, actual_seq_klen=None,
                                              layout="BSND", sparse_mode=3, pre_tokens=_I64MAX,
                                              next_tokens=_I64MAX, sinks=None):
    """The indexer's loss over the selected keys (sparse_indices) and its gradients:
    p[t, j] = sum_h exp(scale * q_h k_j - max_h) / sum_h over the selected j, normalised by
    N1 (by sum_h (1 - sink share_h) with sinks), sy = softmax of I over the selected keys,
    loss = sum_t KL(p || sy), dI = sy - p; returns (d_query_index, d_key_index, d_weights, loss)."""
    fn = "npu_sparse_lightning_indexer_grad_kl_loss"
    layout = "BSND" if layout is None else layout
    sparse_mode = 3 if sparse_mode is None else sparse_mode
    check(sparse_mode in (0, 3), f"{fn}: sparse_mode should be 0 or 3, but got {sparse_mode}.")
    _check_kl_inputs(fn, query, key, query_index, key_index, weights, query_rope, key_rope)
    device = query.device
    lens_q = None if actual_seq_qlen is None else torch.tensor([int(v) for v in actual_seq_qlen], device=device)
    lens_k = None if actual_seq_klen is None else torch.tensor([int(v) for v in actual_seq_klen], device=device)
    if layout == "BSND":  # the lists are per-batch lengths there
        lens_q = lens_k = None
    rows = _Rows(fn, layout, query, lens_q, "actual_seq_qlen", device)
    kv = _KV(fn, layout, key, lens_k, None, rows.batch, device, "actual_seq_klen")
    _KV(fn, layout, key_index, lens_k, None, rows.batch, device, "actual_seq_klen")
    n1, n2 = query.shape[-2], key.shape[-2]
    n1i, d, n2i = query_index.shape[-2], query_index.shape[-1], key_index.shape[-2]
    check(n2 == n2i and n1 % n2 == 0 and n1i % n2i == 0, f"{fn}: key and key_index should have the same head "
          f"count dividing the query head counts, but got N1={n1}, N2={n2}, N1index={n1i}, N2index={n2i}.")
    check(tuple(sparse_indices.shape[:-1]) == tuple(query_index.shape[:-2]) + (n2i,),
          f"{fn}: sparse_indices should have shape {list(query_index.shape[:-2]) + [n2i, 'K']}, but got "
          f"{list(sparse_indices.shape)}.")
    g, gi, kc = n1 // n2, n1i // n2i, sparse_indices.shape[-1]
    qm = query if query_rope is None else torch.cat((query, query_rope), -1)
    km = key if key_rope is None else torch.cat((key, key_rope), -1)
    qm = qm.reshape(rows.count, n2, g, -1)
    km_flat = kv.flat(km)
    ki_flat = kv.flat(key_index)
    smax = _per_row_stat(softmax_max, layout, rows.count, n2, g)
    ssum = _per_row_stat(softmax_sum, layout, rows.count, n2, g)
    qi = query_index.reshape(rows.count, n2i, gi, d)
    w = weights.reshape(rows.count, n2i, gi)
    idx = sparse_indices.reshape(rows.count, n2i, kc).long()
    listed = (idx >= 0).int().cummin(-1).values.bool()
    limit = _limit(rows, kv)
    if sinks is not None:
        check(sinks.shape == (n1,), f"{fn}: sinks should have shape [{n1}], but got {list(sinks.shape)}.")
        sink_share = torch.exp(sinks.float().view(1, n2, g) - smax) / ssum  # (rows, N2, G)
        denom = (1 - sink_share).sum((1, 2))
    else:
        denom = torch.full((rows.count,), float(n1), device=device)
    dq_parts, dw_parts = [], []
    dk = torch.zeros(tuple(ki_flat.shape), device=device)
    loss = torch.zeros((), device=device)
    for a, b in _chunks(rows.count, kc * (n2 * km.shape[-1] + n2i * d)):
        krow, valid = kv.rows(rows.b[a:b, None, None], idx[a:b])
        valid = valid & listed[a:b] & rows.valid[a:b, None, None]
        if sparse_mode == 3:
            valid = valid & (idx[a:b] <= limit[a:b, None, None])
        keys = _gather_heads(km_flat, krow).float()  # (r, N2, K, D)
        s = torch.einsum("rngd,rnkd->rngk", qm[a:b].float(), keys) * scale_value
        p = torch.exp(s - smax[a:b].unsqueeze(-1)) / ssum[a:b].unsqueeze(-1)
        p = torch.where(valid.unsqueeze(2), p, 0)
        target = p.sum(2) / denom[a:b].view(-1, 1, 1)  # (r, N2, K)
        kidx = _gather_heads(ki_flat, krow).float()
        s_idx = torch.einsum("rngd,rnkd->rngk", qi[a:b].float(), kidx)
        score = (torch.relu(s_idx) * w[a:b].float().unsqueeze(-1)).sum(2).masked_fill(~valid, _NEG_INF)
        m = score.amax(-1, keepdim=True)
        e = _safe_exp(score, m)
        sy = e / torch.where(e.sum(-1, keepdim=True) > 0, e.sum(-1, keepdim=True), 1)
        loss = loss + _kl_rows(target, sy, valid)
        d_i = torch.where(valid, sy - target, 0)
        dw_parts.append((d_i.unsqueeze(2) * torch.relu(s_idx)).sum(-1))
        ds = d_i.unsqueeze(2) * w[a:b].float().unsqueeze(-1) * (s_idx > 0)
        dq_parts.append(torch.einsum("rngk,rnkd->rngd", ds, kidx))
        dk = dk + _scatter_heads(torch.einsum("rngk,rngd->rnkd", ds, qi[a:b].float()), krow, valid, ki_flat.shape)
    return (torch.cat(dq_parts).reshape(query_index.shape).to(query_index.dtype),
            dk.reshape(key_index.shape).to(key_index.dtype),
            torch.cat(dw_parts).reshape(weights.shape).to(weights.dtype), loss.reshape(1))


# --- sparse flash attention ---------------------------------------------------------

class _Sparse:
    """The key positions each query row attends to: sparse_indices (rows, N2, K) of blocks of
    sparse_block_size, as positions (rows, N2, K * block) with their validity."""

    def __init__(self, fn, rows, kv, sparse_indices, sparse_block_size, sparse_mode):
        check(sparse_block_size >= 1, f"{fn}: sparse_block_size should be positive, but got {sparse_block_size}.")
        check(sparse_mode in (0, 3), f"{fn}: sparse_mode should be 0 or 3, but got {sparse_mode}.")
        check(sparse_indices.dtype in (torch.int32, torch.int64) and sparse_indices.numel() > 0,
              f"{fn}: sparse_indices should be a non-empty int32 tensor, but got {sparse_indices.dtype} of shape "
              f"{list(sparse_indices.shape)}.")
        check(sparse_indices.shape[-2] == kv.heads and sparse_indices.numel() // sparse_indices.shape[-1]
              == rows.count * kv.heads, f"{fn}: sparse_indices should have shape [query rows..., KV_N = {kv.heads}, "
              f"sparse_size], but got {list(sparse_indices.shape)}.")
        idx = sparse_indices.reshape(rows.count, kv.heads, -1).long()
        listed = (idx >= 0).int().cummin(-1).values.bool()  # a -1 ends the selection
        step = torch.arange(sparse_block_size, device=idx.device)
        self.pos = (idx.unsqueeze(-1) * sparse_block_size + step).flatten(-2)
        self.listed = listed.repeat_interleave(sparse_block_size, -1)
        self.rows, self.kv, self.mode = rows, kv, sparse_mode
        self.limit = _limit(rows, kv)
        self.width = self.pos.shape[-1]

    def chunk(self, a, b):
        """(key rows (r, N2, W), valid (r, N2, W)) of query rows a:b."""
        pos = self.pos[a:b]
        krow, valid = self.kv.rows(self.rows.b[a:b, None, None], pos)
        valid = valid & self.listed[a:b] & self.rows.valid[a:b, None, None]
        if self.mode == 3:
            valid = valid & (pos <= self.limit[a:b, None, None])
        return krow, valid


def _attend_sparse(q, qr, keys, krope, values, valid, scale, sinks, round_p=None):
    """q (r, N2, G, D), keys (r, N2, W, D), values (r, N2, W, Dv), valid (r, N2, W): softmax over the
    valid keys (and the per-head sinks): (out (r, N2, G, Dv), max, sum) in float32."""
    s = torch.einsum("rngd,rnkd->rngk", q, keys)
    if qr is not None:
        s = s + torch.einsum("rngd,rnkd->rngk", qr, krope)
    s = (s * scale).masked_fill(~valid.unsqueeze(2), _NEG_INF)
    m = s.amax(-1)
    if sinks is not None:
        m = torch.maximum(m, sinks)
    e = _safe_exp(s, m.unsqueeze(-1))
    total = e.sum(-1)
    if sinks is not None:
        total = total + _safe_exp(sinks.expand_as(m), m)
    p = e / torch.where(total > 0, total, 1).unsqueeze(-1)
    if round_p is not None:
        p = p.to(round_p).float()
    return torch.einsum("rngk,rnkd->rngd", p, values), m, total


def _stat_layout(t, layout, rows_count, batch):
    """(rows, N2, G) softmax statistics as (B, N2, S1, G) or (N2, T1, G)."""
    if layout == "BSND":
        return t.reshape(batch, rows_count // batch, t.shape[1], t.shape[2]).permute(0, 2, 1, 3).contiguous()
    return t.permute(1, 0, 2).contiguous()


def _sfa(fn, query, query_rope, kv, rows, sparse, gather, scale, sinks, dv, out_dtype, round_p=None):
    """Runs the sparse attention of every query row; gather(krow) -> (keys, key_rope, values)."""
    n1, n2 = query.shape[-2], kv.heads
    g = n1 // n2
    q = query.reshape(rows.count, n2, g, query.shape[-1])
    qr = None if query_rope is None else query_rope.reshape(rows.count, n2, g, query_rope.shape[-1])
    sink = None if sinks is None else sinks.float().view(1, n2, g)
    outs, maxes, sums = [], [], []
    per_row = sparse.width * n2 * (query.shape[-1] + dv + (0 if qr is None else qr.shape[-1]) + g)
    for a, b in _chunks(rows.count, per_row):
        krow, valid = sparse.chunk(a, b)
        keys, krope, values = gather(krow)
        o, m, t = _attend_sparse(q[a:b].float(), None if qr is None else qr[a:b].float(), keys, krope, values,
                                 valid, scale, sink, round_p)
        outs.append(torch.where(rows.valid[a:b, None, None, None], o, 0))
        maxes.append(m)
        sums.append(t)
    out = torch.cat(outs).reshape(tuple(query.shape[:-2]) + (n1, dv)).to(out_dtype)
    return out, torch.cat(maxes), torch.cat(sums)


def _check_sinks(fn, sinks, n1):
    if sinks is not None:
        check(sinks.dtype == torch.float32 and tuple(sinks.shape) == (n1,),
              f"{fn}: sinks should be float32 of shape [{n1}], but got {sinks.dtype} of shape {list(sinks.shape)}.")


def npu_sparse_flash_attention(query, key, value, sparse_indices, scale_value, *, block_table=None,
                               actual_seq_lengths_query=None, actual_seq_lengths_kv=None, query_rope=None,
                               key_rope=None, sparse_block_size=1, layout_query="BSND", layout_kv="BSND",
                               sparse_mode=3, pre_tokens=_I64MAX, next_tokens=_I64MAX, attention_mode=0,
                               return_softmax_lse=False, sinks=None):
    """softmax(scale * [q, q_rope] [k, k_rope]~^T) v~ over the keys sparse_indices selects
    (blocks of sparse_block_size, paged through block_table for PA_BSND):
    (attention_out, softmax_max, softmax_sum); the statistics are empty unless
    return_softmax_lse."""
    fn = "npu_sparse_flash_attention"
    _check_tokens(fn, sparse_mode, pre_tokens, next_tokens)
    check(attention_mode in (0, 2), f"{fn}: attention_mode should be 0 or 2 (MLA-absorb), but got {attention_mode}.")
    check(query.dtype in _HALF and key.dtype == query.dtype and value.dtype == query.dtype,
          f"{fn}: query, key and value should share one dtype (float16 or bfloat16), but got {query.dtype}, "
          f"{key.dtype} and {value.dtype}.")
    check(query.numel() > 0 and key.numel() > 0 and value.numel() > 0, f"{fn}: query, key and value should not be "
          "empty.")
    check(layout_kv == "PA_BSND" or layout_kv == layout_query,
          f"{fn}: layout_kv '{layout_kv}' should equal layout_query '{layout_query}' unless it is 'PA_BSND'.")
    rows = _Rows(fn, layout_query, query, actual_seq_lengths_query, "actual_seq_lengths_query", query.device)
    kv = _KV(fn, layout_kv, key, actual_seq_lengths_kv, block_table, rows.batch, query.device,
             "actual_seq_lengths_kv")
    check(value.shape[:-1] == key.shape[:-1], f"{fn}: value {list(value.shape)} should match key "
          f"{list(key.shape)} except in the last dimension.")
    n1 = query.shape[-2]
    check(n1 % kv.heads == 0 and key.shape[-1] == query.shape[-1],
          f"{fn}: key {list(key.shape)} does not match query {list(query.shape)} (head dim, head count divisor).")
    check((query_rope is None) == (key_rope is None), f"{fn}: query_rope and key_rope should be given together.")
    if query_rope is not None:
        check(query_rope.dtype == query.dtype and key_rope.dtype == query.dtype,
              f"{fn}: query_rope and key_rope should have query's dtype {query.dtype}.")
        check(query_rope.shape[:-1] == query.shape[:-1] and key_rope.shape[:-1] == key.shape[:-1]
              and query_rope.shape[-1] == key_rope.shape[-1],
              f"{fn}: query_rope {list(query_rope.shape)} / key_rope {list(key_rope.shape)} should match query "
              f"{list(query.shape)} / key {list(key.shape)} except in the (common) last dimension.")
    _check_sinks(fn, sinks, n1)
    sparse = _Sparse(fn, rows, kv, sparse_indices, sparse_block_size, sparse_mode)
    k_flat, v_flat = kv.flat(key), kv.flat(value)
    kr_flat = None if key_rope is None else kv.flat(key_rope)

    def gather(krow):
        keys = _gather_heads(k_flat, krow).float()
        krope = None if kr_flat is None else _gather_heads(kr_flat, krow).float()
        return keys, krope, _gather_heads(v_flat, krow).float()

    out, m, total = _sfa(fn, query, query_rope, kv, rows, sparse, gather, scale_value, sinks, value.shape[-1],
                         query.dtype)
    if not return_softmax_lse:
        empty = query.new_empty((0,), dtype=torch.float32)
        return out, empty, empty.clone()
    return (out, _stat_layout(m, layout_query, rows.count, rows.batch),
            _stat_layout(total, layout_query, rows.count, rows.batch))


def _unpack_kv(raw, dn, rope_dim, tile, rope_dtype, scales=None, hif8=False):
    """A packed MLA cache row [nope (dn, int8 / fp8) | rope (rope_dim of rope_dtype, as bytes) |
    dn / tile float32 scales (as bytes)] as (nope dequantised in rope_dtype, then float32,
    rope float32, scales); with `scales` given the row holds the nope part only."""
    elem = torch.empty((), dtype=rope_dtype).element_size()
    rope = None
    if scales is None:
        rb = rope_dim * elem
        rope = raw[..., dn:dn + rb].contiguous().view(rope_dtype).float()
        scales = raw[..., dn + rb:].contiguous().view(torch.float32)
    nope = (_hifloat8.decode(raw[..., :dn]) if hif8 else raw[..., :dn].float()) * scales.repeat_interleave(tile, -1)
    return nope.to(rope_dtype).float(), rope, scales


def npu_kv_quant_sparse_flash_attention(query, key, value, sparse_indices, scale_value, key_quant_mode,
                                        value_quant_mode, *, key_dequant_scale=None, value_dequant_scale=None,
                                        block_table=None, actual_seq_lengths_query=None, actual_seq_lengths_kv=None,
                                        sparse_block_size=1, layout_query="BSND", layout_kv="BSND", sparse_mode=3,
                                        pre_tokens=_I64MAX, next_tokens=_I64MAX, attention_mode=0,
                                        quant_scale_repo_mode=1, tile_size=128, rope_head_dim=64, key_dtype=None,
                                        value_dtype=None, sinks=None):
    """Sparse flash attention over a packed per-token-tile quantised MLA cache: a key row is
    [k_nope int8 / fp8 | k_rope (query's dtype, as bytes) | float32 scale per tile_size of
    k_nope (as bytes)]; K = [k_nope * scale, k_rope], V = value's k_nope * its scales (value
    packed the same way, or k_nope only with key's scales). query = [q_nope, q_rope];
    the output has q_nope's width."""
    fn = "npu_kv_quant_sparse_flash_attention"
    _check_tokens(fn, sparse_mode, pre_tokens, next_tokens)
    hif8 = key_dtype is not None or value_dtype is not None
    check(not hif8 or (key_dtype == _HIF8 and value_dtype == _HIF8), f"{fn}: key_dtype and value_dtype should both "
          f"be torch_npu.hifloat8 (or both None), but got {key_dtype} and {value_dtype}.")
    check(key_quant_mode == 2 and value_quant_mode == 2, f"{fn}: key_quant_mode and value_quant_mode support only 2 "
          f"(per tile), but got {key_quant_mode} and {value_quant_mode}.")
    check(quant_scale_repo_mode == 1, f"{fn}: quant_scale_repo_mode supports only 1 (scales packed with the data), "
          f"but got {quant_scale_repo_mode}.")
    check(key_dequant_scale is None and value_dequant_scale is None,
          f"{fn}: key_dequant_scale and value_dequant_scale are reserved and should be None.")
    check(attention_mode in (0, 2), f"{fn}: attention_mode should be 0 or 2 (MLA-absorb), but got {attention_mode}.")
    check(query.dtype in _HALF, f"{fn}: query should be float16 or bfloat16, but got {query.dtype}.")
    if hif8:
        check(key.dtype in _BYTES and value.dtype in _BYTES, f"{fn}: hifloat8 key and value should be uint8 / int8 "
              f"bytes, but got {key.dtype} and {value.dtype}.")
    else:
        check(key.dtype in (torch.int8, torch.float8_e4m3fn) and value.dtype == key.dtype,
              f"{fn}: key and value should both be int8 or float8_e4m3fn, but got {key.dtype} and {value.dtype}.")
    check(layout_kv == "PA_BSND" or layout_kv == layout_query,
          f"{fn}: layout_kv '{layout_kv}' should equal layout_query '{layout_query}' unless it is 'PA_BSND'.")
    dq = query.shape[-1]
    dn = dq - rope_head_dim
    check(0 <= rope_head_dim < dq and tile_size > 0 and dn % tile_size == 0,
          f"{fn}: query's head dim {dq} minus rope_head_dim {rope_head_dim} should be a positive multiple of "
          f"tile_size {tile_size}.")
    packed = dn + rope_head_dim * query.element_size() + 4 * (dn // tile_size)
    check(key.shape[-1] == packed, f"{fn}: key's last dimension should be {packed} (k_nope {dn} + k_rope "
          f"{rope_head_dim} x {query.element_size()} bytes + {dn // tile_size} float32 scales), but got "
          f"{key.shape[-1]}.")
    check(value.shape[-1] in (packed, dn) and value.shape[:-1] == key.shape[:-1],
          f"{fn}: value should be laid out like key with last dimension {packed} (packed) or {dn} (nope only), but "
          f"got {list(value.shape)}.")
    rows = _Rows(fn, layout_query, query, actual_seq_lengths_query, "actual_seq_lengths_query", query.device)
    kv = _KV(fn, layout_kv, key, actual_seq_lengths_kv, block_table, rows.batch, query.device,
             "actual_seq_lengths_kv")
    n1 = query.shape[-2]
    check(n1 % kv.heads == 0, f"{fn}: query's head count {n1} should be a multiple of key's {kv.heads}.")
    _check_sinks(fn, sinks, n1)
    sparse = _Sparse(fn, rows, kv, sparse_indices, sparse_block_size, sparse_mode)
    k_flat, v_flat = kv.flat(key), kv.flat(value)

    def gather(krow):
        knope, krope, kscales = _unpack_kv(_gather_heads(k_flat, krow), dn, rope_head_dim, tile_size, query.dtype,
                                           hif8=hif8)
        vraw = _gather_heads(v_flat, krow)
        if value.shape[-1] == packed:
            vnope = _unpack_kv(vraw, dn, rope_head_dim, tile_size, query.dtype, hif8=hif8)[0]
        else:
            vnope = _unpack_kv(vraw, dn, rope_head_dim, tile_size, query.dtype, kscales, hif8=hif8)[0]
        return knope, krope, vnope

    q_nope = query[..., :dn]
    q_rope = query[..., dn:] if rope_head_dim else None
    if q_rope is None:
        def gather_nope(krow, inner=gather):
            knope, _, vnope = inner(krow)
            return knope, None, vnope
        gather_fn = gather_nope
    else:
        gather_fn = gather
    out, _, _ = _sfa(fn, q_nope, q_rope, kv, rows, sparse, gather_fn, scale_value, sinks, dn, query.dtype,
                     round_p=query.dtype)
    return out


def npu_sparse_flash_attention_grad(query, key, value, sparse_indices, d_out, out, softmax_max, softmax_sum,
                                    scale_value, sparse_block_size, query_rope=None, key_rope=None,
                                    actual_seq_qlen=None, actual_seq_kvlen=None, layout="BSND", sparse_mode=3,
                                    pre_tokens=_I64MAX, next_tokens=_I64MAX, attention_mode=0):
    """(d_query, d_key, d_value, d_query_rope, d_key_rope) of npu_sparse_flash_attention from the
    forward's softmax_max / softmax_sum: P = exp(S - max) / sum over the selected keys,
    dS = P * (dO V^T - rowsum(dO * O)), dq = scale dS K, dK = scale dS^T q, dV = P^T dO, the key
    gradients summed into the key rows (d_*_rope empty without rope)."""
    fn = "npu_sparse_flash_attention_grad"
    layout = "BSND" if layout is None else layout
    sparse_mode = 3 if sparse_mode is None else sparse_mode
    pre_tokens = _I64MAX if pre_tokens is None else pre_tokens
    next_tokens = _I64MAX if next_tokens is None else next_tokens
    attention_mode = 0 if attention_mode is None else attention_mode
    _check_tokens(fn, sparse_mode, pre_tokens, next_tokens)
    check(query.dtype in _HALF and key.dtype == query.dtype and value.dtype == query.dtype,
          f"{fn}: query, key and value should share one dtype (float16 or bfloat16), but got {query.dtype}, "
          f"{key.dtype} and {value.dtype}.")
    rows = _Rows(fn, layout, query, actual_seq_qlen, "actual_seq_qlen", query.device)
    kv = _KV(fn, layout, key, actual_seq_kvlen, None, rows.batch, query.device, "actual_seq_kvlen")
    n1, n2 = query.shape[-2], kv.heads
    check(n1 % n2 == 0 and key.shape[-1] == query.shape[-1] and value.shape[:-1] == key.shape[:-1],
          f"{fn}: key {list(key.shape)} / value {list(value.shape)} do not match query {list(query.shape)}.")
    check(d_out.shape == out.shape and out.shape[:-1] == query.shape[:-1] and out.shape[-1] == value.shape[-1],
          f"{fn}: d_out and out should have shape {list(query.shape[:-1]) + [value.shape[-1]]}, but got "
          f"{list(d_out.shape)} and {list(out.shape)}.")
    check((query_rope is None) == (key_rope is None), f"{fn}: query_rope and key_rope should be given together.")
    g = n1 // n2
    stat = [rows.batch, n2, rows.count // rows.batch, g] if layout == "BSND" else [n2, rows.count, g]
    check(list(softmax_max.shape) == stat and list(softmax_sum.shape) == stat,
          f"{fn}: softmax_max and softmax_sum should have shape {stat}, but got {list(softmax_max.shape)} and "
          f"{list(softmax_sum.shape)}.")
    sparse = _Sparse(fn, rows, kv, sparse_indices, sparse_block_size, sparse_mode)
    smax = _per_row_stat(softmax_max, layout, rows.count, n2, g)
    ssum = _per_row_stat(softmax_sum, layout, rows.count, n2, g)
    q = query.reshape(rows.count, n2, g, -1)
    qr = None if query_rope is None else query_rope.reshape(rows.count, n2, g, -1)
    do = d_out.reshape(rows.count, n2, g, -1)
    o = out.reshape(rows.count, n2, g, -1)
    k_flat, v_flat = kv.flat(key), kv.flat(value)
    kr_flat = None if key_rope is None else kv.flat(key_rope)
    dk = torch.zeros(tuple(k_flat.shape), device=query.device)
    dv = torch.zeros(tuple(v_flat.shape), device=query.device)
    dkr = None if kr_flat is None else torch.zeros(tuple(kr_flat.shape), device=query.device)
    dq_parts, dqr_parts = [], []
    per_row = sparse.width * n2 * (2 * query.shape[-1] + 2 * value.shape[-1] + g)
    for a, b in _chunks(rows.count, per_row):
        krow, valid = sparse.chunk(a, b)
        keys = _gather_heads(k_flat, krow).float()
        values = _gather_heads(v_flat, krow).float()
        qa = q[a:b].float()
        s = torch.einsum("rngd,rnkd->rngk", qa, keys)
        krope = None
        if qr is not None:
            krope = _gather_heads(kr_flat, krow).float()
            s = s + torch.einsum("rngd,rnkd->rngk", qr[a:b].float(), krope)
        s = (s * scale_value).masked_fill(~valid.unsqueeze(2), _NEG_INF)
        total = ssum[a:b].unsqueeze(-1)
        p = _safe_exp(s, smax[a:b].unsqueeze(-1)) / torch.where(total > 0, total, 1)
        p = torch.where(valid.unsqueeze(2) & rows.valid[a:b, None, None, None], p, 0)
        doa = do[a:b].float()
        dp = torch.einsum("rngd,rnkd->rngk", doa, values)
        delta = (doa * o[a:b].float()).sum(-1, keepdim=True)
        ds = p * (dp - delta) * scale_value
        dq_parts.append(torch.einsum("rngk,rnkd->rngd", ds, keys))
        dk = dk + _scatter_heads(torch.einsum("rngk,rngd->rnkd", ds, qa), krow, valid, k_flat.shape)
        dv = dv + _scatter_heads(torch.einsum("rngk,rngd->rnkd", p, doa), krow, valid, v_flat.shape)
        if qr is not None:
            dqr_parts.append(torch.einsum("rngk,rnkd->rngd", ds, krope))
            dkr = dkr + _scatter_heads(torch.einsum("rngk,rngd->rnkd", ds, qr[a:b].float()), krow, valid,
                                       kr_flat.shape)
    d_query = torch.cat(dq_parts).reshape(query.shape).to(query.dtype)
    if qr is None:
        d_qr = query.new_empty((0,))
        d_kr = key.new_empty((0,))
    else:
        d_qr = torch.cat(dqr_parts).reshape(query_rope.shape).to(query_rope.dtype)
        d_kr = dkr.reshape(key_rope.shape).to(key_rope.dtype)
    return (d_query, dk.reshape(key.shape).to(key.dtype), dv.reshape(value.shape).to(value.dtype), d_qr, d_kr)



# --- MLA prolog ------------------------------------------------------------------------

_QMAX = {torch.int8: 127.0, torch.float8_e4m3fn: 448.0}
_CACHE_MODES_V2 = ("PA_BSND", "PA_NZ")
_CACHE_MODES_V3 = ("PA_BSND", "PA_NZ", "PA_BLK_BSND", "PA_BLK_NZ", "BSND", "TND")


def _rms(x, gamma, eps):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()


def _rope_interleave_half(x, cos, sin):
    """MLA's rotary: the even then the odd features of x (T, N, Dr), rotated by halves with
    cos / sin (T, Dr): cat(x1, x2) * cos + cat(-x2, x1) * sin, x1 = x[..., ::2], x2 = x[..., 1::2]."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    c, s = cos.float().unsqueeze(1), sin.float().unsqueeze(1)
    return torch.cat((x1, x2), -1) * c + torch.cat((-x2, x1), -1) * s


def _to_q(x, dtype):
    """x (already divided by its scale) as int8 (rounded half to even, saturated) or float8_e4m3fn."""
    if dtype == torch.int8:
        return torch.round(x).clamp(-128, 127).to(torch.int8)
    return x.clamp(-448.0, 448.0).to(dtype)


def _dynamic_quant(x, dtype, smooth=None):
    """Per-row dynamic quantisation over the last dimension: scale = max|x * smooth| / qmax."""
    if smooth is not None:
        x = x * smooth.float().reshape(-1)
    scale = x.abs().amax(-1, keepdim=True) / _QMAX[dtype]
    return _to_q(x / torch.where(scale > 0, scale, 1), dtype), scale


def _mx_quant(x, block=32):
    """OCP MX quantisation of x (T, H) to float8_e4m3fn with one E8M0 scale per `block`:
    scale = 2 ** (floor(log2(max|block|)) - 8)."""
    t, h = x.shape
    blocks = x.reshape(t, h // block, block)
    amax = blocks.abs().amax(-1, keepdim=True)
    expo = torch.where(amax > 0, torch.floor(torch.log2(torch.where(amax > 0, amax, 1))) - 8, -127.0)
    expo = expo.clamp(-127, 127)
    scale = torch.exp2(expo)
    q = (blocks / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).reshape(t, h)
    return q, scale.reshape(t, h // block).to(torch.float8_e8m0fnu)


def _mx_dequant(x, scale, block=32, transpose=False):
    """x * its E8M0 block scales: scale (rows, cols / block) along x's last dimension, or for a
    weight (K, N) with scale (N, K / block) when transpose."""
    s = scale.float().repeat_interleave(block, -1)
    return x.double() * (s.t() if transpose else s).double()


class _MlaQuant:
    """The weight / activation dtypes of a weight_quant_mode and how a projection is dequantised."""

    def __init__(self, fn, mode, token_x, weight_dq, weight_uq_qr, weight_dkv_kr, scales):
        self.fn, self.mode, self.scales = fn, mode, scales
        bf = torch.bfloat16
        expect = {0: (bf, bf, bf), 1: (bf, bf, torch.int8), 2: (torch.int8,) * 3, 3: (torch.float8_e4m3fn,) * 3,
                  4: (torch.float8_e4m3fn,) * 3}
        if mode == 5:
            _unsupported(fn, "weight_quant_mode=5", "vNPU does not emulate the hif8 full-quantisation mode of MLA "
                         "prolog (yet)")
        check(mode in expect, f"{fn}: weight_quant_mode should be in [0, 5], but got {mode}.")
        tx, wdq, wuq = expect[mode]
        got = (token_x.dtype, weight_dq.dtype, weight_uq_qr.dtype, weight_dkv_kr.dtype)
        check(got == (tx, wdq, wuq, wdq), f"{fn}: weight_quant_mode {mode} needs token_x, weight_dq, weight_uq_qr, "
              f"weight_dkv_kr of dtypes {[str(tx), str(wdq), str(wuq), str(wdq)]}, but got {[str(d) for d in got]}.")
        need = {1: ("dequant_scale_w_uq_qr",), 2: ("dequant_scale_x", "dequant_scale_w_dq", "dequant_scale_w_uq_qr",
                                                    "dequant_scale_w_dkv_kr")}
        need[3] = need[4] = need[2]
        for name in need.get(mode, ()):
            check(scales[name] is not None, f"{fn}: weight_quant_mode {mode} needs {name}.")
        if mode == 3:
            for name in need[3]:
                check(scales[name].dtype == torch.float8_e8m0fnu, f"{fn}: weight_quant_mode 3 needs {name} of dtype "
                      f"float8_e8m0fnu, but got {scales[name].dtype}.")

    def down(self, x, w, wname):
        """x (T, He) @ weight_dq / weight_dkv_kr, dequantised, float32."""
        if self.mode in (0, 1):
            return x.float() @ w.float()
        sx, sw = self.scales["dequant_scale_x"], self.scales[wname]
        if self.mode == 3:
            return (_mx_dequant(x, sx) @ _mx_dequant(w, sw, transpose=True)).float()
        return ((x.double() @ w.double()) * sx.double().reshape(-1, 1) * sw.double().reshape(1, -1)).float()

    def up(self, cq, w, smooth):
        """c^Q (float32, normalised) @ weight_uq_qr: (result float32, c^Q as the kernel stores it,
        its dequant scale or None)."""
        if self.mode == 0:
            stored = cq.to(torch.bfloat16)
            return stored.float() @ w.float(), stored, None
        sw = self.scales["dequant_scale_w_uq_qr"]
        if self.mode == 3:
            q, s = _mx_quant(cq)
            return (_mx_dequant(q, s) @ _mx_dequant(w, sw, transpose=True)).float(), q, s
        q, s = _dynamic_quant(cq, w.dtype, smooth)
        out = (q.double() @ w.double()) * s.double() * sw.double().reshape(1, -1)
        return out.float(), q, s


def _slots(fn, cache_mode, cache_index, actual_seq_len, tokens, batch_shape, block_size, device):
    """Destination slot (block * block_size + offset) of each token, for the paged cache modes."""
    check(cache_index is not None, f"{fn}: cache_mode '{cache_mode}' needs cache_index.")
    check(cache_index.dtype == torch.int64, f"{fn}: cache_index should be int64, but got {cache_index.dtype}.")
    index = cache_index.to(device).long()
    if cache_mode in ("PA_BSND", "PA_NZ"):
        check(index.numel() == tokens, f"{fn}: cache_index should hold one slot per token ({tokens}), but got shape "
              f"{list(cache_index.shape)}.")
        return index.reshape(tokens)
    t = torch.arange(tokens, device=device)
    if len(batch_shape) == 2:  # (B, S): cache_index (B, ceil(S / block_size))
        b_count, s = batch_shape
        per = -(-s // block_size)
        check(tuple(index.shape) == (b_count, per), f"{fn}: cache_index should have shape [{b_count}, {per}] for "
              f"cache_mode '{cache_mode}', but got {list(cache_index.shape)}.")
        b, pos = t // max(s, 1), t % max(s, 1)
        block = index[b, pos // block_size]
    else:  # (T,): per-batch lengths in actual_seq_len (cumulative), blocks listed batch after batch
        check(actual_seq_len is not None, f"{fn}: cache_mode '{cache_mode}' with 2-D token_x needs actual_seq_len.")
        cum = actual_seq_len.to(device).long()
        starts = torch.cat([cum.new_zeros(1), cum[:-1]])
        nblocks = (cum - starts + block_size - 1) // block_size
        first = torch.cumsum(nblocks, 0) - nblocks
        b = torch.searchsorted(cum, t, right=True).clamp(max=cum.shape[0] - 1)
        pos = t - starts[b]
        flat = index.reshape(-1)
        block = flat[(first[b] + pos // block_size).clamp(max=max(flat.shape[0] - 1, 0))]
    return block * block_size + pos % block_size


def _write_cache(fn, name, cache, values, slots, cache_mode, batch_shape):
    """Writes values (T, Nkv, D) of the cache's dtype into the cache, in place."""
    if cache.numel() == 0 or values.shape[0] == 0:
        return
    check(tuple(cache.shape[-2:]) == tuple(values.shape[1:]), f"{fn}: {name} should end in "
          f"{list(values.shape[1:])} (Nkv, D), but has shape {list(cache.shape)}.")
    if cache_mode in ("BSND", "TND"):
        want = tuple(batch_shape) + tuple(values.shape[1:])
        check(tuple(cache.shape) == want, f"{fn}: {name} should have shape {list(want)} for cache_mode "
              f"'{cache_mode}', but got {list(cache.shape)}.")
        cache.copy_(values.reshape(cache.shape))
        return
    check(cache.dim() == 4, f"{fn}: {name} should be 4-D (blocks, block_size, Nkv, D), but got shape "
          f"{list(cache.shape)}.")
    blocks, bsz = cache.shape[0], cache.shape[1]
    keep = (slots >= 0) & (slots < blocks * bsz)  # padding tokens (slot -1) are skipped
    s, v = slots[keep], values[keep]
    if cache_mode.endswith("NZ"):
        width = values.shape[1] * values.shape[2]
        c = 32 // cache.element_size()
        check(width % c == 0 and cache.is_contiguous(), f"{fn}: {name} in an NZ cache_mode should be contiguous "
              f"with Nkv * D ({width}) a multiple of {c}.")
        nz = cache.view(blocks, width // c, bsz, c)
        nz[s // bsz, :, s % bsz, :] = v.reshape(-1, width // c, c)
    else:
        cache[s // bsz, s % bsz] = v


def _mla_prolog(fn, version, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, cache_index, scales, quant_scale_ckv,
                quant_scale_ckr, smooth_scales_cq, actual_seq_len, k_nope_clip_alpha, eps_cq, eps_ckv, cache_mode,
                weight_quant_mode, kv_cache_quant_mode, ckvkr_repo_mode, quant_scale_repo_mode, tile_size,
                qc_qr_scale, kc_scale):
    """Computes the four MLA paths and writes kv_cache / kr_cache in place. Returns
    (query float32 (T, N, Hckv), query_rope float32 (T, N, Dr), stored c^Q, its scale)."""
    check(token_x.dim() in (2, 3), f"{fn}: token_x dim num should be 2 or 3, but the actual value is "
          f"{token_x.dim()}.")
    check(weight_uk.dim() == 3, f"{fn}: weight_uk dim num should be 3, but the actual value is {weight_uk.dim()}.")
    check(rope_sin.dim() == token_x.dim() and rope_cos.shape == rope_sin.shape,
          f"{fn}: rope_sin / rope_cos should be {token_x.dim()}-D like token_x, of one shape, but got "
          f"{list(rope_sin.shape)} and {list(rope_cos.shape)}.")
    batch_shape = tuple(token_x.shape[:-1])
    tokens = math.prod(batch_shape)
    he = token_x.shape[-1]
    n, d, hckv = weight_uk.shape
    check(weight_dq.dim() == 2 and weight_dq.shape[0] == he, f"{fn}: weight_dq should be (He = {he}, Hcq), but "
          f"got {list(weight_dq.shape)}.")
    hcq = weight_dq.shape[1]
    dr = rope_sin.shape[-1]
    check(tuple(rope_sin.shape[:-1]) == batch_shape and dr % 2 == 0, f"{fn}: rope_sin should have shape "
          f"{list(batch_shape) + ['Dr']} with an even Dr, but got {list(rope_sin.shape)}.")
    check(tuple(weight_uq_qr.shape) == (hcq, n * (d + dr)), f"{fn}: weight_uq_qr should be (Hcq, N * (D + Dr)) = "
          f"{[hcq, n * (d + dr)]}, but got {list(weight_uq_qr.shape)}.")
    check(tuple(weight_dkv_kr.shape) == (he, hckv + dr), f"{fn}: weight_dkv_kr should be (He, Hckv + Dr) = "
          f"{[he, hckv + dr]}, but got {list(weight_dkv_kr.shape)}.")
    check(tuple(rmsnorm_gamma_cq.shape) == (hcq,) and tuple(rmsnorm_gamma_ckv.shape) == (hckv,),
          f"{fn}: rmsnorm_gamma_cq / rmsnorm_gamma_ckv should have shapes [{hcq}] / [{hckv}], but got "
          f"{list(rmsnorm_gamma_cq.shape)} / {list(rmsnorm_gamma_ckv.shape)}.")
    check(weight_uk.dtype in _HALF, f"{fn}: weight_uk should be bfloat16 (or float16), but got {weight_uk.dtype}.")
    quant = _MlaQuant(fn, weight_quant_mode, token_x, weight_dq, weight_uq_qr, weight_dkv_kr, scales)
    x = token_x.reshape(tokens, he)
    cos, sin = rope_cos.reshape(tokens, dr), rope_sin.reshape(tokens, dr)

    # Query: x W^DQ -> RmsNorm -> [W^UQ | W^QR] -> (W^UK, RoPE).
    cq = _rms(quant.down(x, weight_dq, "dequant_scale_w_dq"), rmsnorm_gamma_cq, eps_cq) * qc_qr_scale
    qcqr, cq_stored, cq_scale = quant.up(cq, weight_uq_qr, smooth_scales_cq)
    qcqr = qcqr.reshape(tokens, n, d + dr)
    qc = qcqr[..., :d].to(torch.bfloat16).float()
    query = torch.einsum("tnd,ndk->tnk", qc, weight_uk.float())
    query_rope = _rope_interleave_half(qcqr[..., d:], cos, sin)

    # Key: x [W^DKV | W^KR] -> (RmsNorm, RoPE) -> caches.
    ckvkr = quant.down(x, weight_dkv_kr, "dequant_scale_w_dkv_kr")
    ckv = _rms(ckvkr[:, :hckv], rmsnorm_gamma_ckv, eps_ckv) * kc_scale
    kr = _rope_interleave_half(ckvkr[:, hckv:].unsqueeze(1), cos, sin)[:, 0]
    def slots(cache):
        """Destination slots in `cache` (None for the BSND / TND cache modes or an empty cache)."""
        if cache_mode in ("BSND", "TND") or cache.numel() == 0:
            return None
        check(cache.dim() == 4, f"{fn}: the caches should be 4-D (blocks, block_size, Nkv, D) for cache_mode "
              f"'{cache_mode}', but got shape {list(cache.shape)}.")
        return _slots(fn, cache_mode, cache_index, actual_seq_len, tokens, batch_shape, cache.shape[1],
                      token_x.device)

    kvm = kv_cache_quant_mode
    if kvm == 3:
        check(ckvkr_repo_mode == 1 and quant_scale_repo_mode == 1,
              f"{fn}: kv_cache_quant_mode 3 is supported with ckvkr_repo_mode=1 and quant_scale_repo_mode=1 (the "
              f"packed [k_nope | k_rope | scales] cache), but got {ckvkr_repo_mode} and {quant_scale_repo_mode}.")
        check(tile_size > 0 and hckv % tile_size == 0, f"{fn}: tile_size {tile_size} should divide Hckv {hckv}.")
        check(kv_cache.dtype in (torch.int8, torch.float8_e4m3fn), f"{fn}: kv_cache should be int8 or "
              f"float8_e4m3fn for kv_cache_quant_mode 3, but got {kv_cache.dtype}.")
        tiles = ckv.reshape(tokens, hckv // tile_size, tile_size)
        amax = tiles.abs().amax(-1, keepdim=True)
        if k_nope_clip_alpha is not None:
            amax = amax * k_nope_clip_alpha.float().reshape(-1)[0]
            tiles = torch.maximum(torch.minimum(tiles, amax), -amax)
        scale = amax / _QMAX[kv_cache.dtype]
        nope = _to_q(tiles / torch.where(scale > 0, scale, 1), kv_cache.dtype).reshape(tokens, hckv)
        packed = torch.cat((nope.view(torch.int8), kr.to(torch.bfloat16).view(torch.int8),
                            scale.reshape(tokens, -1).contiguous().view(torch.int8)), -1)
        _write_cache(fn, "kv_cache", kv_cache, packed.view(kv_cache.dtype).unsqueeze(1), slots(kv_cache),
                     cache_mode, batch_shape)
    else:
        if kvm == 0:
            check(kv_cache.dtype == torch.bfloat16 or kv_cache.numel() == 0, f"{fn}: kv_cache should be bfloat16 "
                  f"without kv cache quantisation, but got {kv_cache.dtype}.")
            kv_vals = ckv.to(kv_cache.dtype)
        else:
            check(quant_scale_ckv is not None and kv_cache.dtype in _QMAX, f"{fn}: kv_cache_quant_mode {kvm} needs "
                  f"quant_scale_ckv and an int8 / float8_e4m3fn kv_cache, but got {kv_cache.dtype}.")
            kv_vals = _to_q(ckv * quant_scale_ckv.float().reshape(1, -1), kv_cache.dtype)
        _write_cache(fn, "kv_cache", kv_cache, kv_vals.unsqueeze(1), slots(kv_cache), cache_mode, batch_shape)
        if kr_cache.numel() > 0:
            if kr_cache.dtype in _QMAX:
                check(quant_scale_ckr is not None, f"{fn}: an {kr_cache.dtype} kr_cache needs quant_scale_ckr.")
                kr_vals = _to_q(kr * quant_scale_ckr.float().reshape(1, -1), kr_cache.dtype)
            else:
                kr_vals = kr.to(kr_cache.dtype)
            _write_cache(fn, "kr_cache", kr_cache, kr_vals.unsqueeze(1), slots(kr_cache), cache_mode, batch_shape)
    return query, query_rope, cq_stored, cq_scale, tokens, batch_shape


def _query_quant(query, dtype):
    """Per token-head dynamic quantisation of the query: (q, dequant_scale (T, N, 1))."""
    return _dynamic_quant(query, dtype)


def _v12(fn, version, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
         rmsnorm_gamma_ckv, rope_sin, rope_cos, cache_index, kv_cache, kr_cache, dequant_scale_x,
         dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr, quant_scale_ckv, quant_scale_ckr,
         smooth_scales_cq, rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, cache_mode):
    check(cache_mode in _CACHE_MODES_V2, f"{fn}: cache_mode should be one of {list(_CACHE_MODES_V2)}, but got "
          f"'{cache_mode}'.")
    mode = 2 if token_x.dtype == torch.int8 else (1 if weight_uq_qr.dtype == torch.int8 else 0)
    kvm = 0
    if kv_cache.dtype == torch.int8:
        check(quant_scale_ckv is not None, f"{fn}: an int8 kv_cache needs quant_scale_ckv.")
        kvm = 1
    scales = dict(dequant_scale_x=dequant_scale_x, dequant_scale_w_dq=dequant_scale_w_dq,
                  dequant_scale_w_uq_qr=dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr=dequant_scale_w_dkv_kr)
    query, query_rope, _, _, tokens, batch_shape = _mla_prolog(
        fn, version, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
        rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, cache_index, scales, quant_scale_ckv,
        quant_scale_ckr, smooth_scales_cq, None, None, rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, cache_mode, mode,
        kvm, 0, 0, 128, 1.0, 1.0)
    n = weight_uk.shape[0]
    if version == 2 and token_x.dtype == torch.int8 and quant_scale_ckv is not None:
        q, scale = _query_quant(query, torch.int8)
        dequant_q = scale
    else:
        q = query.to(rope_sin.dtype)
        dequant_q = torch.zeros((1,), dtype=torch.float32, device=token_x.device)
    q = q.reshape(batch_shape + (n, weight_uk.shape[2]))
    rope_dtype = rope_sin.dtype if version == 1 else torch.bfloat16
    query_rope = query_rope.to(rope_dtype).reshape(batch_shape + (n, rope_sin.shape[-1]))
    return q, query_rope, dequant_q


def npu_mla_prolog(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
                   rope_sin, rope_cos, cache_index, kv_cache, kr_cache, *, dequant_scale_x=None,
                   dequant_scale_w_dq=None, dequant_scale_w_uq_qr=None, dequant_scale_w_dkv_kr=None,
                   quant_scale_ckv=None, quant_scale_ckr=None, smooth_scales_cq=None, rmsnorm_epsilon_cq=1e-05,
                   rmsnorm_epsilon_ckv=1e-05, cache_mode="PA_BSND"):
    """MLA prolog: (query = RmsNorm(x W^DQ) W^UQ W^UK, query_rope = RoPE(RmsNorm(x W^DQ) W^QR),
    kv_cache, kr_cache), the caches updated in place with RmsNorm(x W^DKV) and RoPE(x W^KR) at
    cache_index (negative slots skipped)."""
    q, qr, _ = _v12("npu_mla_prolog", 1, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr,
                    rmsnorm_gamma_cq, rmsnorm_gamma_ckv, rope_sin, rope_cos, cache_index, kv_cache, kr_cache,
                    dequant_scale_x, dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr,
                    quant_scale_ckv, quant_scale_ckr, smooth_scales_cq, rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv,
                    cache_mode)
    return q, qr, kv_cache, kr_cache


def npu_mla_prolog_v2(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                      rmsnorm_gamma_ckv, rope_sin, rope_cos, cache_index, kv_cache, kr_cache, *,
                      dequant_scale_x=None, dequant_scale_w_dq=None, dequant_scale_w_uq_qr=None,
                      dequant_scale_w_dkv_kr=None, quant_scale_ckv=None, quant_scale_ckr=None, smooth_scales_cq=None,
                      rmsnorm_epsilon_cq=1e-05, rmsnorm_epsilon_ckv=1e-05, cache_mode="PA_BSND"):
    """npu_mla_prolog plus the int8 full-quantisation output: with int8 token_x and
    quant_scale_ckv the query is quantised per token and head (dequant_scale_q_nope (T, N, 1));
    otherwise dequant_scale_q_nope is a [1] placeholder."""
    q, qr, dq = _v12("npu_mla_prolog_v2", 2, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr,
                     rmsnorm_gamma_cq, rmsnorm_gamma_ckv, rope_sin, rope_cos, cache_index, kv_cache, kr_cache,
                     dequant_scale_x, dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr,
                     quant_scale_ckv, quant_scale_ckr, smooth_scales_cq, rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv,
                     cache_mode)
    return q, qr, kv_cache, kr_cache, dq


def npu_mla_prolog_v3(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                      rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, *, cache_index=None,
                      dequant_scale_x=None, dequant_scale_w_dq=None, dequant_scale_w_uq_qr=None,
                      dequant_scale_w_dkv_kr=None, quant_scale_ckv=None, quant_scale_ckr=None,
                      smooth_scales_cq=None, actual_seq_len=None, k_nope_clip_alpha=None, rmsnorm_epsilon_cq=1e-05,
                      rmsnorm_epsilon_ckv=1e-05, cache_mode="PA_BSND", query_norm_flag=False, weight_quant_mode=0,
                      kv_cache_quant_mode=0, query_quant_mode=0, ckvkr_repo_mode=0, quant_scale_repo_mode=0,
                      tile_size=128, qc_qr_scale=1.0, kc_scale=1.0, token_x_dtype=None, weight_dq_dtype=None,
                      weight_uq_qr_dtype=None, weight_dkv_kr_dtype=None, kv_cache_dtype=None):
    """MLA prolog v3 (caches updated in place): (query, query_rope, dequant_scale_q_nope,
    query_norm, dequant_scale_q_norm); outputs a mode does not produce are None, as the
    kernel leaves them undefined."""
    fn = "npu_mla_prolog_v3"
    check(all(t is None for t in (token_x_dtype, weight_dq_dtype, weight_uq_qr_dtype, weight_dkv_kr_dtype,
                                  kv_cache_dtype)),
          f"{fn}: token_x_dtype / weight_*_dtype / kv_cache_dtype (hifloat8 reinterpretation) are not supported on "
          "vNPU: vNPU does not emulate the hif8 full-quantisation mode of MLA prolog (yet).")
    check(cache_mode in _CACHE_MODES_V3, f"{fn}: cache_mode should be one of {list(_CACHE_MODES_V3)}, but got "
          f"'{cache_mode}'.")
    check(kv_cache_quant_mode in (0, 1, 2, 3), f"{fn}: kv_cache_quant_mode should be in [0, 3], but got "
          f"{kv_cache_quant_mode}.")
    check(query_quant_mode in (0, 1), f"{fn}: query_quant_mode should be 0 or 1, but got {query_quant_mode}.")
    check(ckvkr_repo_mode in (0, 1) and quant_scale_repo_mode in (0, 1),
          f"{fn}: ckvkr_repo_mode and quant_scale_repo_mode should be 0 or 1, but got {ckvkr_repo_mode} and "
          f"{quant_scale_repo_mode}.")
    scales = dict(dequant_scale_x=dequant_scale_x, dequant_scale_w_dq=dequant_scale_w_dq,
                  dequant_scale_w_uq_qr=dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr=dequant_scale_w_dkv_kr)
    query, query_rope, cq, cq_scale, tokens, batch_shape = _mla_prolog(
        fn, 3, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
        rope_sin, rope_cos, kv_cache, kr_cache, cache_index, scales, quant_scale_ckv, quant_scale_ckr,
        smooth_scales_cq, actual_seq_len, k_nope_clip_alpha, rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, cache_mode,
        weight_quant_mode, kv_cache_quant_mode, ckvkr_repo_mode, quant_scale_repo_mode, tile_size, qc_qr_scale,
        kc_scale)
    n, hckv = weight_uk.shape[0], weight_uk.shape[2]
    dequant_q = None
    if weight_quant_mode in (2, 3, 4) and kv_cache_quant_mode == 1:
        q, dequant_q = _query_quant(query, token_x.dtype)
    else:
        q = query.to(torch.bfloat16)
    q = q.reshape(batch_shape + (n, hckv))
    query_rope = query_rope.to(torch.bfloat16).reshape(batch_shape + (n, rope_sin.shape[-1]))
    query_norm = dequant_q_norm = None
    if query_norm_flag:
        query_norm = cq.reshape(batch_shape + (weight_dq.shape[1],))
        if weight_quant_mode != 0:
            dequant_q_norm = cq_scale.reshape(tokens, -1)
    return q, query_rope, dequant_q, query_norm, dequant_q_norm


def npu_mla_prolog_v3_functional(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                                 rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, **kwargs):
    """npu_mla_prolog_v3 on copies of the caches: its five outputs, then the updated caches."""
    kv_cache, kr_cache = kv_cache.clone(), kr_cache.clone()
    outs = npu_mla_prolog_v3(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                             rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, **kwargs)
    return tuple(outs) + (kv_cache, kr_cache)



# --- block sparse attention ----------------------------------------------------------

def _bsa_batches(fn, query, key, value, block_sparse_mask, block_shape, q_input_layout, kv_input_layout,
                 num_key_value_heads, actual_seq_lengths, actual_seq_lengths_kv):
    """Per batch (q (N, sq, D), k (N2, skv, D), v (N2, skv, Dv), keep (N, sq, skv)), and the layout."""
    check(q_input_layout in ("TND", "BNSD") and kv_input_layout == q_input_layout,
          f"{fn}: q_input_layout and kv_input_layout should both be 'TND' or both 'BNSD', but got "
          f"'{q_input_layout}' and '{kv_input_layout}'.")
    check(block_shape is not None and len(block_shape) >= 2 and block_shape[0] > 0 and block_shape[1] > 0,
          f"{fn}: block_shape should hold [blockShapeX, blockShapeY], both positive, but got {block_shape}.")
    check(query.dtype in _HALF and key.dtype == query.dtype and value.dtype == query.dtype,
          f"{fn}: query, key, value must have the same dtype (float16 or bfloat16), got query={query.dtype}, "
          f"key={key.dtype}, value={value.dtype}.")
    check((actual_seq_lengths is None) == (actual_seq_lengths_kv is None),
          f"{fn}: actual_seq_lengths and actual_seq_lengths_kv should be given together or both omitted.")
    bx, by = int(block_shape[0]), int(block_shape[1])
    tnd = q_input_layout == "TND"
    dims = 3 if tnd else 4
    check(query.dim() == dims and key.dim() == dims and value.dim() == dims,
          f"{fn}: query, key and value should be {dims}-D for layout {q_input_layout}, but got shapes "
          f"{list(query.shape)}, {list(key.shape)} and {list(value.shape)}.")
    n = query.shape[1]
    n2 = key.shape[1]
    check(n2 == num_key_value_heads and n % n2 == 0 and value.shape[1] == n2,
          f"{fn}: key/value should have num_key_value_heads = {num_key_value_heads} heads dividing query's {n}, "
          f"but got {n2} and {value.shape[1]}.")
    check(key.shape[-1] == query.shape[-1], f"{fn}: key's head dim {key.shape[-1]} should equal query's "
          f"{query.shape[-1]}.")
    if tnd:
        check(actual_seq_lengths is not None, f"{fn}: actual_seq_lengths and actual_seq_lengths_kv are required "
              "for layout TND.")
        lq, lk = [int(v) for v in actual_seq_lengths], [int(v) for v in actual_seq_lengths_kv]
        check(len(lq) == len(lk) and len(lq) > 0 and min(lq + lk) >= 0 and sum(lq) <= query.shape[0]
              and sum(lk) <= key.shape[0], f"{fn}: actual_seq_lengths {lq} / actual_seq_lengths_kv {lk} should be "
              f"per-batch lengths of one batch count, summing to at most T ({query.shape[0]} / {key.shape[0]}).")
        batch = len(lq)
    else:
        batch = query.shape[0]
        check(key.shape[0] == batch and value.shape[0] == batch, f"{fn}: key / value should have query's batch "
              f"{batch}.")
        lq = [query.shape[2]] * batch if actual_seq_lengths is None else [int(v) for v in actual_seq_lengths]
        lk = [key.shape[2]] * batch if actual_seq_lengths_kv is None else [int(v) for v in actual_seq_lengths_kv]
        check(len(lq) >= batch and len(lk) >= batch and all(0 <= a <= query.shape[2] for a in lq[:batch])
              and all(0 <= a <= key.shape[2] for a in lk[:batch]),
              f"{fn}: actual_seq_lengths {lq} / actual_seq_lengths_kv {lk} should give B = {batch} lengths within "
              f"S ({query.shape[2]} / {key.shape[2]}).")
    mq, mk = max(lq[:batch]), max(lk[:batch])
    need = [batch, n, -(-mq // bx), -(-mk // by)]
    check(block_sparse_mask.dim() == 4 and block_sparse_mask.shape[0] >= batch and block_sparse_mask.shape[1] == n
          and block_sparse_mask.shape[2] >= need[2] and block_sparse_mask.shape[3] >= need[3],
          f"{fn}: block_sparse_mask should have shape {need} (batch, heads, ceil(Sq / blockShapeX), "
          f"ceil(Skv / blockShapeY)), but got {list(block_sparse_mask.shape)}.")
    out = []
    qs = ks = 0
    for b in range(batch):
        sq, skv = lq[b], lk[b]
        if tnd:
            qb, kb, vb = (query[qs:qs + sq].transpose(0, 1), key[ks:ks + skv].transpose(0, 1),
                          value[ks:ks + skv].transpose(0, 1))
            qs, ks = qs + sq, ks + skv
        else:
            qb, kb, vb = query[b, :, :sq], key[b, :, :skv], value[b, :, :skv]
        rows = torch.arange(sq, device=query.device) // bx
        cols = torch.arange(skv, device=query.device) // by
        keep = block_sparse_mask[b][:, rows][:, :, cols] != 0
        out.append((qb, kb, vb, keep))
    return out, tnd, lq[:batch]


def _bsa_scores(qb, kb, keep, scale, a, b):
    g = qb.shape[0] // kb.shape[0]
    k = kb.float().repeat_interleave(g, 0)
    s = torch.einsum("nqd,nkd->nqk", qb[:, a:b].float(), k) * scale
    return s.masked_fill(~keep[:, a:b], _NEG_INF)


def _bsa_assemble(parts, tnd, lens, total_rows, full_len):
    """Per-batch (N, sq, ...) pieces as TND (T, N, ...) or BNSD (B, N, S, ...), zero / fill padded."""
    if tnd:
        out = torch.cat([p.transpose(0, 1) for p in parts], 0)
        return F.pad(out, (0, 0) * (out.dim() - 1) + (0, total_rows - out.shape[0]))
    return torch.stack([F.pad(p, (0, 0) * (p.dim() - 2) + (0, full_len - p.shape[1])) for p in parts])


def npu_block_sparse_attention(query, key, value, block_sparse_mask, block_shape, *, q_input_layout="TND",
                               kv_input_layout="TND", num_key_value_heads=1, scale_value=0.0, inner_precise=1,
                               actual_seq_lengths=None, actual_seq_lengths_kv=None, softmax_lse_flag=0):
    """softmax(scale * q k^T) v where block_sparse_mask[b, n, i // X, j // Y] selects the
    (blockShapeX x blockShapeY) blocks a query may see: (attention_out, softmax_lse). A query
    row with no selected block gives zeros and lse -inf."""
    fn = "npu_block_sparse_attention"
    check(inner_precise in (0, 1), f"{fn}: inner_precise should be 0 or 1, but got {inner_precise}.")
    check(query.dtype != torch.bfloat16 or inner_precise == 0,
          f"{fn}: when query/key/value are bfloat16, inner_precise must be 0, got {inner_precise}.")
    check(block_shape is not None and len(block_shape) >= 2 and block_shape[1] % 128 == 0,
          f"{fn}: block_shape[1] (blockShapeY) must be a multiple of 128, got {block_shape}.")
    batches, tnd, lens = _bsa_batches(fn, query, key, value, block_sparse_mask, block_shape, q_input_layout,
                                      kv_input_layout, num_key_value_heads, actual_seq_lengths,
                                      actual_seq_lengths_kv)
    outs, lses = [], []
    for qb, kb, vb, keep in batches:
        g = qb.shape[0] // kb.shape[0]
        v = vb.float().repeat_interleave(g, 0)
        o_parts, l_parts = [], []
        for a, b in _chunks(qb.shape[1], kb.shape[1] * qb.shape[0]):
            s = _bsa_scores(qb, kb, keep, scale_value, a, b)
            lse = torch.logsumexp(s, -1, keepdim=True)
            p = _safe_exp(s, lse)
            o_parts.append(torch.einsum("nqk,nkd->nqd", p, v))
            l_parts.append(lse)
        outs.append(torch.cat(o_parts, 1) if o_parts else qb.new_zeros(qb.shape[0], 0, vb.shape[-1]).float())
        lses.append(torch.cat(l_parts, 1) if l_parts else qb.new_zeros(qb.shape[0], 0, 1).float())
    rows = query.shape[0]
    full = None if tnd else query.shape[2]
    out = _bsa_assemble(outs, tnd, lens, rows, full).to(query.dtype)
    lse = _bsa_assemble(lses, tnd, lens, rows, full)
    pad = torch.zeros_like(lse, dtype=torch.bool)
    if tnd:
        pad[sum(lens):] = True
    else:
        for b, sq in enumerate(lens):
            pad[b, :, sq:] = True
    return out, lse.masked_fill(pad, _NEG_INF)


def npu_block_sparse_attention_backward(d_out, query, key, value, attention_out, softmax_lse, block_sparse_mask,
                                        block_shape, actual_seq_lengths, actual_seq_lengths_kv, q_input_layout,
                                        kv_input_layout, num_key_value_heads, scale_value):
    """(d_query, d_key, d_value) of npu_block_sparse_attention from its attention_out and
    softmax_lse: P = exp(S - lse) on the selected blocks, dS = P * (dO V^T - rowsum(dO * O)),
    dq = scale dS K, dK = scale dS^T q, dV = P^T dO (key / value gradients summed over each
    head group)."""
    fn = "npu_block_sparse_attention_backward"
    batches, tnd, lens = _bsa_batches(fn, query, key, value, block_sparse_mask, block_shape, q_input_layout,
                                      kv_input_layout, num_key_value_heads, actual_seq_lengths,
                                      actual_seq_lengths_kv)
    check(d_out.shape == attention_out.shape and attention_out.shape[:-1] == query.shape[:-1],
          f"{fn}: d_out and attention_out should have shape {list(query.shape[:-1]) + [value.shape[-1]]}, but got "
          f"{list(d_out.shape)} and {list(attention_out.shape)}.")
    dqs, dks, dvs = [], [], []
    qs = 0
    for bi, (qb, kb, vb, keep) in enumerate(batches):
        sq = qb.shape[1]
        if tnd:
            dob, ob, lb = (d_out[qs:qs + sq].transpose(0, 1), attention_out[qs:qs + sq].transpose(0, 1),
                           softmax_lse[qs:qs + sq].transpose(0, 1))
            qs += sq
        else:
            dob, ob, lb = d_out[bi, :, :sq], attention_out[bi, :, :sq], softmax_lse[bi, :, :sq]
        n, n2 = qb.shape[0], kb.shape[0]
        g = n // n2
        k = kb.float().repeat_interleave(g, 0)
        v = vb.float().repeat_interleave(g, 0)
        dk = torch.zeros_like(k)
        dv = torch.zeros_like(v)
        dq_parts = []
        for a, b in _chunks(sq, kb.shape[1] * n):
            s = _bsa_scores(qb, kb, keep, scale_value, a, b)
            p = _safe_exp(s, lb[:, a:b].float())
            do = dob[:, a:b].float()
            dp = torch.einsum("nqd,nkd->nqk", do, v)
            ds = p * (dp - (do * ob[:, a:b].float()).sum(-1, keepdim=True)) * scale_value
            dq_parts.append(torch.einsum("nqk,nkd->nqd", ds, k))
            dk = dk + torch.einsum("nqk,nqd->nkd", ds, qb[:, a:b].float())
            dv = dv + torch.einsum("nqk,nqd->nkd", p, do)
        dqs.append(torch.cat(dq_parts, 1) if dq_parts else qb.new_zeros(n, 0, qb.shape[-1]).float())
        dks.append(dk.reshape(n2, g, -1, k.shape[-1]).sum(1))
        dvs.append(dv.reshape(n2, g, -1, v.shape[-1]).sum(1))
    if tnd:
        lk = sum(b[1].shape[1] for b in batches)
        dq = _bsa_assemble(dqs, True, lens, query.shape[0], None)
        dk = F.pad(torch.cat([t.transpose(0, 1) for t in dks]), (0, 0, 0, 0, 0, key.shape[0] - lk))
        dv = F.pad(torch.cat([t.transpose(0, 1) for t in dvs]), (0, 0, 0, 0, 0, value.shape[0] - lk))
    else:
        dq = _bsa_assemble(dqs, False, lens, None, query.shape[2])
        dk = _bsa_assemble(dks, False, None, None, key.shape[2])
        dv = _bsa_assemble(dvs, False, None, None, value.shape[2])
    return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)


# --- NSA ---------------------------------------------------------------------------------

def _nsa_windows(fn, total, compress_block_size, compress_stride, actual_seq_len):
    """Row indices (windows, block) of every compression window of every sequence."""
    check(compress_block_size > 0 and compress_stride > 0, f"{fn}: compress_block_size and compress_stride should be "
          f"positive, but got {compress_block_size} and {compress_stride}.")
    cum = _host_lens(fn, actual_seq_len, "actual_seq_len")
    check(cum[-1] <= total, f"{fn}: actual_seq_len ends at {cum[-1]}, beyond input's T = {total}.")
    starts = []
    for a, b in zip([0] + cum[:-1], cum):
        starts += [a + s for s in range(0, b - a - compress_block_size + 1, compress_stride)]
    return torch.tensor(starts, dtype=torch.long).view(-1, 1) + torch.arange(compress_block_size).view(1, -1)


def _check_compress(fn, input, weight, compress_block_size):
    check(input.dim() == 3 and input.dtype in _HALF, f"{fn}: input should be a 3-D (T, N, D) float16 / bfloat16 "
          f"tensor, but got {input.dtype} of shape {list(input.shape)}.")
    check(weight.dtype == input.dtype and tuple(weight.shape) == (compress_block_size, input.shape[1]),
          f"{fn}: weight should be {input.dtype} of shape [{compress_block_size}, {input.shape[1]}], but got "
          f"{weight.dtype} of shape {list(weight.shape)}.")


def npu_nsa_compress(input, weight, compress_block_size, compress_stride, *, actual_seq_len=None):
    """NSA KV compression: each window of compress_block_size tokens (every compress_stride
    tokens, within each sequence of the cumulative actual_seq_len) becomes
    sum_i weight[i, n] * input[start + i, n, :]."""
    fn = "npu_nsa_compress"
    _check_compress(fn, input, weight, compress_block_size)
    idx = _nsa_windows(fn, input.shape[0], compress_block_size, compress_stride, actual_seq_len).to(input.device)
    windows = input.float()[idx]  # (W, block, N, D)
    return (windows * weight.float().unsqueeze(-1)).sum(1).to(input.dtype)


def npu_nsa_compress_grad(grad, input, weight, compress_block_size, compress_stride, *, actual_seq_len=None):
    """(input_grad, weight_grad) of npu_nsa_compress."""
    fn = "npu_nsa_compress_grad"
    _check_compress(fn, input, weight, compress_block_size)
    idx = _nsa_windows(fn, input.shape[0], compress_block_size, compress_stride, actual_seq_len).to(input.device)
    check(tuple(grad.shape) == (idx.shape[0],) + tuple(input.shape[1:]), f"{fn}: grad should have shape "
          f"{[idx.shape[0]] + list(input.shape[1:])}, but got {list(grad.shape)}.")
    g = grad.float()
    contrib = g.unsqueeze(1) * weight.float().unsqueeze(-1)  # (W, block, N, D)
    d_input = torch.zeros(input.shape, device=input.device).index_add(0, idx.reshape(-1),
                                                                      contrib.reshape(-1, *input.shape[1:]))
    d_weight = (input.float()[idx] * g.unsqueeze(1)).sum((0, 3))
    return d_input.to(input.dtype), d_weight.to(weight.dtype)


def _nsa_spans(fn, q_total, kv_total, qlen, kvlen, q_arg, kv_arg):
    cq = _host_lens(fn, qlen, q_arg)
    ck = _host_lens(fn, kvlen, kv_arg)
    check(len(cq) == len(ck), f"{fn}: {q_arg} and {kv_arg} should have the same length (B), but got {len(cq)} and "
          f"{len(ck)}.")
    check(cq[-1] <= q_total and ck[-1] <= kv_total, f"{fn}: the cumulative lengths end at {cq[-1]} / {ck[-1]}, "
          f"beyond T = {q_total} / {kv_total}.")
    return cq, ck


def _check_nsa_qkv(fn, query, key, value, head_num):
    check(query.dim() == 3 and key.dim() == 3 and value.dim() == 3, f"{fn}: query, key and value should be 3-D "
          f"(TND), but got shapes {list(query.shape)}, {list(key.shape)} and {list(value.shape)}.")
    check(query.dtype in _HALF and key.dtype == query.dtype and value.dtype == query.dtype,
          f"{fn}: query, key and value should share one dtype (float16 or bfloat16), but got {query.dtype}, "
          f"{key.dtype} and {value.dtype}.")
    check(query.shape[1] == head_num, f"{fn}: head_num {head_num} should equal query's head count "
          f"{query.shape[1]}.")
    n2 = key.shape[1]
    check(value.shape[1] == n2 and query.shape[1] % n2 == 0 and key.shape[0] == value.shape[0]
          and key.shape[2] == query.shape[2], f"{fn}: key {list(key.shape)} / value {list(value.shape)} do not "
          f"match query {list(query.shape)}.")


def _importance_matrix(skv_cmp, sel_kv, m, n, device):
    """(skv_cmp, sel_kv) weights that pool compressed-attention probabilities into select blocks:
    block i collects positions m * (i + 1) - j, j < m + n - 1, with weight min(overlap, n)."""
    inner = m + n - 1
    mat = torch.zeros(skv_cmp, sel_kv, dtype=torch.float32)
    for i in range(1, sel_kv + 1):
        for j in range(inner):
            times = min(j + 1 if j < inner / 2 else inner - j, n)
            pos = m * i - j
            if 0 <= pos < skv_cmp:
                mat[pos, i - 1] += times
    return mat.to(device)


def npu_nsa_compress_attention(query, key, value, scale_value, head_num, compress_block_size, compress_stride,
                               select_block_size, select_block_count, *, topk_mask=None, atten_mask=None,
                               actual_seq_qlen=None, actual_cmp_seq_kvlen=None, actual_sel_seq_kvlen=None):
    """NSA compressed attention and block selection (TND): per sequence
    P = softmax(scale * q k_cmp^T - 40000 * atten_mask), out = P v_cmp; the importance of
    select block i pools P over the compressed positions overlapping it (summed over each
    query-head group), topk_mask forces blocks in, and the select_block_count best blocks
    (stable descending) are topk_indices. Returns (attention_out, topk_indices, softmax_max,
    softmax_sum), the statistics repeated 8 times in the last dimension."""
    fn = "npu_nsa_compress_attention"
    _check_nsa_qkv(fn, query, key, value, head_num)
    check(select_block_size % compress_stride == 0 and compress_block_size % compress_stride == 0,
          f"{fn}: select_block_size {select_block_size} and compress_block_size {compress_block_size} should be "
          f"multiples of compress_stride {compress_stride}.")
    cq, ck = _nsa_spans(fn, query.shape[0], key.shape[0], actual_seq_qlen, actual_cmp_seq_kvlen,
                        "actual_seq_qlen", "actual_cmp_seq_kvlen")
    csel = _host_lens(fn, actual_sel_seq_kvlen, "actual_sel_seq_kvlen")
    check(len(csel) == len(cq), f"{fn}: actual_sel_seq_kvlen should have B = {len(cq)} entries, but got "
          f"{len(csel)}.")
    m, nn = select_block_size // compress_stride, compress_block_size // compress_stride
    n1, n2 = query.shape[1], key.shape[1]
    g = n1 // n2
    outs, idxs, maxes, sums = [], [], [], []
    for (qa, qb), (ka, kb), (sa, sb) in zip(zip([0] + cq[:-1], cq), zip([0] + ck[:-1], ck),
                                            zip([0] + csel[:-1], csel)):
        sq, skv, ssel = qb - qa, kb - ka, sb - sa
        q = query[qa:qb].float().transpose(0, 1)  # (N1, sq, D)
        k = key[ka:kb].float().transpose(0, 1).repeat_interleave(g, 0)
        v = value[ka:kb].float().transpose(0, 1).repeat_interleave(g, 0)
        s = torch.einsum("nqd,nkd->nqk", q, k) * scale_value
        if atten_mask is not None:
            check(atten_mask.dim() == 2 and atten_mask.shape[0] >= sq and atten_mask.shape[1] >= skv,
                  f"{fn}: atten_mask should be 2-D and cover ({sq}, {skv}), but got {list(atten_mask.shape)}.")
            s = s + atten_mask[:sq, :skv].to(device=s.device).bool().float() * -40000.0
        mx = s.amax(-1, keepdim=True) if skv else torch.zeros(n1, sq, 1, device=s.device)
        e = torch.exp(s - mx)
        total = e.sum(-1, keepdim=True)
        p = e / torch.where(total > 0, total, 1)
        outs.append(torch.einsum("nqk,nkd->nqd", p, v).transpose(0, 1))
        maxes.append(mx.transpose(0, 1).expand(sq, n1, 8))
        sums.append(total.transpose(0, 1).expand(sq, n1, 8))
        score = (p.detach() @ _importance_matrix(skv, ssel, m, nn, p.device)).reshape(n2, g, sq, ssel).sum(1)
        if topk_mask is not None:
            check(topk_mask.dim() == 2 and topk_mask.shape[0] >= sq and topk_mask.shape[1] >= ssel,
                  f"{fn}: topk_mask should be 2-D and cover ({sq}, {ssel}), but got {list(topk_mask.shape)}.")
            score = score.masked_fill(topk_mask[:sq, :ssel].to(score.device).bool(), 23333.0)
        order = torch.sort(score, dim=-1, descending=True, stable=True)[1][..., :select_block_count]
        order = F.pad(order, (0, select_block_count - order.shape[-1]), value=-1)
        idxs.append(order.permute(1, 0, 2))
    rest = query.shape[0] - cq[-1]
    out = torch.cat(outs + [query.new_zeros(rest, n1, value.shape[-1]).float()]).to(query.dtype)
    topk = torch.cat(idxs + [torch.full((rest, n2, select_block_count), -1, dtype=torch.long,
                                        device=query.device)]).to(torch.int32)
    smax = torch.cat(maxes + [torch.zeros(rest, n1, 8, device=query.device)])
    ssum = torch.cat(sums + [torch.zeros(rest, n1, 8, device=query.device)])
    return out, topk, smax, ssum


class _NsaSelect:
    """Key rows and validity of the blocks topk_indices selects for every query token (TND)."""

    def __init__(self, fn, query, key, topk_indices, select_block_size, select_block_count, atten_mask,
                 actual_seq_qlen, actual_seq_kvlen):
        cq, ck = _nsa_spans(fn, query.shape[0], key.shape[0], actual_seq_qlen, actual_seq_kvlen, "actual_seq_qlen",
                            "actual_seq_kvlen")
        n2 = key.shape[1]
        check(select_block_size > 0 and select_block_count > 0, f"{fn}: select_block_size and select_block_count "
              f"should be positive, but got {select_block_size} and {select_block_count}.")
        check(topk_indices.dim() == 3 and tuple(topk_indices.shape) == (query.shape[0], n2, select_block_count)
              and not topk_indices.is_floating_point(), f"{fn}: topk_indices should be an integer tensor of shape "
              f"[{query.shape[0]}, {n2}, {select_block_count}], but got {list(topk_indices.shape)}.")
        if atten_mask is not None:
            check(atten_mask.dim() == 2, f"{fn}: atten_mask should be 2-D, but got {list(atten_mask.shape)}.")
        device = query.device
        lens_q = torch.tensor(cq, dtype=torch.long)
        b = torch.searchsorted(lens_q, torch.arange(query.shape[0]), right=True)
        self.valid_row = (b < len(cq)).to(device)
        b = b.clamp(max=len(cq) - 1)
        qstart = torch.tensor([0] + cq[:-1])[b]
        kstart = torch.tensor([0] + ck[:-1])[b]
        klen = (torch.tensor(ck) - torch.tensor([0] + ck[:-1]))[b]
        s1 = (torch.arange(query.shape[0]) - qstart).to(device)
        step = torch.arange(select_block_size, device=device)
        pos = (topk_indices.long().unsqueeze(-1) * select_block_size + step).flatten(-2)  # (T, N2, W)
        valid = (pos >= 0) & (pos < klen.to(device).view(-1, 1, 1)) & self.valid_row.view(-1, 1, 1)
        if atten_mask is not None:  # sparse_mode 2: leftUpCausal
            valid = valid & (pos <= s1.view(-1, 1, 1))
        self.rows = kstart.to(device).view(-1, 1, 1) + torch.where(valid, pos, 0)
        self.valid = valid


def _check_select(fn, query, key, value, head_num, select_block_size, select_block_count):
    _check_nsa_qkv(fn, query, key, value, head_num)
    check(value.shape[2] <= key.shape[2], f"{fn}: value's head dim {value.shape[2]} should not exceed key's "
          f"{key.shape[2]}.")


def npu_nsa_select_attention(query, key, value, topk_indices, scale_value, head_num, select_block_size,
                             select_block_count, *, atten_mask=None, actual_seq_qlen=None, actual_seq_kvlen=None):
    """NSA selected attention (TND): each query token attends to the select_block_count blocks of
    select_block_size keys of its sequence that topk_indices names (with atten_mask, only keys at
    or before its own position: sparse_mode 2); P is rounded to query's dtype before P V as the
    kernel does. Returns (attention_out, softmax_max, softmax_sum), statistics repeated 8 times."""
    fn = "npu_nsa_select_attention"
    _check_select(fn, query, key, value, head_num, select_block_size, select_block_count)
    sel = _NsaSelect(fn, query, key, topk_indices, select_block_size, select_block_count, atten_mask,
                     actual_seq_qlen, actual_seq_kvlen)
    n1, n2 = query.shape[1], key.shape[1]
    g = n1 // n2
    outs, maxes, sums = [], [], []
    width = sel.rows.shape[-1]
    for a, b in _chunks(query.shape[0], width * n2 * (key.shape[2] + value.shape[2] + g)):
        keys = _gather_heads(key, sel.rows[a:b]).float()
        vals = _gather_heads(value, sel.rows[a:b]).float()
        q = query[a:b].float().reshape(b - a, n2, g, -1)
        o, m, t = _attend_sparse(q, None, keys, None, vals, sel.valid[a:b], scale_value, None, query.dtype)
        outs.append(o.reshape(b - a, n1, -1))
        maxes.append(m.reshape(b - a, n1, 1).expand(b - a, n1, 8))
        sums.append(t.reshape(b - a, n1, 1).expand(b - a, n1, 8))
    return torch.cat(outs).to(query.dtype), torch.cat(maxes), torch.cat(sums)


def npu_nsa_select_attention_grad(grad, query, key, value, attention_out, softmax_max, softmax_sum, topk_indices,
                                  scale_value, head_num, select_block_size, select_block_count, *, atten_mask=None,
                                  actual_seq_qlen=None, actual_seq_kvlen=None):
    """(d_query, d_key, d_value) of npu_nsa_select_attention from its attention_out and
    softmax_max / softmax_sum (T, N1, 8)."""
    fn = "npu_nsa_select_attention_grad"
    _check_select(fn, query, key, value, head_num, select_block_size, select_block_count)
    sel = _NsaSelect(fn, query, key, topk_indices, select_block_size, select_block_count, atten_mask,
                     actual_seq_qlen, actual_seq_kvlen)
    n1, n2 = query.shape[1], key.shape[1]
    g = n1 // n2
    check(grad.shape == attention_out.shape and tuple(attention_out.shape) == (query.shape[0], n1, value.shape[2]),
          f"{fn}: grad and attention_out should have shape {[query.shape[0], n1, value.shape[2]]}, but got "
          f"{list(grad.shape)} and {list(attention_out.shape)}.")
    check(tuple(softmax_max.shape) == (query.shape[0], n1, 8) and softmax_sum.shape == softmax_max.shape,
          f"{fn}: softmax_max and softmax_sum should have shape {[query.shape[0], n1, 8]}, but got "
          f"{list(softmax_max.shape)} and {list(softmax_sum.shape)}.")
    smax = softmax_max[..., 0].float().reshape(-1, n2, g, 1)
    ssum = softmax_sum[..., 0].float().reshape(-1, n2, g, 1)
    dk = torch.zeros(key.shape, device=key.device)
    dv = torch.zeros(value.shape, device=key.device)
    dq_parts = []
    width = sel.rows.shape[-1]
    for a, b in _chunks(query.shape[0], width * n2 * (2 * key.shape[2] + 2 * value.shape[2] + g)):
        rows, valid = sel.rows[a:b], sel.valid[a:b]
        keys = _gather_heads(key, rows).float()
        vals = _gather_heads(value, rows).float()
        q = query[a:b].float().reshape(b - a, n2, g, -1)
        s = (torch.einsum("rngd,rnkd->rngk", q, keys) * scale_value).masked_fill(~valid.unsqueeze(2), _NEG_INF)
        p = _safe_exp(s, smax[a:b]) / torch.where(ssum[a:b] > 0, ssum[a:b], 1)
        do = grad[a:b].float().reshape(b - a, n2, g, -1)
        dp = torch.einsum("rngd,rnkd->rngk", do, vals)
        delta = (do * attention_out[a:b].float().reshape(b - a, n2, g, -1)).sum(-1, keepdim=True)
        ds = p * (dp - delta) * scale_value
        dq_parts.append(torch.einsum("rngk,rnkd->rngd", ds, keys).reshape(b - a, n1, -1))
        dk = dk + _scatter_heads(torch.einsum("rngk,rngd->rnkd", ds, q), rows, valid, key.shape)
        dv = dv + _scatter_heads(torch.einsum("rngk,rngd->rnkd", p, do), rows, valid, value.shape)
    return torch.cat(dq_parts).to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)



def npu_nsa_select_attention_infer(query, key, value, topk_indices, scale_value, head_num, key_value_head_num,
                                   select_block_size, select_block_count, page_block_size, *, layout="BSND",
                                   atten_mask=None, block_table=None, actual_seq_qlen=None, actual_seq_kvlen=None):
    """NSA selected attention at decode over a paged cache: each query token attends to the
    blocks of select_block_size keys topk_indices names (a -1 ends the list; keys past
    actual_seq_kvlen dropped). query BSH (B, S, N1 * D) / BSND (B, S, N1, D) / TND (T, N1, D),
    key / value (blocks, page_block_size, N2 * D) or, for BSND, (blocks, page_block_size, N2, D)."""
    fn = "npu_nsa_select_attention_infer"
    check(layout in ("BSH", "BSND", "TND"), f"{fn}: layout only support BSH or BSND or TND now, but got '{layout}'.")
    check(atten_mask is None, f"{fn}: atten_mask is not supported on vNPU: the operator runs sparse_mode 0, where "
          "the mask's role is not documented.")
    check(block_table is not None, f"{fn}: block_table (the paged cache's block table) is required.")
    check(actual_seq_kvlen is not None, f"{fn}: actual_seq_kvlen (per-batch key lengths) is required.")
    check(query.dtype in _HALF and key.dtype == query.dtype and value.dtype == query.dtype,
          f"{fn}: query, key and value should share one dtype (float16 or bfloat16), but got {query.dtype}, "
          f"{key.dtype} and {value.dtype}.")
    check(key_value_head_num > 0 and head_num % key_value_head_num == 0,
          f"{fn}: head_num {head_num} should be a multiple of key_value_head_num {key_value_head_num}.")
    n1, n2 = head_num, key_value_head_num
    if layout == "BSND":
        check(query.dim() == 4 and key.dim() == 4 and value.dim() == 4, f"{fn}: query, key and value should be 4-D "
              f"for layout BSND, but got shapes {list(query.shape)}, {list(key.shape)} and {list(value.shape)}.")
        q4, k4, v4 = query, key, value
    else:
        check(query.dim() == 3 and key.dim() == 3 and value.dim() == 3, f"{fn}: query, key and value should be 3-D "
              f"for layout {layout}, but got shapes {list(query.shape)}, {list(key.shape)} and "
              f"{list(value.shape)}.")
        check(key.shape[2] % n2 == 0 and value.shape[2] % n2 == 0, f"{fn}: key / value's last dimension should be "
              f"a multiple of key_value_head_num {n2}.")
        k4 = key.reshape(key.shape[0], key.shape[1], n2, -1)
        v4 = value.reshape(value.shape[0], value.shape[1], n2, -1)
        q4 = query.reshape(query.shape[0], query.shape[1], n1, -1) if layout == "BSH" else query
    check(q4.shape[-2] == n1 and k4.shape[2] == n2 and v4.shape[2] == n2 and k4.shape[-1] == q4.shape[-1],
          f"{fn}: query {list(query.shape)}, key {list(key.shape)} and value {list(value.shape)} do not match "
          f"head_num {n1} / key_value_head_num {n2}.")
    check(k4.shape[1] == page_block_size and v4.shape[:2] == k4.shape[:2],
          f"{fn}: key and value should hold blocks of page_block_size = {page_block_size} tokens, but got shapes "
          f"{list(key.shape)} and {list(value.shape)}.")
    device = query.device
    if layout == "TND":
        if actual_seq_qlen is None:
            cum = torch.arange(1, query.shape[0] + 1, device=device)
        else:
            cum = torch.tensor(_host_lens(fn, actual_seq_qlen, "actual_seq_qlen"), device=device)
        rows = _Rows(fn, "TND", q4, cum, "actual_seq_qlen", device)
    else:
        rows = _Rows(fn, "BSND", q4, None, "actual_seq_qlen", device)
    lens = torch.tensor([int(v) for v in actual_seq_kvlen], dtype=torch.long, device=device)
    kv = _KV(fn, "PA_BSND", k4, lens, block_table, rows.batch, device, "actual_seq_kvlen")
    check(topk_indices.numel() == rows.count * n2 * select_block_count,
          f"{fn}: topk_indices should hold [tokens = {rows.count}, {n2}, {select_block_count}] indices, but got shape "
          f"{list(topk_indices.shape)}.")
    idx = topk_indices.reshape(rows.count, n2, select_block_count)
    sparse = _Sparse(fn, rows, kv, idx.to(torch.int32) if idx.is_floating_point() else idx, select_block_size, 0)
    k_flat, v_flat = kv.flat(k4), kv.flat(v4)

    def gather(krow):
        return _gather_heads(k_flat, krow).float(), None, _gather_heads(v_flat, krow).float()

    q_rows = q4.reshape(rows.count, n1, q4.shape[-1])
    out, _, _ = _sfa(fn, q_rows, None, kv, rows, sparse, gather, scale_value, None, v4.shape[-1], query.dtype)
    if layout == "BSH":
        return out.reshape(query.shape[0], query.shape[1], n1 * v4.shape[-1])
    if layout == "BSND":
        return out.reshape(query.shape[0], query.shape[1], n1, v4.shape[-1])
    return out.reshape(query.shape[0], n1, v4.shape[-1])


def npu_nsa_compress_infer(input, weight, slot_mapping, compress_block_size, compress_stride, page_block_size, *,
                           block_table=None, actual_seq_len=None, cache):
    """NSA compression at decode: a batch whose length L (actual_seq_len, per batch) reaches a
    compression point (L >= compress_block_size and (L - compress_block_size) % compress_stride
    == 0) compresses its last compress_block_size tokens, read from the paged input through
    block_table, into cache[slot_mapping[b]] (in place); the cache is returned."""
    fn = "npu_nsa_compress_infer"
    check(block_table is not None, f"{fn}: only the paged input (blocks, page_block_size, N, D) with block_table is "
          "supported on vNPU: the layout of the non-paged input is not documented.")
    check(input.dim() == 4 and input.shape[1] == page_block_size and input.dtype in _HALF,
          f"{fn}: input should be a float16 / bfloat16 tensor (blocks, page_block_size = {page_block_size}, N, D), "
          f"but got {input.dtype} of shape {list(input.shape)}.")
    n, d = input.shape[2], input.shape[3]
    check(weight.dtype == input.dtype and tuple(weight.shape) == (compress_block_size, n),
          f"{fn}: weight should be {input.dtype} of shape [{compress_block_size}, {n}], but got {weight.dtype} of "
          f"shape {list(weight.shape)}.")
    check(cache.dtype == input.dtype and cache.dim() == 3 and tuple(cache.shape[1:]) == (n, d),
          f"{fn}: cache should be {input.dtype} of shape [slots, {n}, {d}], but got {cache.dtype} of shape "
          f"{list(cache.shape)}.")
    lens = [int(v) for v in (actual_seq_len or [])]
    check(len(lens) == slot_mapping.shape[0] and block_table.shape[0] >= len(lens),
          f"{fn}: actual_seq_len ({len(lens)}), slot_mapping ({slot_mapping.shape[0]}) and block_table "
          f"({block_table.shape[0]} rows) should all have one entry per batch.")
    check(compress_block_size > 0 and compress_stride > 0, f"{fn}: compress_block_size and compress_stride should "
          "be positive.")
    batches = [b for b, length in enumerate(lens)
               if length >= compress_block_size and (length - compress_block_size) % compress_stride == 0]
    if not batches:
        return cache
    device = input.device
    pos = torch.tensor([[lens[b] - compress_block_size + i for i in range(compress_block_size)] for b in batches],
                       device=device)
    bidx = torch.tensor(batches, device=device)
    table = block_table.to(device).long()
    rows = table[bidx.view(-1, 1), pos // page_block_size] * page_block_size + pos % page_block_size
    windows = input.reshape(-1, n, d)[rows].float()  # (batches, block, N, D)
    values = (windows * weight.float().unsqueeze(-1)).sum(1)
    cache[slot_mapping.to(device).long()[bidx]] = values.to(cache.dtype)
    return cache


# --- schemas (op-plugin's op_plugin_functions.yaml) ---------------------------------------

_TOK = "int pre_tokens=9223372036854775807, int next_tokens=9223372036854775807"
_TOK_OPT = "int? pre_tokens=9223372036854775807, int? next_tokens=9223372036854775807"

define("npu_lightning_indexer(Tensor query, Tensor key, Tensor weights, *, Tensor? actual_seq_lengths_query=None, "
       "Tensor? actual_seq_lengths_key=None, Tensor? block_table=None, str layout_query=\"BSND\", "
       f"str layout_key=\"BSND\", int sparse_count=2048, int sparse_mode=3, {_TOK}, bool return_value=False) "
       "-> (Tensor, Tensor)", npu_lightning_indexer)
define("npu_quant_lightning_indexer(Tensor query, Tensor key, Tensor weights, Tensor query_dequant_scale, "
       "Tensor key_dequant_scale, int query_quant_mode, int key_quant_mode, *, "
       "Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, Tensor? block_table=None, "
       "str layout_query=\"BSND\", str layout_key=\"BSND\", int sparse_count=2048, int sparse_mode=3, "
       f"{_TOK}, int? query_dtype=None, int? key_dtype=None) -> Tensor", npu_quant_lightning_indexer)
define("npu_lightning_indexer_grad(Tensor query, Tensor key, Tensor dy, Tensor sparse_indices, Tensor weights, "
       "Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, str? layout=\"BSND\", "
       f"int? sparse_mode=3, {_TOK_OPT}) -> (Tensor, Tensor, Tensor)", npu_lightning_indexer_grad)
define("npu_dense_lightning_indexer_softmax_lse(Tensor query_index, Tensor key_index, Tensor weights, *, "
       "SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_klen=None, str? layout='BSND', int? sparse_mode=3, "
       f"{_TOK_OPT}) -> (Tensor, Tensor)", npu_dense_lightning_indexer_softmax_lse)
define("npu_dense_lightning_indexer_grad_kl_loss(Tensor query, Tensor key, Tensor query_index, Tensor key_index, "
       "Tensor weights, Tensor softmax_max, Tensor softmax_sum, Tensor softmax_max_index, "
       "Tensor softmax_sum_index, float scale_value, *, Tensor? query_rope=None, Tensor? key_rope=None, "
       "SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_klen=None, str? layout='BSND', int? sparse_mode=3, "
       f"{_TOK_OPT}) -> (Tensor, Tensor, Tensor, Tensor)", npu_dense_lightning_indexer_grad_kl_loss)
define("npu_sparse_lightning_indexer_grad_kl_loss(Tensor query, Tensor key, Tensor query_index, Tensor key_index, "
       "Tensor weights, Tensor sparse_indices, Tensor softmax_max, Tensor softmax_sum, float scale_value, *, "
       "Tensor? query_rope=None, Tensor? key_rope=None, SymInt[]? actual_seq_qlen=None, "
       f"SymInt[]? actual_seq_klen=None, str? layout='BSND', int? sparse_mode=3, {_TOK_OPT}, Tensor? sinks=None) "
       "-> (Tensor, Tensor, Tensor, Tensor)", npu_sparse_lightning_indexer_grad_kl_loss)
define("npu_sparse_flash_attention(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, "
       "float scale_value, *, Tensor? block_table=None, Tensor? actual_seq_lengths_query=None, "
       "Tensor? actual_seq_lengths_kv=None, Tensor? query_rope=None, Tensor? key_rope=None, "
       "int sparse_block_size=1, str layout_query=\"BSND\", str layout_kv=\"BSND\", int sparse_mode=3, "
       f"{_TOK}, int attention_mode=0, bool return_softmax_lse=False, Tensor? sinks=None) "
       "-> (Tensor, Tensor, Tensor)", npu_sparse_flash_attention)
define("npu_sparse_flash_attention_grad(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, "
       "Tensor d_out, Tensor out, Tensor softmax_max, Tensor softmax_sum, float scale_value, "
       "int sparse_block_size, Tensor? query_rope=None, Tensor? key_rope=None, Tensor? actual_seq_qlen=None, "
       f"Tensor? actual_seq_kvlen=None, str? layout=\"BSND\", int? sparse_mode=3, {_TOK_OPT}, "
       "int? attention_mode=0) -> (Tensor, Tensor, Tensor, Tensor, Tensor)", npu_sparse_flash_attention_grad)
define("npu_kv_quant_sparse_flash_attention(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, "
       "float scale_value, int key_quant_mode, int value_quant_mode, *, Tensor? key_dequant_scale=None, "
       "Tensor? value_dequant_scale=None, Tensor? block_table=None, Tensor? actual_seq_lengths_query=None, "
       "Tensor? actual_seq_lengths_kv=None, int sparse_block_size=1, str layout_query=\"BSND\", "
       f"str layout_kv=\"BSND\", int sparse_mode=3, {_TOK}, int attention_mode=0, int quant_scale_repo_mode=1, "
       "int tile_size=128, int rope_head_dim=64, int? key_dtype=None, int? value_dtype=None, Tensor? sinks=None) "
       "-> Tensor", npu_kv_quant_sparse_flash_attention)


_MLA_V12 = ("Tensor token_x, Tensor weight_dq, Tensor weight_uq_qr, Tensor weight_uk, Tensor weight_dkv_kr, "
            "Tensor rmsnorm_gamma_cq, Tensor rmsnorm_gamma_ckv, Tensor rope_sin, Tensor rope_cos, "
            "Tensor cache_index, Tensor kv_cache, Tensor kr_cache, *, Tensor? dequant_scale_x=None, "
            "Tensor? dequant_scale_w_dq=None, Tensor? dequant_scale_w_uq_qr=None, "
            "Tensor? dequant_scale_w_dkv_kr=None, Tensor? quant_scale_ckv=None, Tensor? quant_scale_ckr=None, "
            "Tensor? smooth_scales_cq=None, float rmsnorm_epsilon_cq=1e-05, float rmsnorm_epsilon_ckv=1e-05, "
            "str cache_mode=\"PA_BSND\"")
_MLA_V3_TAIL = ("*, Tensor? cache_index=None, Tensor? dequant_scale_x=None, Tensor? dequant_scale_w_dq=None, "
                "Tensor? dequant_scale_w_uq_qr=None, Tensor? dequant_scale_w_dkv_kr=None, "
                "Tensor? quant_scale_ckv=None, Tensor? quant_scale_ckr=None, Tensor? smooth_scales_cq=None, "
                "Tensor? actual_seq_len=None, Tensor? k_nope_clip_alpha=None, float rmsnorm_epsilon_cq=1e-05, "
                "float rmsnorm_epsilon_ckv=1e-05, str cache_mode=\"PA_BSND\", bool query_norm_flag=False, "
                "int weight_quant_mode=0, int kv_cache_quant_mode=0, int query_quant_mode=0, "
                "int ckvkr_repo_mode=0, int quant_scale_repo_mode=0, int tile_size=128, float qc_qr_scale=1.0, "
                "float kc_scale=1.0, int? token_x_dtype=None, int? weight_dq_dtype=None, "
                "int? weight_uq_qr_dtype=None, int? weight_dkv_kr_dtype=None, int? kv_cache_dtype=None")
_MLA_V3_HEAD = ("Tensor token_x, Tensor weight_dq, Tensor weight_uq_qr, Tensor weight_uk, Tensor weight_dkv_kr, "
                "Tensor rmsnorm_gamma_cq, Tensor rmsnorm_gamma_ckv, Tensor rope_sin, Tensor rope_cos, ")

define(f"npu_mla_prolog({_MLA_V12}) -> (Tensor, Tensor, Tensor, Tensor)", npu_mla_prolog)
define(f"npu_mla_prolog_v2({_MLA_V12}) -> (Tensor, Tensor, Tensor, Tensor, Tensor)", npu_mla_prolog_v2)
define(f"npu_mla_prolog_v3({_MLA_V3_HEAD}Tensor(a!) kv_cache, Tensor(b!) kr_cache, {_MLA_V3_TAIL}) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor)", npu_mla_prolog_v3)
define(f"npu_mla_prolog_v3_functional({_MLA_V3_HEAD}Tensor kv_cache, Tensor kr_cache, {_MLA_V3_TAIL}) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_mla_prolog_v3_functional)


def _mla_prolog_v3_functionalized(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                                  rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, **kwargs):
    outs = torch.ops.npu.npu_mla_prolog_v3_functional(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr,
                                                      rmsnorm_gamma_cq, rmsnorm_gamma_ckv, rope_sin, rope_cos,
                                                      kv_cache, kr_cache, **kwargs)
    kv_cache.copy_(outs[5])
    kr_cache.copy_(outs[6])
    return outs[:5]


define_functionalization("npu_mla_prolog_v3", _mla_prolog_v3_functionalized)

define("npu_block_sparse_attention(Tensor query, Tensor key, Tensor value, Tensor block_sparse_mask, "
       "int[] block_shape, *, str q_input_layout='TND', str kv_input_layout='TND', int num_key_value_heads=1, "
       "float scale_value=0.0, int inner_precise=1, int[]? actual_seq_lengths=None, "
       "int[]? actual_seq_lengths_kv=None, int? softmax_lse_flag=0) -> (Tensor, Tensor)",
       npu_block_sparse_attention)
define("npu_block_sparse_attention_backward(Tensor d_out, Tensor query, Tensor key, Tensor value, "
       "Tensor attention_out, Tensor softmax_lse, Tensor block_sparse_mask, int[]? block_shape, "
       "int[]? actual_seq_lengths, int[]? actual_seq_lengths_kv, str q_input_layout, str kv_input_layout, "
       "int num_key_value_heads, float scale_value) -> (Tensor, Tensor, Tensor)",
       npu_block_sparse_attention_backward)
define("npu_nsa_compress(Tensor input, Tensor weight, int compress_block_size, int compress_stride, *, "
       "int[]? actual_seq_len=None) -> Tensor", npu_nsa_compress)
define("npu_nsa_compress_grad(Tensor grad, Tensor input, Tensor weight, int compress_block_size, "
       "int compress_stride, *, int[]? actual_seq_len=None) -> (Tensor, Tensor)", npu_nsa_compress_grad)
define("npu_nsa_compress_attention(Tensor query, Tensor key, Tensor value, float scale_value, int head_num, "
       "int compress_block_size, int compress_stride, int select_block_size, int select_block_count, *, "
       "Tensor? topk_mask=None, Tensor? atten_mask=None, int[]? actual_seq_qlen=None, "
       "int[]? actual_cmp_seq_kvlen=None, int[]? actual_sel_seq_kvlen=None) -> (Tensor, Tensor, Tensor, Tensor)",
       npu_nsa_compress_attention)
define("npu_nsa_select_attention(Tensor query, Tensor key, Tensor value, Tensor topk_indices, float scale_value, "
       "int head_num, int select_block_size, int select_block_count, *, Tensor? atten_mask=None, "
       "int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None) -> (Tensor, Tensor, Tensor)",
       npu_nsa_select_attention)
define("npu_nsa_select_attention_grad(Tensor grad, Tensor query, Tensor key, Tensor value, Tensor attention_out, "
       "Tensor softmax_max, Tensor softmax_sum, Tensor topk_indices, float scale_value, int head_num, "
       "int select_block_size, int select_block_count, *, Tensor? atten_mask=None, int[]? actual_seq_qlen=None, "
       "int[]? actual_seq_kvlen=None) -> (Tensor, Tensor, Tensor)", npu_nsa_select_attention_grad)
define("npu_nsa_select_attention_infer(Tensor query, Tensor key, Tensor value, Tensor topk_indices, "
       "float scale_value, int head_num, int key_value_head_num, int select_block_size, int select_block_count, "
       "int page_block_size, *, str layout='BSND', Tensor? atten_mask=None, Tensor? block_table=None, "
       "int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None) -> Tensor", npu_nsa_select_attention_infer)
define("npu_nsa_compress_infer.cache(Tensor input, Tensor weight, Tensor slot_mapping, int compress_block_size, "
       "int compress_stride, int page_block_size, *, Tensor? block_table=None, int[]? actual_seq_len=None, "
       "Tensor(a!) cache) -> Tensor(a!)", npu_nsa_compress_infer)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
