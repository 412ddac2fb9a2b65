"""Fused attention: npu_fusion_attention (training) and its grad, the
inference attentions (prompt / incremental / fused-infer), and the masked
softmax family.

npu_fusion_attention's semantics, as torch_npu documents them:
``out = Dropout(Softmax(Mask(scale * (pse + q @ k^T), atten_mask)), keep_prob) @ v``
with True in ``atten_mask`` meaning *masked out*. Without dropout it runs on
ATen's flash-attention CPU kernel (``_scaled_dot_product_flash_attention_for_cpu``):
memory O(S) per row block, causal modes without any mask tensor, and
autograd through that kernel's own backward. A mask that cannot be expressed
as ``is_causal`` (sparse_mode 3 with Sq != Skv, 4, explicit masks) becomes one
additive Sq x Skv tensor shared by all batches and heads. Dropout uses the
reference formula with a mask drawn from a generator seeded with the returned
``seed``, so npu_fusion_attention_grad can redraw it.

softmax_max / softmax_sum: the real kernel returns the row maximum and the sum
of exponentials (fp32, the last dimension repeated 8 times). Here softmax_max
holds the row's log-sum-exp and softmax_sum ones: ``max + log(sum)`` is the
same, which is all that block-merging code (ring attention) and the grad
need, but the two are not separately the kernel's values.
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define

_LAYOUTS = ("BSH", "SBH", "BSND", "BNSD", "TND")
_MAX_TOKENS = 2147483647
_STAT_REPEAT = 8  # the real kernel's softmax_max/sum repeat each value 8 times


# --- layouts -------------------------------------------------------------------

def _check_layout(name, layout):
    check(layout in _LAYOUTS, f"{name}: input_layout should be one of {list(_LAYOUTS)}, but got '{layout}'.")


def _to_bnsd(x, layout, head_dim, arg, fn):
    """x in `layout` as a (B, N, S, D) view; head_dim splits BSH/SBH."""
    want = {"BSH": 3, "SBH": 3, "BSND": 4, "BNSD": 4}[layout]
    check(x.dim() == want, f"{fn}: {arg} should be {want}-dimensional for input_layout '{layout}', "
          f"but got shape {list(x.shape)}.")
    if layout in ("BSH", "SBH"):
        hidden = x.shape[2]
        check(hidden % head_dim == 0, f"{fn}: the hidden size {hidden} of {arg} is not a multiple of the head "
              f"dimension {head_dim} (query's hidden size / head_num).")
        if layout == "BSH":
            return x.view(x.shape[0], x.shape[1], hidden // head_dim, head_dim).transpose(1, 2)
        return x.view(x.shape[0], x.shape[1], hidden // head_dim, head_dim).permute(1, 2, 0, 3)
    if layout == "BSND":
        return x.transpose(1, 2)
    return x


def _value_head_dim(key, value, layout, head_dim, fn):
    """Value's head dimension, which may differ from query's and key's (MLA: 192 for q/k, 128 for v).

    BSH/SBH pack heads into the hidden size, so it is value's hidden size over
    key's head count (key's hidden size / head_dim); the 4-D layouts say it."""
    if layout not in ("BSH", "SBH"):
        return value.shape[-1]
    check(key.dim() == 3 and value.dim() == 3 and key.shape[2] % head_dim == 0,
          f"{fn}: the hidden size {key.shape[-1]} of key is not a multiple of the head dimension {head_dim} "
          "(query's hidden size / head_num).")
    kv_heads = key.shape[2] // head_dim
    check(value.shape[2] % kv_heads == 0, f"{fn}: the hidden size {value.shape[2]} of value is not a multiple of "
          f"key's head count {kv_heads}.")
    return value.shape[2] // kv_heads


def _from_bnsd(x, layout):
    b, n, s, d = x.shape
    if layout == "BSH":
        return x.transpose(1, 2).reshape(b, s, n * d)
    if layout == "SBH":
        return x.permute(2, 0, 1, 3).reshape(s, b, n * d)
    if layout == "BSND":
        return x.transpose(1, 2).contiguous()
    return x.contiguous()


def _head_dim(query, layout, head_num, fn):
    check(isinstance(head_num, int) and head_num > 0, f"{fn}: head_num should be a positive int, but got {head_num}.")
    if layout in ("BSH", "SBH"):
        check(query.dim() == 3, f"{fn}: query should be 3-dimensional for input_layout '{layout}', but got shape "
              f"{list(query.shape)}.")
        check(query.shape[2] % head_num == 0,
              f"{fn}: query's hidden size {query.shape[2]} is not divisible by head_num {head_num}.")
        return query.shape[2] // head_num
    heads = {"BSND": 2, "BNSD": 1, "TND": 1}[layout]
    check(query.dim() == (3 if layout == "TND" else 4), f"{fn}: query should be "
          f"{3 if layout == 'TND' else 4}-dimensional for input_layout '{layout}', but got shape {list(query.shape)}.")
    check(query.shape[heads] == head_num, f"{fn}: head_num {head_num} does not match query's head count "
          f"{query.shape[heads]} in input_layout '{layout}'.")
    return query.shape[-1]


def _check_inputs(fn, query, key, value):
    for name, t in (("key", key), ("value", value)):
        check(t.dtype == query.dtype, f"{fn}: {name} dtype {t.dtype} should be the same as query dtype {query.dtype}.")
        check(t.device == query.device, f"{fn}: {name} is on {t.device} but query is on {query.device}; "
              "Expected all tensors to be on the same device.")
    check(query.dtype in (torch.float16, torch.bfloat16, torch.float32),
          f"{fn}: query dtype should be float16, bfloat16 or float32, but got {query.dtype}.")


def _expand_kv(k, v, heads, fn):
    """GQA/MQA: repeat each key/value head for its group of query heads."""
    kv_heads = k.shape[1]
    check(v.shape[1] == kv_heads, f"{fn}: key has {kv_heads} heads but value has {v.shape[1]}.")
    check(kv_heads > 0 and heads % kv_heads == 0,
          f"{fn}: the query head count {heads} should be a multiple of the key/value head count {kv_heads}.")
    if kv_heads == heads:
        return k, v
    group = heads // kv_heads
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)


# --- masks ---------------------------------------------------------------------

def _band_masked(sq, skv, device, shift, pre, nxt):
    """True where key j lies outside [i + shift - pre, i + shift + nxt]."""
    i = torch.arange(sq, device=device).unsqueeze(1)
    j = torch.arange(skv, device=device).unsqueeze(0)
    rel = j - i - shift
    return (rel > nxt) | (rel < -pre)


def _user_mask(atten_mask, b, n, sq, skv, fn):
    check(atten_mask.dtype in (torch.bool, torch.uint8),
          f"{fn}: atten_mask should be bool or uint8 (True/1 = masked out), but got {atten_mask.dtype}.")
    shape = list(atten_mask.shape)
    ok = atten_mask.dim() in (2, 4) and shape[-2:] == [sq, skv]
    if ok and atten_mask.dim() == 4:
        ok = shape[0] in (1, b) and shape[1] in (1, n)
    check(ok, f"{fn}: atten_mask of shape {shape} does not match the attention shape [B, N, Sq, Skv] = "
          f"[{b}, {n}, {sq}, {skv}]; it should be BNSS, B1SS, 11SS or SS.")
    return atten_mask.bool()


def _masked(atten_mask, sparse_mode, pre, nxt, b, n, sq, skv, device, fn):
    """(boolean mask or None, is_causal) for one attention of these sizes."""
    if sparse_mode == 0:
        masked = _user_mask(atten_mask, b, n, sq, skv, fn) if atten_mask is not None else None
        if pre < sq + skv or nxt < sq + skv:  # a band narrower than the whole matrix
            band = _band_masked(sq, skv, device, 0, pre, nxt)
            masked = band if masked is None else masked | band
        return masked, False
    if sparse_mode == 1:  # allMask: the whole mask as given; without one nothing is masked, as the kernel does
        return (_user_mask(atten_mask, b, n, sq, skv, fn) if atten_mask is not None else None), False
    # Modes 2-4 take the compressed triu(ones(2048, 2048), 1) mask and build the pattern.
    check(atten_mask is None or list(atten_mask.shape) == [2048, 2048],
          f"{fn}: sparse_mode {sparse_mode} expects the compressed atten_mask of shape [2048, 2048] "
          f"(torch.triu(torch.ones(2048, 2048), diagonal=1).bool()), but got {list(atten_mask.shape)}.")
    if sparse_mode == 2:  # leftUpCausal
        return None, True
    shift = skv - sq
    if sparse_mode == 3:  # rightDownCausal
        if shift == 0:
            return None, True
        return _band_masked(sq, skv, device, shift, _MAX_TOKENS, 0), False
    return _band_masked(sq, skv, device, shift, pre, nxt), False  # 4: band, right-down aligned


def _training_masked(atten_mask, sparse_mode, pre, nxt, b, n, sq, skv, device, fn):
    """_masked for the training attention (npu_fusion_attention and its v2 / v3): without atten_mask
    sparse_mode, pre_tockens and next_tockens do not apply and every key is attended, as torch_npu
    documents it (MindSpeed's ring attention relies on it: its unmasked blocks pass the block length
    as pre/next tokens, which as a band would cut off the lower rows of a 2s x s block)."""
    if atten_mask is None:
        check(sparse_mode in (0, 1, 2, 3, 4), f"{fn}: sparse_mode {sparse_mode} is not supported by vNPU "
              "(supported: 0 default, 1 allMask, 2 leftUpCausal, 3 rightDownCausal, 4 band).")
        return None, False
    return _masked(atten_mask, sparse_mode, pre, nxt, b, n, sq, skv, device, fn)


def _additive(masked, pse, scale, dtype):
    """Mask and pse as one additive term of the softmax input (None if neither)."""
    bias = None
    if pse is not None:
        bias = (pse * scale).to(dtype)
    if masked is not None:
        neg = torch.zeros(masked.shape, dtype=dtype, device=masked.device).masked_fill_(masked, float("-inf"))
        bias = neg if bias is None else bias + neg
    return bias


# --- the computation -----------------------------------------------------------

def _pad_last(t, width):
    """t with zero columns up to `width`. ATen's flash kernel wants one head size for q, k and v;
    zero columns change neither the scores (q . k) nor the other output columns (p @ v), so the
    narrower side is padded and the results sliced back."""
    return torch.nn.functional.pad(t, (0, width - t.shape[-1])) if t.shape[-1] < width else t


def _scores(q, k, bias, is_causal, scale):
    """The float32 softmax input of BNSD q / k: scale * q k^T + bias, causal rows masked."""
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if bias is not None:
        scores = scores + bias.float()
    if is_causal:
        causal = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).triu_(1)
        scores = scores.masked_fill(causal, float("-inf"))
    return scores


def _keep(shape, seed, keep_prob, device):
    """The dropout keep flags of an attention with `seed`: the forward draws them, the gradients redraw them."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return torch.rand(shape, generator=gen, device=device) < keep_prob


