"""npu_fusion_attention_v2 / _v3 and their gradients (op-plugin's training
attention with more arguments), on vNPU's npu_fusion_attention
(op_plugin/attention.py: layouts, GQA, sparse modes 0-4, masks, TND, dropout):

- npu_fusion_attention_v2 / npu_fusion_attention_grad_v2: keyword-only arguments,
  ``pre_tokens`` / ``next_tokens``, query_rope / key_rope (MLA: the rope part is
  concatenated to each head of query / key, value keeps its head dim), pse_type
  0 (``scale * q k^T + pse``) or 1 (``scale * (q k^T + pse)``, v1's), softmax_layout,
  sink; int seed / offset / numels. The grad returns (dq, dk, dv, dpse, dq_rope,
  dk_rope, dsink), None where the input was absent, dsink an empty float32 tensor.
- npu_fusion_attention_v3 / npu_fusion_attention_grad_v3 (+ ``.out``): v1's
  arguments plus softmax_layout and sink; actual_seq_qlen / actual_seq_kvlen are 1-D
  int tensors, seed / offset int64 tensors of shape [1] on the CPU (the forward returns
  six tensors, no numels). The grad returns (dq, dk, dv, dpse or None, dsink).
- _npu_fusion_attention_v3_infer_output / _npu_fusion_attention_grad_v3_infer_output:
  zero tensors of the outputs' shapes; _npu_fusion_attention_v3_get_max_workspace /
  _npu_fusion_attention_grad_v3_get_max_workspace: an empty uint8 workspace (vNPU's
  kernels need none), with op-plugin's TND-only checks, as the ``.out`` overloads.

Emulation choices:

- softmax_max holds the row log-sum-exp and softmax_sum ones (see attention.py);
  for TND they are (T, N, 8): stored TND with softmax_layout "TND", and by default
  in the kernel's N-major storage (an (N, T, 8) buffer viewed as (T, N, 8)).
- sink (float32, one logit per head) joins each softmax row as an extra logit:
  ``out = softmax([s_i, sink]) [v; 0]``, i.e. attention's output times
  ``sigmoid(lse - sink)``. Its gradients through the log-sum-exp are made exact with
  one more attention call (``P @ K``) when query / key need a gradient.
- A pse that needs a gradient is differentiated through an explicit softmax over
  the materialised scores (pse is that size already); ATen's flash kernel, which
  computes the output, has no gradient for its additive mask.
- Given the forward's softmax_max, softmax_sum and attention_in (and no sink or rope
  parts), the *_grad ops take them as the kernel does (Note [Attention gradients from
  given statistics] in attention.py: ring attention passes the merged ones). Otherwise
  they recompute the forward (the dropout mask from ``seed``) and differentiate it: each
  *_grad equals autograd through the forward, which is how the forwards themselves are
  differentiable (op-plugin's derivatives.yaml).
- numels is B * N * Sq * Skv (TND: N * sum of Sq_i * Skv_i) whatever keep_prob, as
  the kernel reports it; seed is vNPU's dropout seed (0 without dropout), offset 0.
- pse_type 2 / 3: pse holds per-head ALiBi slopes (float32, [N] or [B, N]) and the
  term -slope * |(j + kv_start_idx) - (i + q_start_idx)| (its square root for 3) is
  added after scaling, as CANN's open kernel generates it; computed from materialised
  float32 scores, differentiable in the slopes. With TND each sequence takes the term
  on its own, positions from its start ([B, N] slopes: a row per sequence).
- Not emulated (RuntimeError "... is not supported on vNPU"): an explicit
  dropout_mask with keep_prob < 1, pse_type 2 / 3 with dropout, sink or rope
  parts, and what attention.py rejects (prefix, sparse modes 5-8, a pse tensor with TND).
"""

import torch

from torch_npu.op_plugin import attention as _att
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define

_MAX = 2147483647


def _unsupported(fn, what, reason):
    raise RuntimeError(f"{fn}: {what} is not supported on vNPU: {reason}.")


# --- layout helpers ------------------------------------------------------------


def _rows(x, layout):
    """Per-row values (B, N, S) or (N, T) of a (..., D)-per-head tensor summed over D."""
    if layout == "TND":
        return x.sum(-1).transpose(0, 1)
    b_n_s = {"BNSD": lambda t: t, "BSND": lambda t: t.transpose(1, 2)}
    if layout in b_n_s:
        return b_n_s[layout](x.sum(-1))
    return x  # BSH / SBH are split by the caller


def _row_dot(a, b, layout, head_num):
    """sum over each head's D of a * b, as (B, N, Sq) or (N, T)."""
    prod = a.float() * b.float()
    if layout in ("BSH", "SBH"):
        prod = prod.view(*prod.shape[:2], head_num, -1).sum(-1)  # (B, S, N) or (S, B, N)
        return prod.permute(0, 2, 1) if layout == "BSH" else prod.permute(1, 2, 0)
    return _rows(prod, layout)