def _attend(q, k, v, bias, is_causal, scale, keep_prob, seed):
    """(out, lse) of one BNSD attention."""
    if keep_prob >= 1.0:
        if bias is not None and bias.dim() == 2:
            bias = bias.unsqueeze(0).unsqueeze(0)
        width = max(q.shape[-1], v.shape[-1])
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            _pad_last(q, width), _pad_last(k, width), _pad_last(v, width), 0.0, is_causal, attn_mask=bias,
            scale=scale)
        return out[..., :v.shape[-1]], lse
    # Dropout: the reference formula, with a mask redrawn from `seed`.
    scores = _scores(q, k, bias, is_causal, scale)
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse.unsqueeze(-1))
    probs = probs * _keep(probs.shape, seed, keep_prob, q.device) / keep_prob
    return torch.matmul(probs.to(v.dtype), v), lse


def _stats(lse, layout, softmax_layout=""):
    """softmax_max / softmax_sum from the log-sum-exp (see the module docstring).

    For TND the kernel's statistics have shape (T, N, 8); with the default
    softmax_layout their memory holds them N-major (N, T, 8 in order), with
    softmax_layout "TND" token-major, which is what the shape says."""
    if layout == "TND":  # lse is (N, T)
        n, t = lse.shape
        if softmax_layout == "TND":
            lse = lse.transpose(0, 1)
        stats = lse.float().unsqueeze(-1).expand(*lse.shape, _STAT_REPEAT).contiguous().view(t, n, _STAT_REPEAT)
        return stats, torch.ones_like(stats)
    lse = lse.float().unsqueeze(-1).expand(*lse.shape, _STAT_REPEAT).contiguous()
    return lse, torch.ones_like(lse)


def _check_softmax_layout(fn, softmax_layout, layout):
    check(softmax_layout in ("", "TND"), f"{fn}: softmax_layout should be '' or 'TND', got '{softmax_layout}'.")
    check(softmax_layout == "" or layout == "TND",
          f"{fn}: softmax_layout='TND' is only supported with input_layout 'TND', got '{layout}'.")


def _check_newer_arguments(fn, input_layout, softmax_layout, sink, dropout_mask=None):
    _check_softmax_layout(fn, softmax_layout, input_layout)
    check(sink is None, f"{fn}: sink (a per-head softmax sink) is not supported on vNPU; pass None.")
    check(dropout_mask is None, f"{fn}: an external dropout_mask is not supported on vNPU; pass None and let "
          "seed and offset choose the mask.")


def _cumulative(lengths, total, arg, fn):
    check(lengths is not None, f"{fn}: input_layout 'TND' needs {arg} (cumulative sequence lengths).")
    lengths = [int(x) for x in lengths]
    check(all(b > a for a, b in zip([0] + lengths, lengths)) and lengths and lengths[-1] == total,
          f"{fn}: {arg} should be increasing cumulative lengths ending at the token count {total}, "
          f"but got {lengths}.")
    return lengths


def _check_arguments(fn, query, key, value, input_layout, padding_mask, keep_prob, sparse_mode, prefix):
    """What npu_fusion_attention and its gradient check alike."""
    _check_layout(fn, input_layout)
    _check_inputs(fn, query, key, value)
    check(padding_mask is None, f"{fn}: padding_mask is reserved and not supported; pass None.")
    check(0.0 < keep_prob <= 1.0, f"{fn}: keep_prob should be in (0, 1], but got {keep_prob}.")
    check(sparse_mode in (0, 1, 2, 3, 4), f"{fn}: sparse_mode {sparse_mode} is not supported by vNPU "
          "(supported: 0 default, 1 allMask, 2 leftUpCausal, 3 rightDownCausal, 4 band).")
    check(prefix is None or sparse_mode in (5, 6), f"{fn}: prefix is only used with sparse_mode 5 or 6.")


def _tnd_sequences(fn, query, key, value, pse, atten_mask, sparse_mode, actual_seq_qlen, actual_seq_kvlen):
    """The ((q0, q1), (k0, k1)) token ranges of input_layout TND's sequences, checked."""
    check(key.dim() == 3 and value.dim() == 3, f"{fn}: key and value should be 3-dimensional (T, N, D) "
          f"for input_layout 'TND', but got {list(key.shape)} and {list(value.shape)}.")
    check(pse is None, f"{fn}: pse is not supported with input_layout 'TND' by vNPU.")
    check(atten_mask is None or sparse_mode != 0 or atten_mask.dim() == 2,
          f"{fn}: with input_layout 'TND' atten_mask should be the compressed [2048, 2048] mask.")
    qlen = _cumulative(actual_seq_qlen, query.shape[0], "actual_seq_qlen", fn)
    kvlen = _cumulative(actual_seq_kvlen, key.shape[0], "actual_seq_kvlen", fn)
    check(len(qlen) == len(kvlen), f"{fn}: actual_seq_qlen has {len(qlen)} sequences but "
          f"actual_seq_kvlen has {len(kvlen)}.")
    return list(zip(zip([0] + qlen, qlen), zip([0] + kvlen, kvlen)))


def _sequence_mask(fn, atten_mask, sparse_mode, sq, skv):
    """One TND sequence's mask: in sparse modes 0 and 1 the top-left [Sq, Skv] of the [maxSq, maxSkv]
    atten_mask (the compressed mask of modes 2-4 serves every sequence as it is)."""
    if atten_mask is None or sparse_mode not in (0, 1):
        return atten_mask
    check(atten_mask.shape[0] >= sq and atten_mask.shape[1] >= skv, f"{fn}: atten_mask of shape "
          f"{list(atten_mask.shape)} is smaller than a sequence's [Sq, Skv] = [{sq}, {skv}]; with "
          "input_layout 'TND' it should be [maxSq, maxSkv].")
    return atten_mask[:sq, :skv]


def _tnd_bnsd(t, lo, hi):
    """Tokens lo:hi of a (T, N, D) tensor as a (1, N, S, D) view."""
    return t[lo:hi].transpose(0, 1).unsqueeze(0)


def _fusion_attention(query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, scale, keep_prob,
                      pre_tockens, next_tockens, prefix, actual_seq_qlen, actual_seq_kvlen, sparse_mode, seed,
                      fn="npu_fusion_attention"):
    """(out in input_layout, lse) -- lse as (B, N, Sq), or (N, T) for TND."""
    _check_arguments(fn, query, key, value, input_layout, padding_mask, keep_prob, sparse_mode, prefix)
    head_dim = _head_dim(query, input_layout, head_num, fn)

    if input_layout == "TND":
        outs, lses = [], []
        for (q0, q1), (k0, k1) in _tnd_sequences(fn, query, key, value, pse, atten_mask, sparse_mode,
                                                 actual_seq_qlen, actual_seq_kvlen):
            q = _tnd_bnsd(query, q0, q1)
            k, v = _expand_kv(_tnd_bnsd(key, k0, k1), _tnd_bnsd(value, k0, k1), head_num, fn)
            mask = _sequence_mask(fn, atten_mask, sparse_mode, q1 - q0, k1 - k0)
            masked, causal = _training_masked(mask, sparse_mode, pre_tockens, next_tockens, 1, head_num, q1 - q0,
                                              k1 - k0, query.device, fn)
            out, lse = _attend(q, k, v, _additive(masked, None, scale, query.dtype), causal, scale, keep_prob,
                               seed + len(outs))
            outs.append(out[0].transpose(0, 1))
            lses.append(lse[0])
        return torch.cat(outs, 0), torch.cat(lses, 1)

    q = _to_bnsd(query, input_layout, head_dim, "query", fn)
    k = _to_bnsd(key, input_layout, head_dim, "key", fn)
    v = _to_bnsd(value, input_layout, _value_head_dim(key, value, input_layout, head_dim, fn), "value", fn)
    check(k.shape[0] == q.shape[0] and v.shape[0] == q.shape[0] and k.shape[2] == v.shape[2],
          f"{fn}: query {list(query.shape)}, key {list(key.shape)} and value {list(value.shape)} do not "
          f"agree on the batch size and key/value sequence length for input_layout '{input_layout}'.")
    check(k.shape[3] == head_dim, f"{fn}: key's head dimension {k.shape[3]} differs from query's {head_dim}.")
    k, v = _expand_kv(k, v, q.shape[1], fn)
    b, n, sq, skv = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    if pse is not None:
        check(pse.dim() in (2, 4) and list(pse.shape[-2:]) == [sq, skv],
              f"{fn}: pse of shape {list(pse.shape)} does not broadcast to [B, N, Sq, Skv] = [{b}, {n}, {sq}, {skv}].")
    masked, causal = _training_masked(atten_mask, sparse_mode, pre_tockens, next_tockens, b, n, sq, skv,
                                      query.device, fn)
    if causal and pse is not None:  # pse needs the mask as a tensor
        masked, causal = _band_masked(sq, skv, query.device, 0, _MAX_TOKENS, 0), False
    out, lse = _attend(q, k, v, _additive(masked, pse, scale, query.dtype), causal, scale, keep_prob, seed)
    return _from_bnsd(out, input_layout), lse