def _per_row(w, out, layout, head_num):
    """Multiplies each output row by w ((B, N, Sq) or (N, T))."""
    if layout == "TND":
        return out * w.transpose(0, 1).unsqueeze(-1).to(out.dtype)
    if layout == "BNSD":
        return out * w.unsqueeze(-1).to(out.dtype)
    if layout == "BSND":
        return out * w.transpose(1, 2).unsqueeze(-1).to(out.dtype)
    w = w.permute(0, 2, 1) if layout == "BSH" else w.permute(2, 0, 1)  # (B, S, N) / (S, B, N)
    shaped = out.view(*out.shape[:2], head_num, -1)
    return (shaped * w.unsqueeze(-1).to(out.dtype)).view(out.shape)


def _head_split(x, layout, heads, name, fn):
    """x as (B, N, S, D) given its head count (BSH / SBH split their hidden size)."""
    if layout in ("BSH", "SBH"):
        check(x.dim() == 3 and x.shape[2] % heads == 0, f"{fn}: {name} of shape {list(x.shape)} does not split into "
              f"{heads} heads for input_layout '{layout}'.")
        return _att._to_bnsd(x, layout, x.shape[2] // heads, name, fn)
    return _att._to_bnsd(x, layout, x.shape[-1], name, fn)


def _with_rope(fn, query, key, value, query_rope, key_rope, head_num, layout):
    """(query, key, value, layout, value head dim) with the rope parts concatenated to
    each head (BSH / SBH / BSND go to BNSD) and value zero-padded to the same head dim
    (ATen's flash kernel wants one head dim; the output drops the padding)."""
    check(query_rope is not None and key_rope is not None, f"{fn}: query_rope and key_rope should be given together.")
    for name, t, ref in (("query_rope", query_rope, query), ("key_rope", key_rope, key)):
        check(t.dtype == ref.dtype, f"{fn}: {name} dtype {t.dtype} should be {ref.dtype}.")
        check(t.dim() == ref.dim() and list(t.shape[:-1]) == list(ref.shape[:-1]) if layout in ("BNSD", "BSND", "TND")
              else t.dim() == 3 and list(t.shape[:2]) == list(ref.shape[:2]),
              f"{fn}: {name} of shape {list(t.shape)} does not match {list(ref.shape)} but in the last dimension.")
    if layout == "TND":
        q, k, v = torch.cat([query, query_rope], -1), torch.cat([key, key_rope], -1), value
    else:
        q = _head_split(query, layout, head_num, "query", fn)
        kv_heads = q.shape[1]
        if layout in ("BSH", "SBH"):
            check(key.shape[2] % (query.shape[2] // head_num) == 0, f"{fn}: key's hidden size {key.shape[2]} is not "
                  f"a multiple of query's head dim {query.shape[2] // head_num}.")
            kv_heads = key.shape[2] // (query.shape[2] // head_num)
        k = _head_split(key, layout, kv_heads, "key", fn)
        v = _head_split(value, layout, k.shape[1], "value", fn)
        qr = _head_split(query_rope, layout, q.shape[1], "query_rope", fn)
        kr = _head_split(key_rope, layout, k.shape[1], "key_rope", fn)
        q, k, layout = torch.cat([q, qr], -1), torch.cat([k, kr], -1), "BNSD"
    dv = v.shape[-1]
    check(dv <= k.shape[-1], f"{fn}: value's head dim {dv} should not exceed key's {k.shape[-1]} (with key_rope).")
    v = torch.nn.functional.pad(v, (0, k.shape[-1] - dv))
    return q, k, v, layout, dv


# --- the computation -------------------------------------------------------------


def _explicit_bnsd(fn, q, k, v, head_num, layout, pse, atten_mask, scale, pre, nxt, sparse_mode):
    """(out in layout, lse (B, N, Sq)) from materialised scores: differentiable in pse."""
    head_dim = _att._head_dim(q, layout, head_num, fn)
    qb = _att._to_bnsd(q, layout, head_dim, "query", fn)
    kb = _att._to_bnsd(k, layout, head_dim, "key", fn)
    vb = _head_split(v, layout, kb.shape[1], "value", fn) if layout in ("BSH", "SBH") else \
        _att._to_bnsd(v, layout, head_dim, "value", fn)
    kb, vb = _att._expand_kv(kb, vb, qb.shape[1], fn)
    b, n, sq, skv = qb.shape[0], qb.shape[1], qb.shape[2], kb.shape[2]
    masked, causal = _att._training_masked(atten_mask, sparse_mode, pre, nxt, b, n, sq, skv, q.device, fn)
    if causal:
        masked = _att._band_masked(sq, skv, q.device, 0, _MAX, 0)
    scores = _att._scores(qb, kb, _att._additive(masked, pse, scale, torch.float32), False, scale)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.exp(scores - lse.unsqueeze(-1)), vb.float()).to(q.dtype)
    return _att._from_bnsd(out, layout), lse


def _alibi(fn, slopes, pse_type, query, key, head_num, layout, start_idx):
    """pse_type 2 / 3: the ALiBi term the kernel generates from per-head slopes (float32, [N] or [B, N]),
    added after scaling: -slope * |(j + kv_start_idx) - (i + q_start_idx)|, its square root for 3
    (CANN's open flash-attention kernel, pse.h). (B or 1, N, Sq, Skv), float32."""
    check(slopes is not None, f"{fn}: pse_type {pse_type} needs pse, the per-head ALiBi slopes.")
    head_dim = _att._head_dim(query, layout, head_num, fn)
    qb = _att._to_bnsd(query, layout, head_dim, "query", fn)
    kb = _att._to_bnsd(key, layout, head_dim, "key", fn)
    b, sq, skv = qb.shape[0], qb.shape[2], kb.shape[2]
    check(slopes.dtype == torch.float32 and list(slopes.shape) in ([head_num], [b, head_num]),
          f"{fn}: with pse_type {pse_type} pse holds the ALiBi slopes, float32 of shape [N] or [B, N] = "
          f"[{head_num}] or [{b}, {head_num}], but got {slopes.dtype} of shape {list(slopes.shape)}.")
    return -slopes.reshape(-1, head_num, 1, 1) * _alibi_distance(pse_type, sq, skv, start_idx, query.device)


def _alibi_distance(pse_type, sq, skv, start_idx, device):
    """|(j + kv_start_idx) - (i + q_start_idx)| (its square root for pse_type 3), (Sq, Skv) float32."""
    q_start, kv_start = (int(x[0]) if x is not None and len(x) else 0 for x in start_idx)
    i = torch.arange(sq, device=device, dtype=torch.float32).unsqueeze(1) + q_start
    j = torch.arange(skv, device=device, dtype=torch.float32).unsqueeze(0) + kv_start
    distance = (j - i).abs()
    return distance.sqrt() if pse_type == 3 else distance


def _tnd_alibi(fn, query, key, value, head_num, slopes, pse_type, atten_mask, scale, pre, nxt, qlen, kvlen,
               sparse_mode, start_idx):
    """TND with pse_type 2 / 3: each sequence on its own, its positions from its start, with the slopes ([N]) or
    its row of them ([B, N], a row per sequence). (out (T, N, Dv), lse (N, T))."""
    check(slopes is not None, f"{fn}: pse_type {pse_type} needs pse, the per-head ALiBi slopes.")
    sequences = _att._tnd_sequences(fn, query, key, value, None, atten_mask, sparse_mode, qlen, kvlen)
    check(slopes.dtype == torch.float32 and list(slopes.shape) in ([head_num], [len(sequences), head_num]),
          f"{fn}: with pse_type {pse_type} pse holds the ALiBi slopes, float32 of shape [N] or [B, N] = [{head_num}] "
          f"or [{len(sequences)}, {head_num}] (B: the sequences of actual_seq_qlen), but got {slopes.dtype} of shape "
          f"{list(slopes.shape)}.")
    outs, lses = [], []
    for index, ((q0, q1), (k0, k1)) in enumerate(sequences):
        rows = slopes if slopes.dim() == 1 else slopes[index]
        alibi = -rows.reshape(1, head_num, 1, 1) * _alibi_distance(pse_type, q1 - q0, k1 - k0, start_idx,
                                                                  query.device)
        mask = _att._sequence_mask(fn, atten_mask, sparse_mode, q1 - q0, k1 - k0)
        out, lse = _explicit_bnsd(fn, _att._tnd_bnsd(query, q0, q1), _att._tnd_bnsd(key, k0, k1),
                                  _att._tnd_bnsd(value, k0, k1), head_num, "BNSD", alibi / scale, mask, scale, pre,
                                  nxt, sparse_mode)
        outs.append(out[0].transpose(0, 1))
        lses.append(lse[0])
    return torch.cat(outs, 0), torch.cat(lses, 1)


def _attention(fn, query, key, value, head_num, layout, pse, padding_mask, atten_mask, scale, keep_prob, pre, nxt,
               prefix, qlen, kvlen, sparse_mode, seed, query_rope=None, key_rope=None, pse_type=1, sink=None,
               start_idx=(None, None)):
    """(out in input_layout, lse (B, N, Sq) or (N, T)) of the v2 / v3 attention."""
    check(pse_type in (0, 1, 2, 3), f"{fn}: pse_type should be 0, 1, 2 or 3, got {pse_type}.")
    if pse_type in (2, 3):  # in float32 from materialised scores, as the kernel adds the term
        check(keep_prob >= 1.0 and sink is None and query_rope is None and key_rope is None,
              f"{fn}: pse_type {pse_type} with dropout, sink or rope parts is not supported on vNPU.")
        check(scale != 0, f"{fn}: pse_type {pse_type} with scale 0 is not supported.")
        if layout == "TND":
            return _tnd_alibi(fn, query, key, value, head_num, pse, pse_type, atten_mask, scale, pre, nxt, qlen, kvlen,
                              sparse_mode, start_idx)
        alibi = _alibi(fn, pse, pse_type, query, key, head_num, layout, start_idx)
        return _explicit_bnsd(fn, query, key, value, head_num, layout, alibi / scale, atten_mask, scale, pre, nxt,
                              sparse_mode)
    if pse is not None and pse_type == 0:
        check(scale != 0, f"{fn}: pse_type 0 with scale 0 is not supported.")
        pse = pse / scale  # scale * q k^T + pse == scale * (q k^T + pse / scale)
    out_layout, value_dim = layout, None
    if query_rope is not None or key_rope is not None:
        query, key, value, layout, value_dim = _with_rope(fn, query, key, value, query_rope, key_rope, head_num,
                                                          layout)
    if sink is not None:
        check(sink.dtype == torch.float32 and list(sink.shape) == [head_num],
              f"{fn}: sink should be a float32 tensor of shape [{head_num}] (head_num), got {sink.dtype} of shape "
              f"{list(sink.shape)}.")
    grad_on = torch.is_grad_enabled()
    flash = keep_prob >= 1.0
    pse_grad = pse is not None and pse.requires_grad and grad_on and flash
    out, lse = _att._fusion_attention(query, key, value, head_num, layout, pse.detach() if pse_grad else pse,
                                      padding_mask, atten_mask, scale, keep_prob, pre, nxt, prefix, qlen, kvlen,
                                      sparse_mode, seed, fn=fn)
    if pse_grad:  # flash has no pse gradient: take it from the explicit scores
        out_e, lse_e = _explicit_bnsd(fn, query.detach(), key.detach(), value.detach(), head_num, layout, pse,
                                      atten_mask, scale, pre, nxt, sparse_mode)
        out = out + (out_e - out_e.detach())
        lse = lse + (lse_e - lse_e.detach())
    if sink is not None:
        if flash and grad_on and (query.requires_grad or key.requires_grad):
            # d lse_i = scale * (sum_j P_ij k_j . dq_i + sum_j P_ij q_i . dk_j): the q part is
            # q . (P @ K), the k part the value gradient of an attention whose values are K.
            pk = _att._fusion_attention(query.detach(), key.detach(), key, head_num, layout, None if pse is None else
                                        pse.detach(), padding_mask, atten_mask, scale, 1.0, pre, nxt, prefix, qlen,
                                        kvlen, sparse_mode, seed, fn=fn)[0]
            s = scale * (_row_dot(query, pk.detach(), layout, head_num) +
                         _row_dot(query.detach(), pk, layout, head_num))
            lse = lse + (s - s.detach())
        per_head = sink.view(-1, 1) if layout == "TND" else sink.view(1, -1, 1)
        out = _per_row(torch.sigmoid(lse - per_head), out, layout, head_num)
        lse = torch.logaddexp(lse, per_head)
    if value_dim is not None:
        out = out[..., :value_dim].contiguous()
    if layout != out_layout:
        out = _att._from_bnsd(out, out_layout)
    return out, lse


def _stats(lse, layout, softmax_layout):
    """softmax_max / softmax_sum, v1's: TND's default is the kernel's N-major storage."""
    return _att._stats(lse, layout, softmax_layout)


def _numels(query, key, layout, head_num, qlen, kvlen):
    if layout == "TND":
        q = [b - a for a, b in zip([0] + list(qlen), qlen)]
        kv = [b - a for a, b in zip([0] + list(kvlen), kvlen)]
        return query.shape[1] * sum(x * y for x, y in zip(q, kv))
    seq = {"BSH": (1, 1), "SBH": (0, 0), "BSND": (1, 1), "BNSD": (2, 2)}[layout]
    batch = query.shape[1] if layout == "SBH" else query.shape[0]
    return batch * head_num * query.shape[seq[0]] * key.shape[seq[1]]


def _lengths(fn, name, lengths):
    """v3's actual_seq_*len (1-D int tensor) as a list."""
    if lengths is None:
        return None
    check(isinstance(lengths, torch.Tensor) and lengths.dim() == 1 and not lengths.is_floating_point(),
          f"{fn}: {name} should be a 1-dimensional int64 tensor (on the CPU), got "
          f"{lengths.dtype if isinstance(lengths, torch.Tensor) else type(lengths).__name__}.")
    return [int(v) for v in lengths.tolist()]


def _seed_value(fn, seed, keep_prob):
    if seed is None:
        check(keep_prob >= 1.0, f"{fn}: seed is required with keep_prob < 1 (the forward's 5th output).")
        return 0
    check(seed.numel() == 1 and not seed.is_floating_point(),
          f"{fn}: seed should be an int64 tensor of one element, got {seed.dtype} of shape {list(seed.shape)}.")
    return int(seed.item())


def _grads(fn, forward, query, key, value, dy, extra):
    """Recomputes `forward` under autograd: grads of (query, key, value, *extra) (None
    for absent extras)."""
    check(dy.dtype == query.dtype, f"{fn}: dy dtype {dy.dtype} should be query's {query.dtype}.")
    with torch.enable_grad():
        inputs = [t.detach().requires_grad_() for t in (query, key, value)]
        extras = [t.detach().requires_grad_() if t is not None else None for t in extra]
        out = forward(*inputs, *extras)
        check(dy.shape == out.shape, f"{fn}: dy of shape {list(dy.shape)} should have attention_out's shape "
              f"{list(out.shape)}.")
        wrt = inputs + [t for t in extras if t is not None]
        got = list(torch.autograd.grad(out, wrt, dy, allow_unused=True))
    grads = [g if g is not None else torch.zeros_like(t) for g, t in zip(got[:3], inputs)]
    rest = iter(got[3:])
    for t in extras:
        g = next(rest) if t is not None else None
        grads.append(None if t is None else (g if g is not None else torch.zeros_like(t)))
    return grads


# --- v2 -----------------------------------------------------------------------------


def npu_fusion_attention_v2(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                            query_rope=None, key_rope=None, scale=1.0, keep_prob=1.0, pre_tokens=_MAX,
                            next_tokens=_MAX, inner_precise=0, prefix=None, actual_seq_qlen=None,
                            actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True, sync=False, pse_type=1,
                            q_start_idx=None, kv_start_idx=None, softmax_layout="", sink=None, dropout_mask=None,
                            seed=0, offset=0):
    fn = "npu_fusion_attention_v2"
    _att._check_softmax_layout(fn, softmax_layout, input_layout)
    if dropout_mask is not None and keep_prob < 1.0:
        _unsupported(fn, "dropout_mask", "vNPU draws its dropout mask from the returned seed and cannot read the "
                     "kernel's bit-packed mask")
    if keep_prob < 1.0:
        seed, offset = _att._draw_seed(query.device, keep_prob), 0
    out, lse = _attention(fn, query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, scale,
                          keep_prob, pre_tokens, next_tokens, prefix, actual_seq_qlen, actual_seq_kvlen, sparse_mode,
                          seed, query_rope, key_rope, pse_type, sink, (q_start_idx, kv_start_idx))
    softmax_max, softmax_sum = _stats(lse, input_layout, softmax_layout)
    numels = _numels(query, key, input_layout, head_num, actual_seq_qlen, actual_seq_kvlen)
    return out, softmax_max, softmax_sum, query.new_empty((0,)), seed, offset, numels


def _statistics_apply(softmax_max, softmax_sum, attention_in, sink, query_rope=None, key_rope=None):
    """Whether a grad takes the forward's statistics and output as given (Note [Attention gradients from
    given statistics] in attention.py): when they are passed, without a sink or rope parts, whose
    statistics vNPU's forward folds differently."""
    given = softmax_max is not None and softmax_sum is not None and attention_in is not None
    return given and sink is None and query_rope is None and key_rope is None


def _grad_from_statistics(fn, query, key, value, dy, head_num, layout, pse, pse_type, padding_mask, atten_mask,
                          softmax_max, softmax_sum, attention_in, scale, keep_prob, pre, nxt, prefix, qlen, kvlen,
                          sparse_mode, seed, softmax_layout):
    """(dq, dk, dv, dpse or None) from the given statistics; pseType 0 (added after scaling) as pse / scale."""
    if pse is not None and pse_type == 0:
        check(scale != 0, f"{fn}: pse_type 0 with scale 0 is not supported.")
    shifted = pse / scale if pse is not None and pse_type == 0 else pse
    dq, dk, dv, dpse = _att._grad_from_statistics(fn, query, key, value, dy, head_num, layout, shifted, padding_mask,
                                                  atten_mask, softmax_max, softmax_sum, attention_in, scale,
                                                  keep_prob, pre, nxt, prefix, qlen, kvlen, sparse_mode, seed,
                                                  softmax_layout)
    if pse is None:
        return dq, dk, dv, None
    return dq, dk, dv, (dpse / scale if pse_type == 0 else dpse)


def npu_fusion_attention_grad_v2(query, key, value, dy, head_num, input_layout, pse=None, padding_mask=None,
                                 atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None,
                                 attention_in=None, query_rope=None, key_rope=None, scale_value=1.0, keep_prob=1.0,
                                 pre_tokens=_MAX, next_tokens=_MAX, inner_precise=0, seed=0, offset=0, numels=0,
                                 prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                                 gen_mask_parallel=True, sync=False, pse_type=1, q_start_idx=None, kv_start_idx=None,
                                 softmax_layout="", sink=None):
    """(dq, dk, dv, dpse, dq_rope, dk_rope, dsink)."""
    fn = "npu_fusion_attention_grad_v2"
    _att._check_softmax_layout(fn, softmax_layout, input_layout)
    if _statistics_apply(softmax_max, softmax_sum, attention_in, sink, query_rope, key_rope) and pse_type in (0, 1):
        dq, dk, dv, dpse = _grad_from_statistics(fn, query, key, value, dy, head_num, input_layout, pse, pse_type,
                                                 padding_mask, atten_mask, softmax_max, softmax_sum, attention_in,
                                                 scale_value, keep_prob, pre_tokens, next_tokens, prefix,
                                                 actual_seq_qlen, actual_seq_kvlen, sparse_mode, seed, softmax_layout)
        return dq, dk, dv, dpse, None, None, key.new_empty((0,), dtype=torch.float32)

    def forward(q, k, v, p, qr, kr, s):
        return _attention(fn, q, k, v, head_num, input_layout, p, padding_mask, atten_mask, scale_value, keep_prob,
                          pre_tokens, next_tokens, prefix, actual_seq_qlen, actual_seq_kvlen, sparse_mode, seed, qr,
                          kr, pse_type, s, (q_start_idx, kv_start_idx))[0]

    dq, dk, dv, dpse, dq_rope, dk_rope, dsink = _grads(fn, forward, query, key, value, dy,
                                                       (pse, query_rope, key_rope, sink))
    if dsink is None:
        dsink = key.new_empty((0,), dtype=torch.float32)
    return dq, dk, dv, dpse, dq_rope, dk_rope, dsink


# --- v3 -----------------------------------------------------------------------------


def _seed_tensors(seed):
    return torch.tensor([seed], dtype=torch.int64), torch.zeros(1, dtype=torch.int64)


def npu_fusion_attention_v3(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                            scale=1.0, keep_prob=1.0, pre_tockens=_MAX, next_tockens=_MAX, inner_precise=0,
                            prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                            gen_mask_parallel=True, sync=False, softmax_layout="", sink=None):
    """(attention_out, softmax_max, softmax_sum, softmax_out, seed, offset)."""
    fn = "npu_fusion_attention_v3"
    _att._check_softmax_layout(fn, softmax_layout, input_layout)
    qlen, kvlen = _lengths(fn, "actual_seq_qlen", actual_seq_qlen), _lengths(fn, "actual_seq_kvlen", actual_seq_kvlen)
    seed = _att._draw_seed(query.device, keep_prob)
    out, lse = _attention(fn, query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, scale,
                          keep_prob, pre_tockens, next_tockens, prefix, qlen, kvlen, sparse_mode, seed, sink=sink)
    softmax_max, softmax_sum = _stats(lse, input_layout, softmax_layout)
    seed_t, offset_t = _seed_tensors(seed)
    return out, softmax_max, softmax_sum, query.new_empty((0,)), seed_t, offset_t


def npu_fusion_attention_grad_v3(query, key, value, dy, head_num, input_layout, pse=None, padding_mask=None,
                                 atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None,
                                 attention_in=None, scale_value=1.0, keep_prob=1.0, pre_tockens=_MAX,
                                 next_tockens=_MAX, inner_precise=0, seed=None, offset=None, prefix=None,
                                 actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True,
                                 sync=False, softmax_layout="", sink=None):
    """(dq, dk, dv, dpse or None, dsink)."""
    fn = "npu_fusion_attention_grad_v3"
    _att._check_softmax_layout(fn, softmax_layout, input_layout)
    qlen, kvlen = _lengths(fn, "actual_seq_qlen", actual_seq_qlen), _lengths(fn, "actual_seq_kvlen", actual_seq_kvlen)
    seed_value = _seed_value(fn, seed, keep_prob)
    if _statistics_apply(softmax_max, softmax_sum, attention_in, sink):
        dq, dk, dv, dpse = _grad_from_statistics(fn, query, key, value, dy, head_num, input_layout, pse, 1,
                                                 padding_mask, atten_mask, softmax_max, softmax_sum, attention_in,
                                                 scale_value, keep_prob, pre_tockens, next_tockens, prefix, qlen,
                                                 kvlen, sparse_mode, seed_value, softmax_layout)
        return dq, dk, dv, dpse, key.new_empty((0,), dtype=torch.float32)

    def forward(q, k, v, p, s):
        return _attention(fn, q, k, v, head_num, input_layout, p, padding_mask, atten_mask, scale_value, keep_prob,
                          pre_tockens, next_tockens, prefix, qlen, kvlen, sparse_mode, seed_value, sink=s)[0]

    dq, dk, dv, dpse, dsink = _grads(fn, forward, query, key, value, dy, (pse, sink))
    if dsink is None:
        dsink = key.new_empty((0,), dtype=torch.float32)
    return dq, dk, dv, dpse, dsink


def _write(fn, target, value, name):
    check(target.dtype == value.dtype, f"{fn}: {name} should have dtype {value.dtype}, got {target.dtype}.")
    if target.shape != value.shape:
        target.resize_(value.shape)
    target.copy_(value)
    return target


def _check_out_layout(fn, input_layout, actual_seq_qlen, actual_seq_kvlen):
    check(input_layout.upper() == "TND", f"{fn}: the .out overload (ACLgraph) currently only supports input_layout "
          f"'TND', got '{input_layout}'.")
    check(actual_seq_qlen is not None and actual_seq_kvlen is not None,
          f"{fn}: the .out overload with input_layout 'TND' requires actual_seq_qlen and actual_seq_kvlen.")


def npu_fusion_attention_v3_out(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                                atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=_MAX, next_tockens=_MAX,
                                inner_precise=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None,
                                sparse_mode=0, gen_mask_parallel=True, sync=False, softmax_layout="", sink=None,
                                workspace=None, *, attention_score, softmax_max, softmax_sum, softmax_out, seed,
                                offset):
    """The .out overload: the results written into the given tensors (resized as out=
    tensors are); workspace (from _npu_fusion_attention_v3_get_max_workspace) is unused."""
    fn = "npu_fusion_attention_v3.out"
    _check_out_layout(fn, input_layout, actual_seq_qlen, actual_seq_kvlen)
    check(sink is None, f"{fn}: the .out overload does not support sink (as op-plugin's).")
    results = npu_fusion_attention_v3(query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, scale,
                                      keep_prob, pre_tockens, next_tockens, inner_precise, prefix, actual_seq_qlen,
                                      actual_seq_kvlen, sparse_mode, gen_mask_parallel, sync, softmax_layout, None)
    targets = (attention_score, softmax_max, softmax_sum, softmax_out, seed, offset)
    names = ("attention_score", "softmax_max", "softmax_sum", "softmax_out", "seed", "offset")
    with torch.no_grad():
        return tuple(_write(fn, t, v.to(t.device), n) for t, v, n in zip(targets, results, names))


def npu_fusion_attention_grad_v3_out(query, key, value, dy, head_num, input_layout, pse=None, padding_mask=None,
                                     atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None,
                                     attention_in=None, scale_value=1.0, keep_prob=1.0, pre_tockens=_MAX,
                                     next_tockens=_MAX, inner_precise=0, seed=None, offset=None, prefix=None,
                                     actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                                     gen_mask_parallel=True, sync=False, softmax_layout="", sink=None, workspace=None,
                                     dq=None, dk=None, dv=None, dpse=None, dsink=None):
    fn = "npu_fusion_attention_grad_v3.out"
    _check_out_layout(fn, input_layout, actual_seq_qlen, actual_seq_kvlen)
    results = npu_fusion_attention_grad_v3(query, key, value, dy, head_num, input_layout, pse, padding_mask,
                                           atten_mask, softmax_max, softmax_sum, softmax_in, attention_in, scale_value,
                                           keep_prob, pre_tockens, next_tockens, inner_precise, seed, offset, prefix,
                                           actual_seq_qlen, actual_seq_kvlen, sparse_mode, gen_mask_parallel, sync,
                                           softmax_layout, sink)
    if results[3] is None:
        results = results[:3] + (query.new_empty((0,)),) + results[4:]
    with torch.no_grad():
        return tuple(_write(fn, t, v, n) for t, v, n in zip((dq, dk, dv, dpse, dsink), results,
                                                            ("dq", "dk", "dv", "dpse", "dsink")))


def _npu_fusion_attention_v3_infer_output(query, key, value, head_num, input_layout):
    """Zero (attention_score, softmax_max, softmax_sum) of npu_fusion_attention_v3's shapes."""
    fn = "_npu_fusion_attention_v3_infer_output"
    layout = input_layout.upper()
    check(layout in _att._LAYOUTS, f"{fn}: input_layout should be one of {list(_att._LAYOUTS)}, got '{input_layout}'.")
    check(head_num > 0, f"{fn}: head_num should be > 0, got {head_num}.")
    check(query.dim() == (3 if layout in ("BSH", "SBH", "TND") else 4) and value.dim() == query.dim() and
          key.dim() == query.dim(), f"{fn}: query, key and value should be "
          f"{3 if layout in ('BSH', 'SBH', 'TND') else 4}-dimensional for input_layout '{layout}'.")
    if layout in ("BSH", "SBH"):
        d = query.shape[2] // head_num
        divisor = key.shape[2] // d if d else 0
        d2 = d if d == 0 or key.shape[2] == 0 or divisor == 0 else value.shape[2] // divisor
        out_shape = [query.shape[0], query.shape[1], head_num * d2]
        b, s = (query.shape[0], query.shape[1]) if layout == "BSH" else (query.shape[1], query.shape[0])
        stat = [b, head_num, s, _att._STAT_REPEAT]
    elif layout == "TND":
        out_shape = [query.shape[0], query.shape[1], value.shape[2]]
        stat = [query.shape[0], query.shape[1], _att._STAT_REPEAT]
    else:
        out_shape = list(query.shape[:3]) + [value.shape[3]]
        s = query.shape[2] if layout == "BNSD" else query.shape[1]
        stat = [query.shape[0], head_num, s, _att._STAT_REPEAT]
    return (query.new_zeros(out_shape), query.new_zeros(stat, dtype=torch.float32),
            query.new_zeros(stat, dtype=torch.float32))


def _npu_fusion_attention_grad_v3_infer_output(query, key, value, pse=None, sink=None):
    """Zero (dq, dk, dv, dpse, dsink) of npu_fusion_attention_grad_v3's shapes."""
    dpse = torch.zeros_like(pse) if pse is not None else query.new_empty((0,))
    dsink = torch.zeros_like(sink, dtype=torch.float32) if sink is not None else \
        key.new_empty((0,), dtype=torch.float32)
    return torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value), dpse, dsink