def _draw_seed(device, keep_prob, seed=0, offset=0):
    """The seed of the dropout mask: the caller's (seed, offset) when a seed is given, else a new draw."""
    if keep_prob >= 1.0:
        return 0
    if seed:
        return (seed * 1000003 + offset) % (2**63 - 1) if offset else seed
    return int(torch.randint(0, 2**31 - 1, (1,), device=device).item())


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                         scale=1.0, keep_prob=1.0, pre_tockens=_MAX_TOKENS, next_tockens=_MAX_TOKENS,
                         inner_precise=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False, softmax_layout="", sink=None, dropout_mask=None, seed=0,
                         offset=0):
    _check_newer_arguments("npu_fusion_attention", input_layout, softmax_layout, sink, dropout_mask)
    mask_seed = _draw_seed(query.device, keep_prob, seed, offset)
    out, lse = _fusion_attention(query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, scale,
                                 keep_prob, pre_tockens, next_tockens, prefix, actual_seq_qlen, actual_seq_kvlen,
                                 sparse_mode, mask_seed)
    softmax_max, softmax_sum = _stats(lse, input_layout, softmax_layout)
    softmax_out = query.new_empty((0,))
    numels = _dropout_numels(key, input_layout, head_num, lse, actual_seq_qlen, actual_seq_kvlen) \
        if keep_prob < 1.0 else 0
    return out, softmax_max, softmax_sum, softmax_out, mask_seed, 0, numels


def _dropout_numels(key, layout, head_num, lse, qlen, kvlen):
    """How many dropout-mask elements the attention drew (B * N * Sq * Skv, summed over TND's sequences)."""
    if layout == "TND":
        q_sizes = [b - a for a, b in zip([0] + list(qlen), qlen)]
        kv_sizes = [b - a for a, b in zip([0] + list(kvlen), kvlen)]
        return head_num * sum(q * k for q, k in zip(q_sizes, kv_sizes))
    return lse.numel() * key.shape[{"BSH": 1, "SBH": 0, "BSND": 1, "BNSD": 2}[layout]]


def npu_fusion_attention_grad(query, key, value, dy, head_num, input_layout, pse=None, padding_mask=None,
                              atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None,
                              attention_in=None, scale_value=1.0, keep_prob=1.0, pre_tockens=_MAX_TOKENS,
                              next_tockens=_MAX_TOKENS, inner_precise=0, seed=0, offset=0, numels=0, prefix=None,
                              actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True,
                              sync=False, softmax_layout="", sink=None):
    """(dq, dk, dv, dpse). Given the forward's statistics and output (softmax_max, softmax_sum,
    attention_in), from those, as the kernel does; otherwise by recomputing the forward (the dropout
    mask from `seed`) and differentiating it."""
    fn = "npu_fusion_attention_grad"
    _check_newer_arguments(fn, input_layout, softmax_layout, sink)
    if softmax_max is not None and softmax_sum is not None and attention_in is not None:
        return _grad_from_statistics(fn, query, key, value, dy, head_num, input_layout, pse, padding_mask, atten_mask,
                                     softmax_max, softmax_sum, attention_in, scale_value, keep_prob, pre_tockens,
                                     next_tockens, prefix, actual_seq_qlen, actual_seq_kvlen, sparse_mode, seed,
                                     softmax_layout)
    with torch.enable_grad():
        inputs = [t.detach().requires_grad_() for t in (query, key, value)]
        pse_in = pse.detach().requires_grad_() if pse is not None else None
        out, _ = _fusion_attention(*inputs, head_num, input_layout, pse_in, padding_mask, atten_mask, scale_value,
                                   keep_prob, pre_tockens, next_tockens, prefix, actual_seq_qlen, actual_seq_kvlen,
                                   sparse_mode, seed, fn=fn)
        check(dy.shape == out.shape, f"{fn}: dy of shape {list(dy.shape)} should have the attention output's "
              f"shape {list(out.shape)} (query's, with value's head dimension).")
        wrt = inputs + ([pse_in] if pse_in is not None else [])
        grads = torch.autograd.grad(out, wrt, dy, allow_unused=True)
    dq, dk, dv = (g if g is not None else torch.zeros_like(t) for g, t in zip(grads[:3], (query, key, value)))
    dpse = grads[3] if pse is not None and grads[3] is not None else query.new_empty((0,))
    return dq, dk, dv, dpse


# --- the gradient from the forward's statistics -------------------------------------
#
# Note [Attention gradients from given statistics]: the kernel's backward takes the
# row statistics (softmax_max / softmax_sum) and the output (attention_in) as given:
# P = exp(scale * q k^T + bias - lse) and D = rowsum(dy * out). Ring attention relies
# on it: each block's gradient is computed with the statistics and output of the whole
# row (all blocks merged), which recomputing the block's own forward would not give.

def _block_grads(q, k, v, out, dy, lse, bias, causal, scale, keep_prob, seed, explicit=False):
    """(dq, dk, dv, dscores or None) of one BNSD attention (kv heads expanded) from its
    logsumexp `lse` (B, N, Sq) and output `out`, in float32; `explicit` forms the scores
    (for dscores) even without dropout."""
    q, k, v, out, dy = (t.float() for t in (q, k, v, out, dy))
    lse = lse.float().contiguous()
    if keep_prob >= 1.0 and not explicit:
        d, dv_ = q.shape[-1], v.shape[-1]
        width = max(d, dv_)
        if bias is not None and bias.dim() == 2:
            bias = bias.unsqueeze(0).unsqueeze(0)
        gq, gk, gv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            *(_pad_last(t, width) for t in (dy, q, k, v, out)), lse, 0.0, causal,
            attn_mask=None if bias is None else bias.float(), scale=scale)
        return gq[..., :d], gk[..., :d], gv[..., :dv_], None
    scores = _scores(q, k, bias, causal, scale)
    probs = torch.exp(scores - lse.unsqueeze(-1)).nan_to_num(0.0)  # a fully masked row: lse -inf, P 0
    dprobs = torch.matmul(dy, v.transpose(-1, -2))
    dropped = probs
    if keep_prob < 1.0:  # the forward's mask, redrawn from its seed (_attend)
        keep = _keep(probs.shape, seed, keep_prob, q.device)
        dropped = probs * keep / keep_prob
        dprobs = dprobs * keep / keep_prob
    dscores = probs * (dprobs - (dy * out).sum(-1, keepdim=True))
    return (torch.matmul(dscores, k) * scale, torch.matmul(dscores.transpose(-1, -2), q) * scale,
            torch.matmul(dropped.transpose(-1, -2), dy), dscores)


def _fold_kv(grad, kv_heads):
    """Sums a gradient over the query heads that share each key/value head (GQA)."""
    b, n, s, d = grad.shape
    return grad if n == kv_heads else grad.view(b, kv_heads, n // kv_heads, s, d).sum(2)


def _lse_of(softmax_max, softmax_sum, layout, softmax_layout, head_num, tokens):
    """max + log(sum): (B, N, Sq), or (N, T) for TND (see _stats for its storage)."""
    if layout == "TND":
        if softmax_layout == "TND":
            m, s = (x[..., 0].transpose(0, 1) for x in (softmax_max, softmax_sum))
        else:
            m, s = (x.contiguous().view(head_num, tokens, -1)[..., 0] for x in (softmax_max, softmax_sum))
        return m.float() + torch.log(s.float())
    return softmax_max[..., 0].float() + torch.log(softmax_sum[..., 0].float())


def _grad_from_statistics(fn, query, key, value, dy, head_num, layout, pse, padding_mask, atten_mask, softmax_max,
                          softmax_sum, attention_in, scale, keep_prob, pre, nxt, prefix, qlen, kvlen, sparse_mode,
                          seed, softmax_layout):
    """npu_fusion_attention_grad from the forward's statistics (Note [Attention gradients from given statistics])."""
    _check_arguments(fn, query, key, value, layout, padding_mask, keep_prob, sparse_mode, prefix)
    head_dim = _head_dim(query, layout, head_num, fn)
    check(dy.shape == attention_in.shape, f"{fn}: dy of shape {list(dy.shape)} should have attention_in's shape "
          f"{list(attention_in.shape)}.")
    lse = _lse_of(softmax_max, softmax_sum, layout, softmax_layout, head_num, query.shape[0])
    if layout == "TND":
        dq, dk, dv = (torch.zeros(t.shape, dtype=torch.float32, device=t.device) for t in (query, key, value))
        sequences = _tnd_sequences(fn, query, key, value, pse, atten_mask, sparse_mode, qlen, kvlen)
        for index, ((q0, q1), (k0, k1)) in enumerate(sequences):
            kv_heads = key.shape[1]
            k, v = _expand_kv(_tnd_bnsd(key, k0, k1), _tnd_bnsd(value, k0, k1), head_num, fn)
            mask = _sequence_mask(fn, atten_mask, sparse_mode, q1 - q0, k1 - k0)
            masked, causal = _training_masked(mask, sparse_mode, pre, nxt, 1, head_num, q1 - q0, k1 - k0,
                                              query.device, fn)
            gq, gk, gv, _ = _block_grads(_tnd_bnsd(query, q0, q1), k, v, _tnd_bnsd(attention_in, q0, q1),
                                         _tnd_bnsd(dy, q0, q1), lse[:, q0:q1].unsqueeze(0),
                                         _additive(masked, None, scale, torch.float32), causal, scale, keep_prob,
                                         seed + index)
            dq[q0:q1] = gq[0].transpose(0, 1)
            dk[k0:k1] += _fold_kv(gk, kv_heads)[0].transpose(0, 1)
            dv[k0:k1] += _fold_kv(gv, kv_heads)[0].transpose(0, 1)
        return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype), query.new_empty((0,))
    q = _to_bnsd(query, layout, head_dim, "query", fn)
    k = _to_bnsd(key, layout, head_dim, "key", fn)
    value_dim = _value_head_dim(key, value, layout, head_dim, fn)
    v = _to_bnsd(value, layout, value_dim, "value", fn)
    out = _to_bnsd(attention_in, layout, value_dim, "attention_in", fn)
    grad = _to_bnsd(dy, layout, value_dim, "dy", fn)
    kv_heads = k.shape[1]
    k, v = _expand_kv(k, v, q.shape[1], fn)
    b, n, sq, skv = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    check(list(lse.shape) == [b, n, sq], f"{fn}: softmax_max / softmax_sum of shape {list(softmax_max.shape)} "
          f"should be [B, N, Sq, 8] = [{b}, {n}, {sq}, 8].")
    if pse is not None:
        check(pse.dim() in (2, 4) and list(pse.shape[-2:]) in ([sq, skv], [1, skv]),
              f"{fn}: pse of shape {list(pse.shape)} does not broadcast to [B, N, Sq, Skv] = [{b}, {n}, {sq}, {skv}].")
    masked, causal = _training_masked(atten_mask, sparse_mode, pre, nxt, b, n, sq, skv, query.device, fn)
    if causal and pse is not None:
        masked, causal = _band_masked(sq, skv, query.device, 0, _MAX_TOKENS, 0), False
    bias = _additive(masked, None if pse is None else pse.float(), scale, torch.float32)
    gq, gk, gv, dscores = _block_grads(q, k, v, out, grad, lse, bias, causal, scale, keep_prob, seed,
                                       explicit=pse is not None)
    dpse = query.new_empty((0,))
    if pse is not None:  # scale * (q k^T + pse): the scores' gradient times scale, summed where pse broadcasts
        dpse = (dscores * scale).sum_to_size(pse.shape).to(pse.dtype)
    return (_from_bnsd(gq, layout).to(query.dtype), _from_bnsd(_fold_kv(gk, kv_heads), layout).to(key.dtype),
            _from_bnsd(_fold_kv(gv, kv_heads), layout).to(value.dtype), dpse)