def _workspace(fn, query, input_layout, actual_seq_qlen, actual_seq_kvlen):
    check(input_layout.upper() == "TND", f"{fn}: currently only supports input_layout 'TND' (ACLgraph), got "
          f"'{input_layout}'.")
    check(actual_seq_qlen is not None and actual_seq_kvlen is not None,
          f"{fn}: input_layout 'TND' requires actual_seq_qlen and actual_seq_kvlen.")
    return query.new_empty((0,), dtype=torch.uint8)


def _npu_fusion_attention_v3_get_max_workspace(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                                               atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=_MAX,
                                               next_tockens=_MAX, inner_precise=0, prefix=None, actual_seq_qlen=None,
                                               actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True,
                                               sync=False, softmax_layout="", sink=None):
    """The workspace npu_fusion_attention_v3.out takes: empty (vNPU's kernels need none)."""
    return _workspace("_npu_fusion_attention_v3_get_max_workspace", query, input_layout, actual_seq_qlen,
                      actual_seq_kvlen)


def _npu_fusion_attention_grad_v3_get_max_workspace(query, key, value, dy, head_num, input_layout, pse=None,
                                                    padding_mask=None, atten_mask=None, softmax_max=None,
                                                    softmax_sum=None, softmax_in=None, attention_in=None,
                                                    scale_value=1.0, keep_prob=1.0, pre_tockens=_MAX,
                                                    next_tockens=_MAX, inner_precise=0, seed=None, offset=None,
                                                    prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None,
                                                    sparse_mode=0, gen_mask_parallel=True, sync=False,
                                                    softmax_layout="", sink=None):
    return _workspace("_npu_fusion_attention_grad_v3_get_max_workspace", query, input_layout, actual_seq_qlen,
                      actual_seq_kvlen)