define("npu_fusion_attention(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, "
       "Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., float keep_prob=1., "
       "int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, int[]? prefix=None, "
       "int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, "
       "bool sync=False, str softmax_layout=\"\", Tensor? sink=None, Tensor? dropout_mask=None, int seed=0, "
       "int offset=0) -> (Tensor, Tensor, Tensor, Tensor, int, int, int)", npu_fusion_attention)
define("npu_fusion_attention_grad(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, "
       "str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, "
       "Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, "
       "float scale_value=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, "
       "int inner_precise=0, int seed=0, int offset=0, int numels=0, int[]? prefix=None, "
       "int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, int sparse_mode=0, "
       "bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None) "
       "-> (Tensor, Tensor, Tensor, Tensor)", npu_fusion_attention_grad)


# --- inference attention -------------------------------------------------------

def _infer_attention(fn, query, key, value, num_heads, scale, input_layout, num_key_value_heads, atten_mask,
                     sparse_mode, pre_tokens, next_tokens, actual_seq_lengths=None, actual_seq_lengths_kv=None):
    """Inference attention without dropout: (out in input_layout, lse BNS)."""
    check(input_layout in ("BSH", "BSND", "BNSD"), f"{fn}: input_layout should be one of ['BSH', 'BSND', 'BNSD'], "
          f"but got '{input_layout}'.")
    _check_inputs(fn, query, key, value)
    head_dim = _head_dim(query, input_layout, num_heads, fn)
    q = _to_bnsd(query, input_layout, head_dim, "query", fn)
    k = _to_bnsd(key, input_layout, head_dim, "key", fn)
    v = _to_bnsd(value, input_layout, head_dim, "value", fn)
    if num_key_value_heads:
        check(k.shape[1] == num_key_value_heads, f"{fn}: num_key_value_heads {num_key_value_heads} does not match "
              f"key's head count {k.shape[1]}.")
    k, v = _expand_kv(k, v, q.shape[1], fn)
    b, n, sq, skv = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    masked = None
    if atten_mask is not None:
        mask = atten_mask
        if mask.dim() == 3:  # (B, Sq, Skv)
            mask = mask.unsqueeze(1)
        masked = _user_mask(mask, b, n, sq, skv, fn) if sparse_mode == 0 else None
    if sparse_mode == 0 and (pre_tokens < sq + skv or next_tokens < sq + skv):
        band = _band_masked(sq, skv, query.device, 0, pre_tokens, next_tokens)
        masked = band if masked is None else masked | band
    elif sparse_mode in (2, 3, 4):
        masked, causal = _masked(None, sparse_mode, pre_tokens, next_tokens, b, n, sq, skv, query.device, fn)
        if causal:
            masked = _band_masked(sq, skv, query.device, 0, _MAX_TOKENS, 0)
    lengths = actual_seq_lengths_kv
    if lengths is not None:  # per-batch valid key lengths: mask the rest
        check(len(lengths) in (1, b), f"{fn}: actual_seq_lengths_kv should have 1 or {b} entries, got {len(lengths)}.")
        valid = torch.tensor([int(x) for x in lengths], device=query.device).view(-1, 1, 1, 1)
        beyond = torch.arange(skv, device=query.device).view(1, 1, 1, skv) >= valid
        masked = beyond if masked is None else masked | beyond
    out, lse = _attend(q, k, v, _additive(masked, None, scale, query.dtype), False, scale, 1.0, 0)
    return _from_bnsd(out, input_layout), lse


def npu_prompt_flash_attention(query, key, value, padding_mask=None, atten_mask=None, pse_shift=None,
                               actual_seq_lengths=None, deq_scale1=None, quant_scale1=None, deq_scale2=None,
                               quant_scale2=None, quant_offset2=None, num_heads=1, scale_value=1.0,
                               pre_tokens=2147473647, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
                               actual_seq_lengths_kv=None, sparse_mode=0):
    fn = "npu_prompt_flash_attention"
    check(all(t is None for t in (deq_scale1, quant_scale1, deq_scale2, quant_scale2, quant_offset2)),
          f"{fn}: quantised attention (deq_scale*/quant_*) is not supported by vNPU.")
    check(pse_shift is None, f"{fn}: pse_shift is not supported by vNPU.")
    return _infer_attention(fn, query, key, value, num_heads, scale_value, input_layout, num_key_value_heads,
                            atten_mask, sparse_mode, pre_tokens, next_tokens, actual_seq_lengths,
                            actual_seq_lengths_kv)[0]


def _paged(key, value, block_table, block_size, batch, fn):
    """Gathers paged K/V caches ((blocks, block_size, H) + block_table (B, max_blocks)) into BSH."""
    check(block_size > 0, f"{fn}: block_size should be positive with block_table, but got {block_size}.")
    check(block_table.dim() == 2 and block_table.shape[0] == batch,
          f"{fn}: block_table should be (B, max_blocks) with B = {batch}, but got {list(block_table.shape)}.")
    idx = block_table.long().clamp_min(0)
    k = key.reshape(key.shape[0], block_size, -1)[idx].reshape(batch, -1, key.shape[-1] if key.dim() == 3 else
                                                                 key.shape[-1] * key.shape[-2])
    v = value.reshape(value.shape[0], block_size, -1)[idx].reshape(batch, k.shape[1], -1)
    return k, v


def npu_incre_flash_attention(query, key, value, padding_mask=None, pse_shift=None, atten_mask=None,
                              actual_seq_lengths=None, antiquant_scale=None, antiquant_offset=None,
                              block_table=None, dequant_scale1=None, quant_scale1=None, dequant_scale2=None,
                              quant_scale2=None, quant_offset2=None, kv_padding_size=None, num_heads=1,
                              scale_value=1.0, input_layout="BSH", num_key_value_heads=0, block_size=0,
                              inner_precise=1):
    fn = "npu_incre_flash_attention"
    check(all(t is None for t in (antiquant_scale, antiquant_offset, dequant_scale1, quant_scale1, dequant_scale2,
                                  quant_scale2, quant_offset2)),
          f"{fn}: quantised attention is not supported by vNPU.")
    check(pse_shift is None and kv_padding_size is None, f"{fn}: pse_shift and kv_padding_size are not supported "
          "by vNPU.")
    layout = input_layout
    if block_table is not None:
        check(layout == "BSH", f"{fn}: block_table (paged attention) needs input_layout 'BSH', got '{layout}'.")
        key, value = _paged(key, value, block_table, block_size, query.shape[0], fn)
    return _infer_attention(fn, query, key, value, num_heads, scale_value, layout, num_key_value_heads,
                            atten_mask, 0, _MAX_TOKENS, _MAX_TOKENS, None, actual_seq_lengths)[0]


def npu_fused_infer_attention_score(query, key, value, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
                                    actual_seq_lengths_kv=None, dequant_scale1=None, quant_scale1=None,
                                    dequant_scale2=None, quant_scale2=None, quant_offset2=None,
                                    antiquant_scale=None, antiquant_offset=None, key_antiquant_scale=None,
                                    key_antiquant_offset=None, value_antiquant_scale=None, value_antiquant_offset=None,
                                    block_table=None, query_padding_size=None, kv_padding_size=None,
                                    key_shared_prefix=None, value_shared_prefix=None, actual_shared_prefix_len=None,
                                    query_rope=None, key_rope=None, key_rope_antiquant_scale=None, num_heads=1,
                                    scale=1.0, pre_tokens=2147483647, next_tokens=2147483647, input_layout="BSH",
                                    num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0,
                                    antiquant_mode=0, key_antiquant_mode=0, value_antiquant_mode=0,
                                    softmax_lse_flag=False):
    fn = "npu_fused_infer_attention_score"
    check(all(t is None for t in (dequant_scale1, quant_scale1, dequant_scale2, quant_scale2, quant_offset2,
                                  antiquant_scale, antiquant_offset, key_antiquant_scale, key_antiquant_offset,
                                  value_antiquant_scale, value_antiquant_offset, key_rope_antiquant_scale)),
          f"{fn}: quantised attention is not supported by vNPU.")
    check(pse_shift is None and query_padding_size is None and kv_padding_size is None,
          f"{fn}: pse_shift and padding sizes are not supported by vNPU.")
    check(key_shared_prefix is None and value_shared_prefix is None and actual_shared_prefix_len is None,
          f"{fn}: shared prefixes (key_shared_prefix, value_shared_prefix) are not supported by vNPU.")
    check(query_rope is None and key_rope is None,
          f"{fn}: query_rope / key_rope (MLA's rope parts) are not supported by vNPU.")
    if block_table is not None:
        check(input_layout == "BSH", f"{fn}: block_table needs input_layout 'BSH', got '{input_layout}'.")
        key, value = _paged(key, value, block_table, block_size, query.shape[0], fn)
    out, lse = _infer_attention(fn, query, key, value, num_heads, scale, input_layout, num_key_value_heads,
                                atten_mask, sparse_mode, pre_tokens, next_tokens, actual_seq_lengths,
                                actual_seq_lengths_kv)
    # Without softmax_lse_flag the device computes no lse and returns a
    # one-element placeholder; zeros here, never uninitialised memory.
    lse = lse.float().unsqueeze(-1) if softmax_lse_flag else query.new_zeros((1,), dtype=torch.float32)
    return out, lse


def npu_fused_infer_attention_score_out(query, key, value, *args, workspace=None, attention_out, softmax_lse,
                                        **kwargs):
    """The .out overload: ``workspace`` (from the _get_max_workspace query)
    is accepted and unused (vNPU's kernels need none); the results are
    written into ``attention_out`` and ``softmax_lse``, resized as out=
    tensors are. Without softmax_lse_flag the kernel writes no lse: any
    ``softmax_lse`` is accepted and gets the placeholder's zeros in its own
    dtype."""
    out, lse = npu_fused_infer_attention_score(query, key, value, *args, **kwargs)
    if not kwargs.get("softmax_lse_flag", False):
        check(softmax_lse.device == lse.device, f"npu_fused_infer_attention_score.out: softmax_lse should be on "
                                                f"{lse.device}, got {softmax_lse.device}.")
        lse = lse.to(softmax_lse.dtype)
    for target, value_, name in ((attention_out, out, "attention_out"), (softmax_lse, lse, "softmax_lse")):
        check(target.dtype == value_.dtype, f"npu_fused_infer_attention_score.out: {name} should have dtype "
                                            f"{value_.dtype}, got {target.dtype}.")
        check(target.device == value_.device, f"npu_fused_infer_attention_score.out: {name} should be on "
                                              f"{value_.device}, got {target.device}.")
        if target.shape != value_.shape:
            target.resize_(value_.shape)
        target.copy_(value_)
    return attention_out, softmax_lse


def _npu_fused_infer_attention_score_get_max_workspace(query, key, value, *args, **kwargs):
    """The workspace the .out overload wants: vNPU's kernels need none, so an
    empty uint8 tensor on query's device."""
    return query.new_empty((0,), dtype=torch.uint8)


def _npu_fused_infer_attention_score_infer_output(query, value, input_layout="BSH", quant_scale2=None,
                                                  block_table=None, num_heads=1, num_key_value_heads=0,
                                                  softmax_lse_flag=False, query_rope=None):
    """Empty (attention_out, softmax_lse) of the shapes and dtypes
    npu_fused_infer_attention_score returns, from query, value and the layout
    (graph capture allocates the .out tensors with it); the v2 operator's
    shape rule, with v1's one-element lse placeholder without softmax_lse_flag."""
    from torch_npu.op_plugin.infer_attention import _npu_fused_infer_attention_score_v2_infer_output
    check(quant_scale2 is None, "_npu_fused_infer_attention_score_infer_output: quantised outputs (quant_scale2) "
                                "are not supported on vNPU.")
    out, lse = _npu_fused_infer_attention_score_v2_infer_output(
        query, value, input_layout=input_layout, block_table=block_table, num_query_heads=num_heads,
        num_key_value_heads=num_key_value_heads, return_softmax_lse=softmax_lse_flag, query_rope=query_rope)
    if not softmax_lse_flag:
        lse = query.new_zeros((1,), dtype=torch.float32)
    return out, lse