# --- registrations --------------------------------------------------------------------

_V3_ARGS = ("Tensor query, Tensor key, Tensor value, int head_num, str input_layout, Tensor? pse=None, "
            "Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., float keep_prob=1., "
            "int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, {prefix}? prefix=None, "
            "Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, int sparse_mode=0, "
            "bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None")
_GRAD_V3_ARGS = ("Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, str input_layout, *, "
                 "Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? softmax_max=None, "
                 "Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, "
                 "float scale_value=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, "
                 "int inner_precise=0, Tensor? seed=None, Tensor? offset=None, {prefix}? prefix=None, "
                 "Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, int sparse_mode=0, "
                 "bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None")

define("npu_fusion_attention_v2(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, *, "
       "Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? query_rope=None, "
       "Tensor? key_rope=None, float scale=1., float keep_prob=1., int pre_tokens=2147483647, "
       "int next_tokens=2147483647, int inner_precise=0, int[]? prefix=None, int[]? actual_seq_qlen=None, "
       "int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, "
       "int pse_type=1, int[]? q_start_idx=None, int[]? kv_start_idx=None, str softmax_layout=\"\", "
       "Tensor? sink=None, Tensor? dropout_mask=None, int seed=0, int offset=0) "
       "-> (Tensor, Tensor, Tensor, Tensor, int, int, int)", npu_fusion_attention_v2)
define("npu_fusion_attention_grad_v2(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, "
       "str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, "
       "Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, "
       "Tensor? query_rope=None, Tensor? key_rope=None, float scale_value=1., float keep_prob=1., "
       "int pre_tokens=2147483647, int next_tokens=2147483647, int inner_precise=0, int seed=0, int offset=0, "
       "int numels=0, int[]? prefix=None, int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, "
       "int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, int pse_type=1, int[]? q_start_idx=None, "
       "int[]? kv_start_idx=None, str softmax_layout=\"\", Tensor? sink=None) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_fusion_attention_grad_v2)
define(f"npu_fusion_attention_v3({_V3_ARGS.format(prefix='SymInt[]')}) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_fusion_attention_v3)
define(f"npu_fusion_attention_v3.out({_V3_ARGS.format(prefix='int[]')}, Tensor? workspace=None, *, "
       "Tensor(a!) attention_score, Tensor(b!) softmax_max, Tensor(c!) softmax_sum, Tensor(d!) softmax_out, "
       "Tensor(e!) seed, Tensor(f!) offset) -> (Tensor(a!), Tensor(b!), Tensor(c!), Tensor(d!), Tensor(e!), "
       "Tensor(f!))", npu_fusion_attention_v3_out)
define(f"npu_fusion_attention_grad_v3({_GRAD_V3_ARGS.format(prefix='SymInt[]')}) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor)", npu_fusion_attention_grad_v3)
define(f"npu_fusion_attention_grad_v3.out({_GRAD_V3_ARGS.format(prefix='int[]')}, Tensor? workspace=None, "
       "Tensor(a!) dq, Tensor(b!) dk, Tensor(c!) dv, Tensor(d!) dpse, Tensor(e!) dsink) "
       "-> (Tensor(a!), Tensor(b!), Tensor(c!), Tensor(d!), Tensor(e!))", npu_fusion_attention_grad_v3_out)
define("_npu_fusion_attention_v3_infer_output(Tensor query, Tensor key, Tensor value, int head_num, "
       "str input_layout) -> (Tensor, Tensor, Tensor)", _npu_fusion_attention_v3_infer_output)
define("_npu_fusion_attention_grad_v3_infer_output(Tensor query, Tensor key, Tensor value, Tensor? pse=None, "
       "Tensor? sink=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)", _npu_fusion_attention_grad_v3_infer_output)
define(f"_npu_fusion_attention_v3_get_max_workspace({_V3_ARGS.format(prefix='int[]')}) -> Tensor",
       _npu_fusion_attention_v3_get_max_workspace)
define(f"_npu_fusion_attention_grad_v3_get_max_workspace({_GRAD_V3_ARGS.format(prefix='int[]')}) -> Tensor",
       _npu_fusion_attention_grad_v3_get_max_workspace)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