_FIA_ARGS = ("Tensor query, Tensor key, Tensor value, *, Tensor? pse_shift=None, Tensor? atten_mask=None, "
             "SymInt[]? actual_seq_lengths=None, SymInt[]? actual_seq_lengths_kv=None, Tensor? dequant_scale1=None, "
             "Tensor? quant_scale1=None, Tensor? dequant_scale2=None, Tensor? quant_scale2=None, "
             "Tensor? quant_offset2=None, Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, "
             "Tensor? key_antiquant_scale=None, Tensor? key_antiquant_offset=None, "
             "Tensor? value_antiquant_scale=None, Tensor? value_antiquant_offset=None, Tensor? block_table=None, "
             "Tensor? query_padding_size=None, Tensor? kv_padding_size=None, Tensor? key_shared_prefix=None, "
             "Tensor? value_shared_prefix=None, SymInt[]? actual_shared_prefix_len=None, Tensor? query_rope=None, "
             "Tensor? key_rope=None, Tensor? key_rope_antiquant_scale=None, int num_heads=1, float scale=1.0, "
             "int pre_tokens=2147483647, int next_tokens=2147483647, str input_layout=\"BSH\", "
             "int num_key_value_heads=0, int sparse_mode=0, int inner_precise=0, int block_size=0, "
             "int antiquant_mode=0, int key_antiquant_mode=0, int value_antiquant_mode=0, "
             "bool softmax_lse_flag=False")


define("npu_prompt_flash_attention(Tensor query, Tensor key, Tensor value, *, Tensor? padding_mask=None, "
       "Tensor? atten_mask=None, Tensor? pse_shift=None, int[]? actual_seq_lengths=None, Tensor? deq_scale1=None, "
       "Tensor? quant_scale1=None, Tensor? deq_scale2=None, Tensor? quant_scale2=None, Tensor? quant_offset2=None, "
       "int num_heads=1, float scale_value=1., int pre_tokens=2147473647, int next_tokens=0, "
       "str input_layout=\"BSH\", int num_key_value_heads=0, int[]? actual_seq_lengths_kv=None, "
       "int sparse_mode=0) -> Tensor", npu_prompt_flash_attention)
define("npu_incre_flash_attention(Tensor query, Tensor key, Tensor value, *, Tensor? padding_mask=None, "
       "Tensor? pse_shift=None, Tensor? atten_mask=None, int[]? actual_seq_lengths=None, "
       "Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, Tensor? block_table=None, "
       "Tensor? dequant_scale1=None, Tensor? quant_scale1=None, Tensor? dequant_scale2=None, "
       "Tensor? quant_scale2=None, Tensor? quant_offset2=None, Tensor? kv_padding_size=None, int num_heads=1, "
       "float scale_value=1., str input_layout=\"BSH\", int num_key_value_heads=0, int block_size=0, "
       "int inner_precise=1) -> Tensor", npu_incre_flash_attention)
define(f"npu_fused_infer_attention_score({_FIA_ARGS}) -> (Tensor, Tensor)", npu_fused_infer_attention_score)
define(f"npu_fused_infer_attention_score.out({_FIA_ARGS}, Tensor? workspace=None, Tensor(a!) attention_out, "
       "Tensor(b!) softmax_lse) -> (Tensor(a!), Tensor(b!))", npu_fused_infer_attention_score_out)
define(f"_npu_fused_infer_attention_score_get_max_workspace({_FIA_ARGS}) -> Tensor",
       _npu_fused_infer_attention_score_get_max_workspace)
define("_npu_fused_infer_attention_score_infer_output(Tensor query, Tensor value, *, str input_layout=\"BSH\", "
       "Tensor? quant_scale2=None, Tensor? block_table=None, int num_heads=1, int num_key_value_heads=0, "
       "bool softmax_lse_flag=False, Tensor? query_rope=None) -> (Tensor, Tensor)",
       _npu_fused_infer_attention_score_infer_output)


# --- masked softmax ------------------------------------------------------------

def npu_scaled_masked_softmax(x, mask, scale=1.0, fixed_triu_mask=False):
    """softmax(x * scale) with True in `mask` masked out (fixed_triu_mask: causal), in x's dtype."""
    fn = "npu_scaled_masked_softmax"
    scores = x.float() * scale
    if fixed_triu_mask:
        masked = torch.ones(x.shape[-2], x.shape[-1], dtype=torch.bool, device=x.device).triu_(1)
    else:
        check(mask.dtype in (torch.bool, torch.uint8), f"{fn}: mask should be bool or uint8, but got {mask.dtype}.")
        try:
            torch.broadcast_shapes(mask.shape, x.shape)
        except RuntimeError:
            check(False, f"{fn}: mask of shape {list(mask.shape)} does not broadcast to x of shape {list(x.shape)}.")
        masked = mask.bool()
    scores = scores.masked_fill(masked, -10000.0)  # the kernel's fill value: masked rows stay finite
    return torch.softmax(scores, dim=-1).to(x.dtype)


def npu_dropout_with_add_softmax(self, x1, alpha, prob, dim):
    """(mask, softmax(self * alpha + x1), dropout of it) -- mask as uint8, 1 = kept."""
    fn = "npu_dropout_with_add_softmax"
    check(0.0 <= prob < 1.0, f"{fn}: prob should be in [0, 1), but got {prob}.")
    soft = torch.softmax(self * alpha + x1, dim=dim)
    keep = torch.rand(soft.shape, device=soft.device) >= prob
    out = soft * keep / (1.0 - prob)
    return keep.to(torch.uint8), soft, out


# The schemas take Scalars; the compositions above take floats.
def _scaled_masked_softmax_op(x, mask, scale=1, fixed_triu_mask=False):
    return npu_scaled_masked_softmax(x, mask, float(scale), fixed_triu_mask)


def _dropout_with_add_softmax_op(self, x1, alpha, prob, dim):
    return npu_dropout_with_add_softmax(self, x1, float(alpha), prob, dim)


define("npu_scaled_masked_softmax(Tensor x, Tensor mask, Scalar scale=1, bool fixed_triu_mask=False) -> Tensor",
       _scaled_masked_softmax_op)
define("npu_dropout_with_add_softmax(Tensor self, Tensor x1, Scalar alpha, float prob, int dim) "
       "-> (Tensor, Tensor, Tensor)", _dropout_with_add_softmax_op)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
