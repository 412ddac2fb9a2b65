"""NNAL's ATB operators, ``torch.ops.atb.*`` (op-plugin's atb_ops.yaml), in plain PyTorch.

Real torch_npu loads them from ``libop_plugin_atb.so`` (backed by NNAL's libatb)
and re-exports most at the top level (``torch_npu._npu_paged_attention``); vNPU
defines every one with ``define_atb`` at import, with op-plugin's exact schema,
as a composition of ATen operators (so it runs on npu and cpu tensors).
``_register_atb_extensions()`` is kept for callers (vllm-ascend calls it at
start-up) and does nothing more.

Operators (29 packets, op-plugin's overloads):

- paged attention over a block KV cache: ``_npu_paged_attention`` (+
  ``_npu_paged_attention_get_workspace``), ``_npu_paged_attention_v2.out`` (+
  ``_npu_paged_attention_v2_get_workspace``; alibi mask), ``_npu_paged_attention_mla``
  (V = the first mla_vheadsize features of K), ``_npu_paged_attention_quant``
  (quant_type 0, 1 = int8 caches dequantised per channel, 3 = int8 q/k/v with
  online int8 softmax), ``_npu_paged_attention_splitfuse`` (+ ``_v2``, chunked
  prefill: several query tokens per sequence, per-token mask rows / compressed
  causal mask);
- cache writes and reads: ``_npu_reshape_and_cache``, ``_npu_reshape_and_cache_siso``,
  ``npu_paged_cache_load`` (+ ``.out``);
- self attention over packed sequences: ``_npu_flash_attention`` (additive mask),
  ``_npu_flash_attention_v2.out`` (mask types 0/1/2/4/5/6, alibi slopes),
  ``_npu_flash_attention_v3`` (compressed causal), ``_npu_flash_attention_unpad`` (+ ``_v2``;
  no mask), and with a paged prefix: ``_npu_flash_attention_prefix_v2.out``,
  ``_npu_flash_attention_qlens``, ``npu_self_attention_prefix_encoder`` (+ ``.out``);
- MLA: ``npu_multi_head_latent_attention`` (+ ``.out``, ``.lse``, ``.lse_out``),
  ``_npu_multi_head_latent_attention_get_workspace.lse``, ``npu_ring_mla`` (+ ``.out``),
  ``npu_mla_preprocess`` (+ ``.out``);
- others: ``_npu_rotary_embedding`` (vLLM's rotary, in place), ``_npu_quantize_per_tensor``,
  ``_npu_quant_rms_norm``, ``_npu_group_topk`` (in place), ``npu_fused_add_topk_div``
  (+ ``.out``), ``_npu_matmul_add_fp32`` (C += x^T weight in float32).

Emulation choices (docs/fused_ops.md has the per-op list):

- Attention is computed in float32 (int8 products in float64, exactly) and
  rounded once to the output dtype; the ATB kernels' tiling, float16
  intermediates and online-softmax block order are not reproduced.
- ``scale_value`` multiplies Q.K^T; GQA query head h reads kv head
  h // (num_heads / num_kv_heads). A sequence with no keys (context length 0)
  gives zeros.
- KV caches may be ND ([blocks, block_size, kv_heads, head_dim], or
  [blocks, block_size, kv_heads * head_dim]) or NZ, the layout Atlas 300I
  (310P) and the int8 MLA caches use: [blocks, kv_heads * head_dim / c0,
  block_size, c0] with c0 = 16 (32 for int8). A cache carrying the NZ format
  (npu_format_cast(..., 29)) is NZ; otherwise the shape decides, ND first. NZ
  masks ([1, cols / 16, rows, 16]) are read back as [rows, cols].
- "Compressed" masks (mask types NORM_COMPRESS, the splitfuse_v2 / v3 /
  qlens / prefix masks) are causal masks by contract: vNPU checks their
  shape and masks future positions itself; the alibi-compressed types add
  slope[h] * (j - i) (sqrt: slope * sign * sqrt|j - i|; left align: slope * j).
  Queries of a prefixed sequence sit at the end: query i of a sequence of q
  tokens and k keys is position k - q + i.
- Quantisation rounds half to even and saturates to int8; a quantisation
  ``scale`` is the step (x / scale + offset), as op-plugin's
  _npu_quantize_per_tensor reference reads it. int64 dequantisation scales
  carry float32 bits (npu_trans_quant_param).
- Workspaces (``*_get_workspace``) are uint8 tensors of B * heads * head_dim_v * 4
  bytes (the float32 accumulator of one call; it does not depend on the context
  lengths, so one workspace serves every later call of the same shapes). The
  ops accept it and do not need it.
- Checks that read the host (block ids in range, lengths within the block
  table) are skipped while tracing with FakeTensors and during NPU-graph capture.
"""

import torch

from torch_npu.op_plugin._library import check, define_atb
from torch_npu.op_plugin.quant import _scale_value

_HALVES = (torch.float16, torch.bfloat16)
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_INTS = (torch.int32, torch.int64)
_NZ = 29  # ACL_FORMAT_FRACTAL_NZ
_ACL_DTYPES = {1: torch.float16, 27: torch.bfloat16}  # aclDataType values outdata_type takes


# --- helpers -------------------------------------------------------------------------------------

def _unsupported(fn, what, reason):
    raise RuntimeError(f"{fn}: {what} is not supported on vNPU: {reason}")


def _symbolic(t):
    """True for FakeTensors (and functional wrappers of them): their values cannot be read."""
    if t is None:
        return False
    try:
        from torch._subclasses.fake_tensor import is_fake
        return bool(is_fake(t)) or t.device.type == "meta"
    except Exception:  # pragma: no cover - defensive: unknown tensor subclass
        return True


def _host_checks(*tensors):
    """Whether checks that read tensor values may run: not under FakeTensors, not
    while an NPU graph is being captured (reading would synchronise)."""
    if any(_symbolic(t) for t in tensors if isinstance(t, torch.Tensor)):
        return False
    try:
        if any(isinstance(t, torch.Tensor) and t.device.type == "npu" for t in tensors):
            return not torch.npu.is_current_stream_capturing()
    except Exception:
        return False
    return True


def _nz_tagged(t):
    if not isinstance(t, torch.Tensor) or t.device.type != "npu" or _symbolic(t):
        return False
    try:
        return int(torch.ops.npu.get_npu_format(t)) == _NZ
    except Exception:
        return False


def _ints(fn, name, values):
    """A 1-D int list / tuple / integer tensor as Python ints (reads the host)."""
    if isinstance(values, torch.Tensor):
        check(not values.is_floating_point() and values.dim() <= 1,
              f"{fn}: {name} should be a 1-D integer tensor, got {values.dtype} of shape {list(values.shape)}.")
        return [int(v) for v in values.reshape(-1).tolist()]
    return [int(v) for v in values]


def _check_dtype(fn, name, t, dtypes):
    names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
    check(t.dtype in dtypes, f"{fn}: {name} should be {names}, got {t.dtype}.")


def _check_same_dtype(fn, name, t, ref, ref_name):
    check(t.dtype == ref.dtype, f"{fn}: {name} should have {ref_name}'s dtype {ref.dtype}, got {t.dtype}.")


def _heads(fn, num_heads, num_kv_heads, q_heads=None):
    check(num_heads > 0, f"{fn}: num_heads should be positive, got {num_heads}.")
    check(num_kv_heads > 0 and num_heads % num_kv_heads == 0,
          f"{fn}: num_kv_heads ({num_kv_heads}) should be positive and divide num_heads ({num_heads}).")
    if q_heads is not None:
        check(q_heads == num_heads, f"{fn}: query has {q_heads} heads but num_heads is {num_heads}.")


def _as_heads(fn, name, t, heads):
    """[T, heads, d] or [T, heads * d] as [T, heads, d]."""
    check(t.dim() in (2, 3), f"{fn}: {name} should be [num_tokens, heads, head_dim] or [num_tokens, heads * head_dim], "
                             f"got shape {list(t.shape)}.")
    if t.dim() == 3:
        check(t.shape[1] == heads, f"{fn}: {name} should have {heads} heads, got shape {list(t.shape)}.")
        return t
    check(t.shape[1] % heads == 0, f"{fn}: {name}'s hidden size {t.shape[1]} is not a multiple of {heads} heads.")
    return t.view(t.shape[0], heads, t.shape[1] // heads)


def _nz_to_nd(t):
    """An NZ matrix [..., cols / c0, rows, c0] as the ND [..., rows, cols] it holds."""
    return t.transpose(-3, -2).reshape(*t.shape[:-3], t.shape[-2], t.shape[-3] * t.shape[-1])


def _mask_nd(mask):
    """A mask given in NZ ([1, cols / 16, rows, 16], with the NZ format or not) as ND [1, rows, cols]."""
    if mask.dim() == 4 and mask.shape[-1] == 16 and (_nz_tagged(mask) or (
            mask.shape[0] == 1 and mask.shape[1] * 16 == mask.shape[2])):
        return _nz_to_nd(mask)
    return mask


# --- KV caches -------------------------------------------------------------------------------------

def _layout(fn, name, cache, kv_heads, head_dim=None):
    """(kind, block_size, head_dim) of a KV cache: kind "nd" [blocks, bs, kv_heads, d], "nd3"
    [blocks, bs, kv_heads * d] or "nz" [blocks, kv_heads * d / c0, bs, c0]."""
    check(cache.dim() in (3, 4), f"{fn}: {name} should be 3-D or 4-D, got shape {list(cache.shape)}.")
    shape = list(cache.shape)
    tagged = _nz_tagged(cache)
    if not tagged:
        if cache.dim() == 4 and shape[2] == kv_heads and (head_dim is None or shape[3] == head_dim):
            return "nd", shape[1], shape[3]
        if cache.dim() == 3 and shape[2] % kv_heads == 0 and (head_dim is None or shape[2] == kv_heads * head_dim):
            return "nd3", shape[1], shape[2] // kv_heads
    if cache.dim() == 4 and shape[3] in (16, 32):
        width = shape[1] * shape[3]
        if width % kv_heads == 0 and (head_dim is None or width == kv_heads * head_dim):
            return "nz", shape[2], width // kv_heads
    d = "head_dim" if head_dim is None else head_dim
    raise RuntimeError(f"{fn}: {name} of shape {shape} does not hold {kv_heads} kv heads of size {d}: expected "
                       f"[num_blocks, block_size, {kv_heads}, {d}] (ND) or [num_blocks, {kv_heads} * {d} / 16, "
                       f"block_size, 16] (NZ).")


def _gather(cache, layout, kv_heads, ids):
    """The blocks ``ids`` (any shape) of a cache as [*ids.shape, block_size, kv_heads, head_dim]."""
    kind, bs, d = layout
    blocks = cache[ids.to(cache.device)]
    if kind == "nd":
        return blocks
    if kind == "nz":
        blocks = blocks.transpose(-3, -2)
    return blocks.reshape(*ids.shape, bs, kv_heads, d)


def _sequence_kv(cache, layout, kv_heads, table_row, length):
    """The first ``length`` tokens of one sequence: [length, kv_heads, d]."""
    bs = layout[1]
    n = -(-length // bs)
    rows = _gather(cache, layout, kv_heads, table_row[:n].long())
    return rows.reshape(n * bs, kv_heads, layout[2])[:length]


def _check_tables(fn, block_table, lengths, block_size, num_blocks, starts=None):
    """Lengths fit the block table and the blocks they use exist (reads the host)."""
    if not _host_checks(block_table, lengths if isinstance(lengths, torch.Tensor) else None):
        return
    lens = _ints(fn, "context_lens", lengths) if not isinstance(lengths, list) else lengths
    table = block_table.cpu().long()
    for b, length in enumerate(lens):
        check(length >= 0, f"{fn}: context_lens[{b}] is negative ({length}).")
        first = 0 if starts is None else starts[b] // block_size
        used = -(-length // block_size)
        check(first + used <= table.shape[1],
              f"{fn}: context_lens[{b}] = {length} needs {used} blocks from block {first} but block_table has "
              f"{table.shape[1]} columns.")
        ids = table[b, first:first + used]
        if ids.numel():
            lo, hi = int(ids.min()), int(ids.max())
            check(lo >= 0 and hi < num_blocks,
                  f"{fn}: block_table[{b}] holds block id {hi if hi >= num_blocks else lo}, out of range for a "
                  f"cache of {num_blocks} blocks.")


def _check_block_table(fn, block_table, batch):
    check(block_table.dim() == 2 and block_table.dtype in _INTS,
          f"{fn}: block_table should be a 2-D int32 tensor, got {block_table.dtype} of shape "
          f"{list(block_table.shape)}.")
    check(block_table.shape[0] >= batch,
          f"{fn}: block_table has {block_table.shape[0]} rows for a batch of {batch} sequences.")


# --- attention core --------------------------------------------------------------------------------

def _scores(q, k):
    """q [N, H, S, D] . k [N, Hk, Sk, D] -> [N, H, S, Sk], query head h on kv head h // (H / Hk)
    (the heads sharing a kv head are stacked as rows of one matmul)."""
    n, h, s, d = q.shape
    hk = k.shape[1]
    out = torch.matmul(q.reshape(n, hk, (h // hk) * s, d), k.transpose(-1, -2))
    return out.reshape(n, h, s, k.shape[2])


def _weighted(p, v):
    """p [N, H, S, Sk] . v [N, Hk, Sk, Dv] -> [N, H, S, Dv]."""
    n, h, s, sk = p.shape
    hk = v.shape[1]
    return torch.matmul(p.reshape(n, hk, (h // hk) * s, sk), v).reshape(n, h, s, v.shape[-1])


def _attend(q, k, v, scale, bias=None, keep=None):
    """softmax(q.k^T * scale + bias) . v in float32 over the keys ``keep`` allows.

    q [N, H, S, D], k [N, Hk, Sk, D], v [N, Hk, Sk, Dv]; bias (additive) and keep
    (bool) broadcast to [N, H, S, Sk]. Returns (out [N, H, S, Dv], lse [N, H, S]); a
    row with no key gives zeros and lse -inf. Processed in query chunks."""
    q, k, v = q.float(), k.float(), v.float()
    n, h, s, _ = q.shape
    sk = k.shape[2]
    step = max(1, (1 << 24) // max(1, n * h * sk))
    outs, lses = [], []
    for i in range(0, max(s, 1), step):
        rows = slice(i, min(s, i + step))
        sc = _scores(q[:, :, rows], k) * scale
        if bias is not None:
            b = bias if bias.shape[-2] == 1 else bias[..., rows, :]
            sc = sc + b.float()
        if keep is not None:
            kp = keep if keep.shape[-2] == 1 else keep[..., rows, :]
            sc = sc.masked_fill(~kp, float("-inf"))
        m = sc.amax(dim=-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        e = torch.exp(sc - m)
        total = e.sum(dim=-1, keepdim=True)
        o = _weighted(e, v) / torch.where(total > 0, total, torch.ones_like(total))
        outs.append(o)
        lses.append((m + torch.log(total)).squeeze(-1))
    if s == 0:
        return q.new_zeros(n, h, 0, v.shape[-1]), q.new_zeros(n, h, 0)
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


def _attend_int8(q, k, v, scale, qk_descale, pv_descale, keep=None, extra=None):
    """ATB's int8 attention (TYPE_QUANT_QKV_ONLINE, MLA int8_nzcache): scores
    (q . k) * qk_descale[h] (+ ``extra``, float) * scale; probabilities quantised
    per row as round(float16(exp(s - max) * 127)); out = (p . v) * pv_descale[h] /
    127 / row sum. Integer products in float64 (exact)."""
    h = q.shape[1]
    sc = _scores(q.double(), k.double()).float() * qk_descale.float().view(1, h, 1, 1)
    if extra is not None:
        sc = sc + extra
    sc = sc * scale
    if keep is not None:
        sc = sc.masked_fill(~keep, float("-inf"))
    m = sc.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(sc - m)
    total = e.sum(dim=-1, keepdim=True)
    p = torch.round((e / torch.tensor(1.0 / 127.0, dtype=torch.float32)).half().float())
    pv = _weighted(p.double(), v.double()).float()
    out = pv * pv_descale.float().view(1, h, 1, 1) / 127.0
    return out / torch.where(total > 0, total, torch.ones_like(total))


def _alibi(slopes, q_pos, k_pos, kind):
    """[H, S, Sk] alibi bias: slope * (j - i) ("alibi"), slope * sign * sqrt|j - i| ("sqrt"),
    slope * j ("left")."""
    rel = (k_pos.view(1, -1) - q_pos.view(-1, 1)).float()
    if kind == "sqrt":
        rel = torch.sign(rel) * torch.sqrt(rel.abs())
    elif kind == "left":
        rel = k_pos.view(1, -1).float().expand(q_pos.numel(), -1)
    return slopes.float().view(-1, 1, 1) * rel.unsqueeze(0)


def _causal_keep(q_len, k_len, device):
    """[q_len, k_len]: query i (position k_len - q_len + i) sees keys j <= its position."""
    pos = torch.arange(q_len, device=device) + (k_len - q_len)
    return torch.arange(k_len, device=device).view(1, -1) <= pos.view(-1, 1)


def _one(q, k, v, scale, bias=None, keep=None):
    """One sequence: q [S, H, D], k [Sk, Hk, D], v [Sk, Hk, Dv] -> (out [S, H, Dv], lse [H, S])."""
    out, lse = _attend(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0),
                       v.transpose(0, 1).unsqueeze(0), scale, bias, keep)
    return out[0].transpose(0, 1), lse[0]


# --- paged attention (decode) ----------------------------------------------------------------------

def _paged_decode(fn, query, key_cache, value_cache, num_kv_heads, scale, block_table, lens, k_layout, v_layout,
                  v_dim=None, bias=None, dequant=None):
    """One query token per sequence over its paged KV, vectorised over the batch
    (no host reads): query [B, H, D] -> (out [B, H, Dv] float32, lse [B, H]).
    ``value_cache`` None: V is K's first ``v_dim`` features (MLA). ``bias`` [B or
    1, H or 1, 1, L]; ``dequant`` (k_scale [kvh, D], v_scale [kvh, Dv]) for int8 caches."""
    b = query.shape[0]
    bs = k_layout[1]
    table = block_table[:b].long().to(query.device)
    width = table.shape[1]
    lens = lens.to(device=query.device, dtype=torch.int64).reshape(-1)[:b]
    used = torch.arange(width, device=query.device).view(1, -1) * bs < lens.view(-1, 1)
    ids = torch.where(used & (table >= 0) & (table < key_cache.shape[0]), table, torch.zeros_like(table))
    k = _gather(key_cache, k_layout, num_kv_heads, ids).reshape(b, width * bs, num_kv_heads, k_layout[2])
    if value_cache is None:
        v = k[..., :v_dim]
    else:
        v = _gather(value_cache, v_layout, num_kv_heads, ids).reshape(b, width * bs, num_kv_heads, v_layout[2])
    if dequant is not None:
        k = k.float() * dequant[0]
        v = v.float() * dequant[1]
    keep = (torch.arange(width * bs, device=query.device).view(1, -1) < lens.view(-1, 1)).view(b, 1, 1, -1)
    out, lse = _attend(query.unsqueeze(2), k.transpose(1, 2), v.transpose(1, 2), scale, bias, keep)
    return out.squeeze(2), lse.squeeze(2)


def _paged_common(fn, query, key_cache, value_cache, num_kv_heads, num_heads, block_table, context_lens, out,
                  float_kv=True, v_dim=None):
    """Checks shared by the decode paged attentions; returns (k_layout, v_layout, lens tensor)."""
    check(query.dim() == 3, f"{fn}: query should be [num_tokens, num_heads, head_size], got shape "
                            f"{list(query.shape)}.")
    _heads(fn, num_heads, num_kv_heads, query.shape[1])
    if float_kv:
        _check_dtype(fn, "query", query, _HALVES)
        _check_same_dtype(fn, "key_cache", key_cache, query, "query")
        if value_cache is not None:
            _check_same_dtype(fn, "value_cache", value_cache, query, "query")
    k_layout = _layout(fn, "key_cache", key_cache, num_kv_heads, query.shape[2])
    v_layout = None
    if value_cache is not None:
        v_layout = _layout(fn, "value_cache", value_cache, num_kv_heads)
        check(v_layout[1] == k_layout[1] and value_cache.shape[0] == key_cache.shape[0],
              f"{fn}: value_cache ({list(value_cache.shape)}) should have key_cache's blocks "
              f"({list(key_cache.shape)}).")
    if isinstance(context_lens, torch.Tensor):
        check(context_lens.dim() == 1 and context_lens.dtype in _INTS,
              f"{fn}: context_lens should be a 1-D int32 tensor, got {context_lens.dtype} of shape "
              f"{list(context_lens.shape)}.")
        lens = context_lens
    else:
        lens = torch.tensor([int(x) for x in context_lens], dtype=torch.int64)
    batch = lens.shape[0]
    check(batch == query.shape[0], f"{fn}: context_lens has {batch} entries for {query.shape[0]} query tokens.")
    _check_block_table(fn, block_table, batch)
    dv = v_dim if value_cache is None else v_layout[2]
    check(out.shape == (query.shape[0], num_heads, dv),
          f"{fn}: out should have shape {[query.shape[0], num_heads, dv]}, got {list(out.shape)}.")
    _check_tables(fn, block_table, lens, k_layout[1], key_cache.shape[0])
    return k_layout, v_layout, lens


def _check_workspace(fn, workspace):
    if workspace is not None:
        check(workspace.dtype == torch.uint8 and workspace.dim() == 1,
              f"{fn}: workspace should be the 1-D uint8 tensor *_get_workspace returned, got {workspace.dtype} of "
              f"shape {list(workspace.shape)}.")


def _workspace(query, heads, dv):
    return torch.empty(max(1, query.shape[0] * heads * dv * 4), dtype=torch.uint8, device=query.device)


def _npu_paged_attention(query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table,
                         context_lens, out, *, workspace=None):
    """Decode attention of each query token (one per sequence) over its sequence's
    context_lens[i] cached keys / values, found through block_table."""
    fn = "_npu_paged_attention"
    _check_workspace(fn, workspace)
    kl, vl, lens = _paged_common(fn, query, key_cache, value_cache, num_kv_heads, num_heads, block_table,
                                 context_lens, out)
    res, _ = _paged_decode(fn, query, key_cache, value_cache, num_kv_heads, scale_value, block_table, lens, kl, vl)
    out.copy_(res)


def _npu_paged_attention_get_workspace(query, key_cache, value_cache, num_kv_heads, num_heads, scale_value,
                                       block_table, context_lens, out):
    fn = "_npu_paged_attention_get_workspace"
    kl, vl, _ = _paged_common(fn, query, key_cache, value_cache, num_kv_heads, num_heads, block_table,
                              context_lens, out)
    return _workspace(query, num_heads, vl[2])


def _v2_common(fn, query, key_cache, block_table, context_lens, value_cache, mask, num_kv_heads, num_heads,
               mask_type, out):
    check(value_cache is not None, f"{fn}: value_cache is required (the keys-only form needs mlaVHeadSize, which "
                                   f"this interface does not take).")
    check(mask_type in (0, 2), f"{fn}: mask_type should be 0 (UNDEFINED) or 2 (MASK_TYPE_ALIBI), got {mask_type}.")
    kv_heads = num_kv_heads if num_kv_heads > 0 else num_heads
    kl, vl, lens = _paged_common(fn, query, key_cache, value_cache, kv_heads, num_heads, block_table,
                                 context_lens, out)
    bias = None
    if mask_type == 2:
        check(mask is not None, f"{fn}: mask_type 2 (MASK_TYPE_ALIBI) needs mask.")
        m = _mask_nd(mask)
        check(m.dim() in (3, 4) and m.shape[-2] == 1 and m.shape[-3] == num_heads,
              f"{fn}: the alibi mask should be [batch, num_heads, 1, max_seq_len] or [num_heads, 1, max_seq_len], "
              f"got shape {list(mask.shape)}.")
        width = block_table.shape[1] * kl[1]
        m = m if m.dim() == 4 else m.unsqueeze(0)
        check(m.shape[0] in (1, query.shape[0]), f"{fn}: mask has {m.shape[0]} batches for {query.shape[0]}.")
        if m.shape[-1] < width:
            m = torch.nn.functional.pad(m, (0, width - m.shape[-1]))
        bias = m[..., :width].to(query.device)
    return kv_heads, kl, vl, lens, bias


def _npu_paged_attention_v2_out(query, key_cache, block_table, context_lens, *, value_cache=None, mask=None,
                                num_kv_heads=0, num_heads=0, scale_value=1.0, mask_type=0, workspace=None, out):
    fn = "_npu_paged_attention_v2"
    _check_workspace(fn, workspace)
    kv_heads, kl, vl, lens, bias = _v2_common(fn, query, key_cache, block_table, context_lens, value_cache, mask,
                                              num_kv_heads, num_heads, mask_type, out)
    res, _ = _paged_decode(fn, query, key_cache, value_cache, kv_heads, scale_value, block_table, lens, kl, vl,
                           bias=bias)
    out.copy_(res)
    return out


def _npu_paged_attention_v2_get_workspace(query, key_cache, block_table, context_lens, *, value_cache=None,
                                          mask=None, num_kv_heads=0, num_heads=0, scale_value=1.0, mask_type=0,
                                          out):
    fn = "_npu_paged_attention_v2_get_workspace"
    _, _, vl, _, _ = _v2_common(fn, query, key_cache, block_table, context_lens, value_cache, mask, num_kv_heads,
                                num_heads, mask_type, out)
    return _workspace(query, num_heads, vl[2])


def _npu_paged_attention_mla(query, key_cache, num_kv_heads, num_heads, scale_value, block_table, context_lens,
                             mla_vheadsize, out):
    """Paged decode attention with V = the first mla_vheadsize features of each key."""
    fn = "_npu_paged_attention_mla"
    check(0 < mla_vheadsize <= query.shape[-1],
          f"{fn}: mla_vheadsize should be in (0, {query.shape[-1]}], got {mla_vheadsize}.")
    kl, _, lens = _paged_common(fn, query, key_cache, None, num_kv_heads, num_heads, block_table, context_lens, out,
                                v_dim=mla_vheadsize)
    res, _ = _paged_decode(fn, query, key_cache, None, num_kv_heads, scale_value, block_table, lens, kl, None,
                           v_dim=mla_vheadsize)
    out.copy_(res)


def _npu_paged_attention_quant(query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table,
                               context_lens, quant_type, outdata_type, k_descale, v_descale, out):
    """quant_type 0: as _npu_paged_attention; 1 (TYPE_DEQUANT_FUSION): float query,
    int8 caches, K = k_int8 * k_descale and V = v_int8 * v_descale per channel
    ([kv_heads * head_size]); 3 (TYPE_QUANT_QKV_ONLINE): int8 query and caches,
    scores scaled by k_descale[h], softmax quantised online, out scaled by v_descale[h]."""
    fn = "_npu_paged_attention_quant"
    check(quant_type in (0, 1, 2, 3), f"{fn}: quant_type should be 0, 1, 2 or 3, got {quant_type}.")
    if quant_type == 2:
        _unsupported(fn, "quant_type 2 (TYPE_QUANT_QKV_OFFLINE)",
                     "its offline softmax scale is not an argument of this interface; use quant_type 3")
    check(outdata_type in _ACL_DTYPES,
          f"{fn}: outdata_type should be 1 (ACL_FLOAT16) or 27 (ACL_BF16), got {outdata_type}.")
    check(out.dtype == _ACL_DTYPES[outdata_type],
          f"{fn}: out should be {_ACL_DTYPES[outdata_type]} (outdata_type {outdata_type}), got {out.dtype}.")
    if quant_type == 0:
        _npu_paged_attention(query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table,
                             context_lens, out)
        return
    if quant_type == 1:
        _check_dtype(fn, "query", query, _HALVES)
    else:
        _check_dtype(fn, "query", query, (torch.int8,))
    _check_dtype(fn, "key_cache", key_cache, (torch.int8,))
    _check_dtype(fn, "value_cache", value_cache, (torch.int8,))
    kl, vl, lens = _paged_common(fn, query, key_cache, value_cache, num_kv_heads, num_heads, block_table,
                                 context_lens, out, float_kv=False)
    if quant_type == 1:
        check(k_descale.numel() == num_kv_heads * kl[2] and v_descale.numel() == num_kv_heads * vl[2],
              f"{fn}: k_descale / v_descale should hold kv_heads * head_size values ({num_kv_heads * kl[2]}, "
              f"{num_kv_heads * vl[2]}), got {k_descale.numel()} and {v_descale.numel()}.")
        kd = _scale_value(k_descale).reshape(num_kv_heads, kl[2]).to(query.device)
        vd = _scale_value(v_descale).reshape(num_kv_heads, vl[2]).to(query.device)
        res, _ = _paged_decode(fn, query, key_cache, value_cache, num_kv_heads, scale_value, block_table, lens, kl,
                               vl, dequant=(kd, vd))
        out.copy_(res)
        return
    check(k_descale.numel() == num_heads and v_descale.numel() == num_heads,
          f"{fn}: k_descale and v_descale should hold num_heads ({num_heads}) values for quant_type 3, got "
          f"{k_descale.numel()} and {v_descale.numel()}.")
    b = query.shape[0]
    bs = kl[1]
    table = block_table[:b].long().to(query.device)
    width = table.shape[1]
    lens = lens.to(device=query.device, dtype=torch.int64)
    used = torch.arange(width, device=query.device).view(1, -1) * bs < lens.view(-1, 1)
    ids = torch.where(used & (table >= 0) & (table < key_cache.shape[0]), table, torch.zeros_like(table))
    k = _gather(key_cache, kl, num_kv_heads, ids).reshape(b, width * bs, num_kv_heads, kl[2]).transpose(1, 2)
    v = _gather(value_cache, vl, num_kv_heads, ids).reshape(b, width * bs, num_kv_heads, vl[2]).transpose(1, 2)
    keep = (torch.arange(width * bs, device=query.device).view(1, -1) < lens.view(-1, 1)).view(b, 1, 1, -1)
    res = _attend_int8(query.unsqueeze(2), k, v, scale_value, _scale_value(k_descale).to(query.device),
                       _scale_value(v_descale).to(query.device), keep)
    out.copy_(res.squeeze(2))


# --- chunked prefill (splitfuse) and packed-sequence attention -------------------------------------------

def _packed_lengths(fn, name, seq_len, tokens, exact=False):
    lens = _ints(fn, name, seq_len)
    check(all(x >= 0 for x in lens), f"{fn}: {name} should be non-negative, got {lens}.")
    total = sum(lens)
    if exact:
        check(total == tokens, f"{fn}: {name} sums to {total} but the query has {tokens} tokens.")
    else:
        check(total <= tokens, f"{fn}: {name} sums to {total} but the query has {tokens} tokens.")
    return lens


def _paged_prefix(fn, query, key_cache, value_cache, block_table, q_lens, kv_lens, num_kv_heads, num_heads, scale,
                  out, bias_for=None, causal=True, slopes=None, alibi=None):
    """Query tokens packed by sequence (q_lens) over each sequence's kv_lens paged
    keys: query i of sequence b is position kv_lens[b] - q_lens[b] + i, sees keys up to
    it (``causal``); ``bias_for(b, start, q, k)`` gives an additive [1 or H, q, k]."""
    q = _as_heads(fn, "query", query, num_heads)
    _heads(fn, num_heads, num_kv_heads)
    _check_dtype(fn, "query", q, _HALVES)
    _check_same_dtype(fn, "key_cache", key_cache, q, "query")
    _check_same_dtype(fn, "value_cache", value_cache, q, "query")
    kl = _layout(fn, "key_cache", key_cache, num_kv_heads, q.shape[2])
    vl = _layout(fn, "value_cache", value_cache, num_kv_heads)
    check(len(q_lens) == len(kv_lens), f"{fn}: {len(q_lens)} query lengths for {len(kv_lens)} context lengths.")
    _check_block_table(fn, block_table, len(kv_lens))
    for b, (ql, kvl) in enumerate(zip(q_lens, kv_lens)):
        check(ql <= kvl, f"{fn}: sequence {b} has {ql} query tokens but a context of {kvl}.")
    total = sum(q_lens)
    check(total <= q.shape[0], f"{fn}: the query lengths sum to {total} but the query has {q.shape[0]} tokens.")
    o = _as_heads(fn, "out", out, num_heads)
    check(o.shape[0] == q.shape[0] and o.shape[2] == vl[2],
          f"{fn}: out should have shape {[q.shape[0], num_heads, vl[2]]}, got {list(out.shape)}.")
    _check_tables(fn, block_table, kv_lens, kl[1], key_cache.shape[0])
    start = 0
    for b, (ql, kvl) in enumerate(zip(q_lens, kv_lens)):
        if ql == 0:
            continue
        rows = q[start:start + ql]
        k = _sequence_kv(key_cache, kl, num_kv_heads, block_table[b].to(key_cache.device), kvl)
        v = _sequence_kv(value_cache, vl, num_kv_heads, block_table[b].to(value_cache.device), kvl)
        keep = _causal_keep(ql, kvl, q.device) if causal else None
        bias = bias_for(b, start, ql, kvl) if bias_for is not None else None
        if alibi is not None:
            pos = torch.arange(ql, device=q.device) + (kvl - ql)
            ab = _alibi(slopes.to(q.device), pos, torch.arange(kvl, device=q.device), alibi)
            bias = ab if bias is None else bias + ab
        res, _ = _one(rows, k, v, scale, bias, keep)
        o[start:start + ql].copy_(res)
        start += ql


def _token_rows_bias(fn, mask, total, device):
    """Per-token mask rows (splitfuse): [T, L], [1, T, L] or NZ -> a function of
    (b, start, q, k) giving [1, q, k]."""
    m = _mask_nd(mask)
    if m.dim() == 3:
        check(m.shape[0] == 1, f"{fn}: mask should be [num_tokens, max_seq_len], got shape {list(mask.shape)}.")
        m = m[0]
    check(m.dim() == 2 and m.shape[0] >= total,
          f"{fn}: mask should be [num_tokens, max_seq_len] with a row per query token ({total}), got shape "
          f"{list(mask.shape)}.")

    def bias(b, start, q, k):
        check(m.shape[1] >= k, f"{fn}: mask has {m.shape[1]} columns for a context of {k}.")
        return m[start:start + q, :k].to(device).float().unsqueeze(0)
    return bias


def _npu_paged_attention_splitfuse(query, key_cache, value_cache, block_table, context_lens, mask, seq_len,
                                   num_kv_heads, num_heads, scale_value, out):
    """Chunked prefill: seq_len[b] query tokens of sequence b (packed) over its
    context_lens[b] cached keys, with mask's per-token row added (MASK_TYPE_SPEC)."""
    fn = "_npu_paged_attention_splitfuse"
    q_lens = _packed_lengths(fn, "seq_len", seq_len, query.shape[0])
    kv_lens = _ints(fn, "context_lens", context_lens)
    bias = _token_rows_bias(fn, mask, sum(q_lens), query.device)
    _paged_prefix(fn, query, key_cache, value_cache, block_table, q_lens, kv_lens, num_kv_heads, num_heads,
                  scale_value, out, bias_for=bias, causal=False)


def _check_compressed(fn, mask, name="mask"):
    m = _mask_nd(mask)
    check(m.dim() in (2, 3) and m.shape[-1] == m.shape[-2],
          f"{fn}: {name} should be the square compressed causal mask ([L, L] or NZ [1, L / 16, L, 16]), got "
          f"shape {list(mask.shape)}.")
    check(m.is_floating_point(), f"{fn}: {name} should be float16 or bfloat16, got {mask.dtype}.")


def _npu_paged_attention_splitfuse_v2(query, key_cache, value_cache, block_table, context_lens, mask, seq_len,
                                      num_kv_heads, num_heads, scale_value, *, mask_type=5, out):
    """Chunked prefill with the compressed causal mask (MASK_TYPE_NORM_COMPRESS, 5)."""
    fn = "_npu_paged_attention_splitfuse_v2"
    mtype = 5 if mask_type is None else mask_type
    check(mtype == 5, f"{fn}: mask_type only supports MASK_TYPE_NORM_COMPRESS(5), but got: {mtype}")
    _check_compressed(fn, mask)
    q_lens = _packed_lengths(fn, "seq_len", seq_len, query.shape[0])
    kv_lens = _ints(fn, "context_lens", context_lens)
    _paged_prefix(fn, query, key_cache, value_cache, block_table, q_lens, kv_lens, num_kv_heads, num_heads,
                  scale_value, out)


def _packed_self(fn, query, key, value, lens, num_heads, num_kv_heads, scale, out, bias_for=None, causal=False,
                 slopes=None, alibi=None):
    """Self attention of packed sequences (query and keys of the same lengths)."""
    kv_heads = num_kv_heads if num_kv_heads > 0 else num_heads
    _heads(fn, num_heads, kv_heads)
    q = _as_heads(fn, "query", query, num_heads)
    k = _as_heads(fn, "key", key, kv_heads)
    v = _as_heads(fn, "value", value, kv_heads)
    _check_dtype(fn, "query", q, _HALVES)
    _check_same_dtype(fn, "key", k, q, "query")
    _check_same_dtype(fn, "value", v, q, "query")
    check(k.shape[2] == q.shape[2], f"{fn}: key head size {k.shape[2]} differs from query's {q.shape[2]}.")
    check(k.shape[0] == q.shape[0] and v.shape[0] == q.shape[0],
          f"{fn}: query, key and value should have the same number of tokens, got {q.shape[0]}, {k.shape[0]}, "
          f"{v.shape[0]}.")
    total = sum(lens)
    check(total <= q.shape[0], f"{fn}: seq_len sums to {total} but the query has {q.shape[0]} tokens.")
    o = _as_heads(fn, "out", out, num_heads)
    check(o.shape[0] == q.shape[0] and o.shape[2] == v.shape[2],
          f"{fn}: out should have shape {[q.shape[0], num_heads, v.shape[2]]}, got {list(out.shape)}.")
    check(out.dtype == q.dtype, f"{fn}: out should have query's dtype {q.dtype}, got {out.dtype}.")
    start = 0
    for b, s in enumerate(lens):
        if s == 0:
            continue
        keep = _causal_keep(s, s, q.device) if causal else None
        bias = bias_for(b, s) if bias_for is not None else None
        if alibi is not None:
            pos = torch.arange(s, device=q.device)
            ab = _alibi(slopes.to(q.device), pos, pos, alibi)
            bias = ab if bias is None else bias + ab
        res, _ = _one(q[start:start + s], k[start:start + s], v[start:start + s], scale, bias, keep)
        o[start:start + s].copy_(res)
        start += s


def _square_mask_bias(fn, mask, batch, heads, device):
    """An additive mask [L, L], [1 or B, L, L] or [1 or B, H, L, L] (or NZ) as a
    function of (b, s) giving [1 or H, s, s]."""
    m = _mask_nd(mask)
    check(m.dim() in (2, 3, 4), f"{fn}: mask should be 2-D, 3-D or 4-D, got shape {list(mask.shape)}.")
    check(m.is_floating_point(), f"{fn}: mask should be floating point, got {mask.dtype}.")
    if m.dim() == 2:
        m = m.unsqueeze(0)
    if m.dim() == 3:
        m = m.unsqueeze(1)
    check(m.shape[0] in (1, batch) and m.shape[1] in (1, heads),
          f"{fn}: mask of shape {list(mask.shape)} does not match {batch} sequences of {heads} heads.")

    def bias(b, s):
        check(m.shape[-1] >= s and m.shape[-2] >= s, f"{fn}: mask ({list(mask.shape)}) is smaller than a "
                                                     f"sequence of {s} tokens.")
        return m[b if m.shape[0] > 1 else 0, :, :s, :s].to(device).float()
    return bias


def _npu_flash_attention(query, key, value, mask, seq_len, scale_value, num_heads, num_kv_heads, out):
    """Self attention of packed sequences (seq_len) with an additive mask (MASK_TYPE_NORM)."""
    fn = "_npu_flash_attention"
    lens = _packed_lengths(fn, "seq_len", seq_len, query.shape[0])
    bias = _square_mask_bias(fn, mask, len(lens), num_heads, query.device)
    _packed_self(fn, query, key, value, lens, num_heads, num_kv_heads, scale_value, out, bias_for=bias)


def _npu_flash_attention_v3(query, key, value, mask, seq_len, scale_value, num_heads, num_kv_heads, *,
                            mask_type=3, out):
    """Causal self attention of packed sequences, compressed mask (MASK_TYPE_NORM_COMPRESS, 3)."""
    fn = "_npu_flash_attention_v3"
    mtype = 3 if mask_type is None else mask_type
    check(mtype == 3, f"{fn}: mask_type only supports MASK_TYPE_NORM_COMPRESS, but got: {mtype}")
    _check_compressed(fn, mask)
    lens = _packed_lengths(fn, "seq_len", seq_len, query.shape[0])
    _packed_self(fn, query, key, value, lens, num_heads, num_kv_heads, scale_value, out, causal=True)


def _npu_flash_attention_unpad(query, key, value, seq_len, scale_value, num_heads, num_kv_heads, out):
    """Unmasked (bidirectional) attention within each of the packed sequences."""
    fn = "_npu_flash_attention_unpad"
    lens = _packed_lengths(fn, "seq_len", seq_len, query.shape[0])
    _packed_self(fn, query, key, value, lens, num_heads, num_kv_heads, scale_value, out)


def _npu_flash_attention_unpad_v2(query, key, value, seq_len, scale_value, num_heads, num_kv_heads, *,
                                  kernel_type=0, out):
    fn = "_npu_flash_attention_unpad_v2"
    ktype = 0 if kernel_type is None else kernel_type
    check(ktype in (0, 2), f"{fn}: kernel_type only supports KERNELTYPE_DEFAULT(0) and KERNELTYPE_EXP_M8V2(2), "
                           f"but got: {ktype}")
    lens = _packed_lengths(fn, "seq_len", seq_len, query.shape[0])
    _packed_self(fn, query, key, value, lens, num_heads, num_kv_heads, scale_value, out)


_ALIBI_KINDS = {4: "alibi", 5: "sqrt", 6: "left"}


def _slopes(fn, slopes, heads):
    check(slopes is not None, f"{fn}: the compressed alibi mask types need slopes.")
    check(slopes.numel() == heads, f"{fn}: slopes should hold one value per head ({heads}), got "
                                   f"{slopes.numel()}.")
    return slopes.reshape(-1)


def _npu_flash_attention_v2_out(query, key, value, seq_len, *, mask=None, slopes=None, kernel_type=0, mask_type=2,
                                scale_value=1, num_heads=0, num_kv_heads=0, out):
    """Self attention of packed sequences (PA_ENCODER): mask_type 0 none, 1 additive
    mask, 2 additive alibi mask, 4 / 5 / 6 causal + alibi from slopes."""
    fn = "_npu_flash_attention_v2"
    check(kernel_type in (0, 1), f"{fn}: kernel_type should be 0 (KERNELTYPE_DEFAULT) or 1 (HIGH_PRECISION), got "
                                 f"{kernel_type}.")
    check(mask_type in (0, 1, 2, 4, 5, 6),
          f"{fn}: mask_type {mask_type} is not supported; supported: 0 (UNDEFINED), 1 (NORM), 2 (ALIBI), "
          f"4 (ALIBI_COMPRESS), 5 (ALIBI_COMPRESS_SQRT), 6 (ALIBI_COMPRESS_LEFT_ALIGN).")
    lens = _packed_lengths(fn, "seq_len", seq_len, query.shape[0])
    bias = None
    kind = None
    if mask_type in (1, 2):
        check(mask is not None, f"{fn}: mask_type {mask_type} needs mask.")
        bias = _square_mask_bias(fn, mask, len(lens), num_heads, query.device)
    elif mask_type in _ALIBI_KINDS:
        slopes = _slopes(fn, slopes, num_heads)
        kind = _ALIBI_KINDS[mask_type]
    _packed_self(fn, query, key, value, lens, num_heads, num_kv_heads, scale_value, out, bias_for=bias,
                 causal=kind is not None, slopes=slopes, alibi=kind)
    return out


def _npu_flash_attention_prefix_v2_out(query, key_cache, value_cache, block_table, mask, seq_len, context_lens, *,
                                       slopes=None, kernel_type=1, mask_type=3, num_kv_heads=0, num_heads=0,
                                       scale_value=1, out):
    """Causal attention of packed queries over paged keys with a prefix (PREFIX_ENCODER):
    mask_type 3 plain, 4 / 5 with alibi slopes."""
    fn = "_npu_flash_attention_prefix_v2"
    check(kernel_type == 1, f"{fn}: kernel_type should be 1 (KERNELTYPE_HIGH_PRECISION), got {kernel_type}.")
    check(mask_type in (3, 4, 5), f"{fn}: mask_type should be 3 (NORM_COMPRESS), 4 (ALIBI_COMPRESS) or 5 "
                                  f"(ALIBI_COMPRESS_SQRT), got {mask_type}.")
    q_lens = _packed_lengths(fn, "seq_len", seq_len, query.shape[0])
    kv_lens = _ints(fn, "context_lens", context_lens)
    check(mask.is_floating_point(), f"{fn}: mask should be float16 or bfloat16, got {mask.dtype}.")
    kv_heads = num_kv_heads if num_kv_heads > 0 else num_heads
    kind = _ALIBI_KINDS.get(mask_type)
    if kind is not None:
        slopes = _slopes(fn, slopes, num_heads)
    _paged_prefix(fn, query, key_cache, value_cache, block_table, q_lens, kv_lens, kv_heads, num_heads,
                  scale_value, out, slopes=slopes, alibi=kind)
    return out


def _npu_flash_attention_qlens(query, key_cache, value_cache, block_table, mask, seq_len, context_lens,
                               num_kv_heads, num_heads, scale_value, out):
    """Causal attention of packed queries (seq_len) over their context_lens paged keys."""
    fn = "_npu_flash_attention_qlens"
    check(mask.is_floating_point(), f"{fn}: mask should be float16 or bfloat16, got {mask.dtype}.")
    q_lens = _packed_lengths(fn, "seq_len", seq_len, query.shape[0])
    kv_lens = _ints(fn, "context_lens", context_lens)
    _paged_prefix(fn, query, key_cache, value_cache, block_table, q_lens, kv_lens, num_kv_heads, num_heads,
                  scale_value, out)


_PREFIX_MASKS = {"mask_type_norm_compress": None, "mask_type_alibi_compress": "alibi",
                 "mask_type_alibi_compress_sort": "sqrt", "mask_type_causal_mask": None}


def _prefix_encoder(fn, query, key, value, block_tables, seqlen, kv_seqlen, q_headnum, qk_scale, kv_headnum, mask,
                    slopes, mask_type, output):
    mtype = "mask_type_causal_mask" if mask_type is None else mask_type
    check(mtype in _PREFIX_MASKS, f"Unsupported mask_type value: '{mtype}'")
    kind = _PREFIX_MASKS[mtype]
    if kind is not None:
        slopes = _slopes(fn, slopes, q_headnum)
    q_lens = _packed_lengths(fn, "seqlen", seqlen, query.shape[0])
    kv_lens = _ints(fn, "kv_seqlen", kv_seqlen)
    _paged_prefix(fn, query, key, value, block_tables, q_lens, kv_lens, kv_headnum, q_headnum, qk_scale, output,
                  slopes=slopes, alibi=kind)
    return output


def npu_self_attention_prefix_encoder(query, key, value, block_tables, seqlen, kv_seqlen, q_headnum, qk_scale,
                                      kv_headnum, *, mask=None, slopes=None, mask_type=None):
    out = torch.empty_like(query)
    return _prefix_encoder("npu_self_attention_prefix_encoder", query, key, value, block_tables, seqlen, kv_seqlen,
                           q_headnum, qk_scale, kv_headnum, mask, slopes, mask_type, out)


def npu_self_attention_prefix_encoder_out(query, key, value, block_tables, seqlen, kv_seqlen, q_headnum, qk_scale,
                                          kv_headnum, *, mask=None, slopes=None, mask_type=None, output):
    fn = "npu_self_attention_prefix_encoder"
    check(output.shape == query.shape and output.dtype == query.dtype,
          f"{fn}: output should be {query.dtype} of shape {list(query.shape)}, got {output.dtype} "
          f"{list(output.shape)}.")
    return _prefix_encoder(fn, query, key, value, block_tables, seqlen, kv_seqlen, q_headnum, qk_scale, kv_headnum,
                           mask, slopes, mask_type, output)


# --- cache writes / reads -----------------------------------------------------------------------------

def _write_slots(fn, name, rows, cache, slots, nz):
    """cache[slot] = rows[i] for each slot >= 0; ND [blocks, bs, ...] or NZ
    [blocks, F / c0, bs, c0] (F = features per token)."""
    _check_same_dtype(fn, name + "_cache", cache, rows, name)
    t = rows.shape[0]
    feats = rows[0].numel() if t else 0
    if nz:
        check(cache.dim() == 4 and cache.shape[1] * cache.shape[3] == feats,
              f"{fn}: {name}_cache (NZ) of shape {list(cache.shape)} should hold {feats} values per token in "
              f"[num_blocks, {feats} / c0, block_size, c0].")
        bs = cache.shape[2]
    else:
        bs = cache.shape[1]
        check(cache.dim() >= 3 and cache[0, 0].numel() == feats,
              f"{fn}: {name}_cache of shape {list(cache.shape)} should hold {name}'s {list(rows.shape[1:])} per "
              f"slot: [num_blocks, block_size] + {list(rows.shape[1:])}.")
    capacity = cache.shape[0] * bs
    slots = slots.to(cache.device).long().reshape(-1)
    check(slots.numel() == t, f"{fn}: slot_indices has {slots.numel()} entries for {t} tokens.")
    if _host_checks(slots, cache):
        hi = int(slots.max()) if t else -1
        check(hi < capacity, f"{fn}: slot_indices holds slot {hi}, out of range for {name}_cache's {capacity} "
                             f"slots ({cache.shape[0]} blocks of {bs}).")
    valid = (slots >= 0) & (slots < capacity)
    safe = torch.where(valid, slots, torch.zeros_like(slots))
    block, offset = safe // bs, safe % bs
    if nz:
        new = rows.reshape(t, cache.shape[1], cache.shape[3]).to(cache.device)
        old = cache[block, :, offset, :]
        cache[block, :, offset, :] = torch.where(valid.view(-1, 1, 1), new, old)
    else:
        new = rows.reshape((t,) + tuple(cache.shape[2:])).to(cache.device)
        old = cache[block, offset]
        cache[block, offset] = torch.where(valid.view((-1,) + (1,) * (new.dim() - 1)), new, old)


def _cache_is_nz(cache, rows):
    """NZ when tagged so, or when the ND shape cannot hold the rows but the NZ one can."""
    if _nz_tagged(cache):
        return True
    if cache.dim() != 4 or cache.shape[3] not in (16, 32):
        return False
    nd = tuple(cache.shape[2:]) == tuple(rows.shape[1:]) or cache[0, 0].numel() == rows[0].numel()
    return not nd and cache.shape[1] * cache.shape[3] == rows[0].numel()


def _npu_reshape_and_cache(key, value, key_cache, value_cache, slot_indices):
    """key[i] / value[i] written at slot slot_indices[i] (block s // block_size, offset
    s % block_size) of key_cache / value_cache; negative slots are skipped."""
    fn = "_npu_reshape_and_cache"
    check(key.shape[0] == value.shape[0], f"{fn}: key ({key.shape[0]}) and value ({value.shape[0]}) should have "
                                          f"the same number of tokens.")
    check(slot_indices.dtype in _INTS and slot_indices.dim() == 1,
          f"{fn}: slot_indices should be a 1-D int32 tensor, got {slot_indices.dtype} of shape "
          f"{list(slot_indices.shape)}.")
    nz_k, nz_v = _nz_tagged(key_cache), _nz_tagged(value_cache)
    if not (nz_k and nz_v):  # ATB takes NZ only when both caches are NZ; else the shapes decide
        nz_k, nz_v = _cache_is_nz(key_cache, key), _cache_is_nz(value_cache, value)
    _write_slots(fn, "key", key, key_cache, slot_indices, nz_k)
    _write_slots(fn, "value", value, value_cache, slot_indices, nz_v)


def _npu_reshape_and_cache_siso(key, key_cache, slot_indices):
    """key[i] written at slot slot_indices[i] of key_cache (keys only)."""
    fn = "_npu_reshape_and_cache_siso"
    check(slot_indices.dtype in _INTS and slot_indices.dim() == 1,
          f"{fn}: slot_indices should be a 1-D int32 tensor, got {slot_indices.dtype} of shape "
          f"{list(slot_indices.shape)}.")
    _write_slots(fn, "key", key, key_cache, slot_indices, False)


def _cache_load_plan(fn, key_cache, value_cache, block_table, context_lens, seq_starts, cumsum):
    check(block_table.dim() == 2 and block_table.dtype in _INTS,
          f"{fn}: block_table should be a 2-D int32 tensor, got {block_table.dtype} of shape "
          f"{list(block_table.shape)}.")
    check(context_lens.dtype in _INTS and context_lens.dim() == 1,
          f"{fn}: context_lens should be a 1-D int32 tensor, got {context_lens.dtype} of shape "
          f"{list(context_lens.shape)}.")
    check(key_cache.dim() == 4 and value_cache.dim() == 4, f"{fn}: key_cache and value_cache should be 4-D.")
    check(value_cache.shape[0] == key_cache.shape[0], f"{fn}: value_cache and key_cache have different block counts.")
    batch = block_table.shape[0]
    vals = _ints(fn, "context_lens", context_lens)
    if cumsum:
        check(len(vals) in (batch, batch + 1), f"{fn}: cumulative context_lens should have batch or batch + 1 "
                                               f"entries ({batch}), got {len(vals)}.")
        if len(vals) == batch:
            vals = [0] + vals
        lens = [b - a for a, b in zip(vals, vals[1:])]
    else:
        check(len(vals) == batch, f"{fn}: context_lens has {len(vals)} entries for {batch} block_table rows.")
        lens = vals
    check(all(x >= 0 for x in lens), f"{fn}: context_lens gives a negative length: {lens}.")
    starts = None
    if seq_starts is not None:
        starts = _ints(fn, "seq_starts", seq_starts)
        check(len(starts) == batch and all(s >= 0 for s in starts),
              f"{fn}: seq_starts should hold {batch} non-negative offsets, got {starts}.")
    return lens, starts


def _cache_load(fn, key_cache, value_cache, block_table, lens, starts, key, value, nz):
    bs = key_cache.shape[2] if nz else key_cache.shape[1]
    _check_tables(fn, block_table, lens, bs, key_cache.shape[0], starts)
    total = sum(lens)
    check(key.shape[0] >= total and value.shape[0] >= total,
          f"{fn}: key / value have {key.shape[0]} / {value.shape[0]} rows for {total} tokens.")
    table = block_table.long().cpu() if total else None
    ids, offs = [], []
    for b, length in enumerate(lens):
        if length == 0:
            continue
        j = torch.arange(length)
        first = 0 if starts is None else starts[b] // bs
        ids.append(table[b, first + j // bs])
        offs.append(j % bs)
    if not ids:
        return
    ids = torch.cat(ids).to(key_cache.device)
    offs = torch.cat(offs).to(key_cache.device)
    for cache, dst, name in ((key_cache, key, "key"), (value_cache, value, "value")):
        if nz:
            rows = cache[ids, :, offs, :].reshape(total, -1)
        else:
            rows = cache[ids, offs].reshape(total, -1)
        check(rows.shape[1] == dst[0].numel(), f"{fn}: {name}_cache holds {rows.shape[1]} values per token, {name} "
                                               f"{dst[0].numel()}.")
        _check_same_dtype(fn, name, dst, cache, name + "_cache")
        dst[:total].copy_(rows.reshape((total,) + tuple(dst.shape[1:])))


def npu_paged_cache_load(key_cache, value_cache, block_table, context_lens, *, seq_starts=None, cumsum=False):
    """The tokens of each sequence (context_lens, or its differences with cumsum) read
    from the paged caches into contiguous [num_tokens, heads, head_dim] key / value;
    sequence b starts at block seq_starts[b] // block_size of its table row."""
    fn = "npu_paged_cache_load"
    lens, starts = _cache_load_plan(fn, key_cache, value_cache, block_table, context_lens, seq_starts, cumsum)
    if _nz_tagged(key_cache):
        _unsupported(fn, "an NZ cache in the functional form", "the per-token shape of an NZ cache is not known; "
                                                               "pass key= and value= (the .out form)")
    total = sum(lens)
    key = key_cache.new_empty((total,) + tuple(key_cache.shape[2:]))
    value = value_cache.new_empty((total,) + tuple(value_cache.shape[2:]))
    _cache_load(fn, key_cache, value_cache, block_table, lens, starts, key, value, False)
    return key, value


def npu_paged_cache_load_out(key_cache, value_cache, block_table, context_lens, *, seq_starts=None, cumsum=False,
                             key, value):
    fn = "npu_paged_cache_load"
    lens, starts = _cache_load_plan(fn, key_cache, value_cache, block_table, context_lens, seq_starts, cumsum)
    _cache_load(fn, key_cache, value_cache, block_table, lens, starts, key, value, _nz_tagged(key_cache))
    return key, value


# --- rotary, quantisation, routing, linear ----------------------------------------------------------------

def _npu_rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox_style):
    """vLLM's rotary embedding, in place: each head_size chunk of a token's query /
    key rotates its first rotary_dim (= cos_sin_cache.shape[1]) features by the angles
    of row positions[t] of the cache (cos then sin); neox style pairs feature i with
    i + rotary_dim / 2, otherwise 2i with 2i + 1. Computed in float32."""
    fn = "_npu_rotary_embedding"
    check(positions.dtype in _INTS, f"{fn}: positions should be int32 or int64, got {positions.dtype}.")
    check(cos_sin_cache.dim() == 2, f"{fn}: cos_sin_cache should be 2-D [max_position, rotary_dim], got shape "
                                    f"{list(cos_sin_cache.shape)}.")
    rot = cos_sin_cache.shape[1]
    check(head_size > 0 and rot % 2 == 0 and 0 < rot <= head_size,
          f"{fn}: rotary_dim (cos_sin_cache.shape[1] = {rot}) should be even and at most head_size ({head_size}).")
    _check_dtype(fn, "query", query, _FLOATS)
    _check_same_dtype(fn, "key", key, query, "query")
    t = positions.numel()
    for name, x in (("query", query), ("key", key)):
        check(x.numel() % max(t, 1) == 0 and (t == 0 or (x.numel() // t) % head_size == 0),
              f"{fn}: {name} of shape {list(x.shape)} is not {t} tokens of whole heads of size {head_size}.")
    if t == 0:
        return
    cs = cos_sin_cache.index_select(0, positions.reshape(-1).long().to(cos_sin_cache.device)).float()
    cos, sin = cs[:, None, :rot // 2].to(query.device), cs[:, None, rot // 2:].to(query.device)
    for x in (query, key):
        heads = x.reshape(t, -1, head_size).float()
        r = heads[..., :rot]
        if is_neox_style:
            a, b = r[..., :rot // 2], r[..., rot // 2:]
            r = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
        else:
            a, b = r[..., 0::2], r[..., 1::2]
            r = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
        x.copy_(torch.cat((r, heads[..., rot:]), dim=-1).reshape(x.shape).to(x.dtype))


def _quantize(v, scale, offset=None):
    q = torch.round(v / scale)
    if offset is not None:
        q = q + offset
    return q.clamp(-128, 127)


def _npu_quantize_per_tensor(x, scale, zero_point, y):
    """y = saturate_int8(round(x / scale) + zero_point), scale and zero_point broadcast
    against x (an empty zero_point adds nothing)."""
    fn = "_npu_quantize_per_tensor"
    _check_dtype(fn, "x", x, _FLOATS)
    check(scale.is_floating_point(), f"{fn}: scale should be floating point, got {scale.dtype}.")
    check(y.dtype == torch.int8 and y.shape == x.shape,
          f"{fn}: y should be int8 of x's shape {list(x.shape)}, got {y.dtype} {list(y.shape)}.")
    for name, t in (("scale", scale), ("zero_point", zero_point)):
        check(t.dim() <= 8, f"{fn}: ATB tensor supports at most 8 dimensions, but got {t.dim()} ({name}).")
        if t.numel():
            try:
                torch.broadcast_shapes(t.shape, x.shape)
            except RuntimeError:
                raise RuntimeError(f"{fn}: {name} of shape {list(t.shape)} does not broadcast to x's "
                                   f"{list(x.shape)}.") from None
    offset = zero_point.to(x.device).float() if zero_point.numel() else None
    y.copy_(_quantize(x.float(), scale.to(x.device).float(), offset).to(torch.int8))


def _rms(x, eps):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


def _npu_quant_rms_norm(self, gamma, beta, scale, offset, output, eps=1e-05):
    """output = saturate_int8(round((x / rms(x)) * gamma + beta) / scale) + offset),
    rms over the last dimension."""
    fn = "_npu_quant_rms_norm"
    _check_dtype(fn, "self", self, _FLOATS)
    n = self.shape[-1]
    for name, t in (("gamma", gamma), ("beta", beta)):
        check(t.numel() == n, f"{fn}: {name} should hold the last dimension's {n} values, got shape "
                              f"{list(t.shape)}.")
    check(scale.numel() == 1 and offset.numel() == 1,
          f"{fn}: scale and offset should hold one value each, got shapes {list(scale.shape)} and "
          f"{list(offset.shape)}.")
    check(output.dtype == torch.int8 and output.shape == self.shape,
          f"{fn}: output should be int8 of self's shape {list(self.shape)}, got {output.dtype} "
          f"{list(output.shape)}.")
    y = _rms(self, eps) * gamma.reshape(n).float() + beta.reshape(n).float()
    output.copy_(_quantize(y, scale.reshape(()).float(), offset.reshape(()).float()).to(torch.int8))


def _group_keep(fn, scores, group_num, group_topk, n):
    """[T, E] bool: the experts of the group_topk groups whose n largest scores sum
    highest (ties: the lower group)."""
    t, e = scores.shape
    check(group_num > 0 and e % group_num == 0, f"{fn}: group_num ({group_num}) should divide the {e} experts.")
    per = e // group_num
    check(1 <= group_topk <= group_num, f"{fn}: the number of groups to keep ({group_topk}) should be in "
                                        f"[1, {group_num}].")
    check(1 <= n <= per, f"{fn}: n ({n}) should be in [1, {per}] (experts per group).")
    groups = scores.reshape(t, group_num, per)
    gscore = groups.topk(n, dim=-1).values.sum(dim=-1)
    order = torch.sort(gscore, dim=-1, descending=True, stable=True).indices[:, :group_topk]
    keep = torch.zeros(t, group_num, dtype=torch.bool, device=scores.device).scatter(1, order, True)
    return keep.repeat_interleave(per, dim=1)


def _npu_group_topk(self, k=0, group_num=1, n=1):
    """In place: experts outside the k groups with the largest sum of their n best
    scores are set to 0."""
    fn = "_npu_group_topk"
    _check_dtype(fn, "self", self, _FLOATS)
    check(self.dim() == 2, f"{fn}: self should be 2-D [tokens, experts], got shape {list(self.shape)}.")
    keep = _group_keep(fn, self.float(), group_num, k, n)
    self.masked_fill_(~keep, 0)


_MAPPING_PRIME, _MAPPING_OFFSET = 100000007, 7


def _fused_add_topk_div(fn, x, add_num, mapping_num, mapping_table, activation_type, group_num, group_topk, n, k,
                        is_norm, scale, enable_expert_mapping):
    act = "activation_sigmoid" if activation_type is None else activation_type
    check(act == "activation_sigmoid", f"Unsupported activation_type value: '{act}'")
    _check_dtype(fn, "x", x, _FLOATS)
    check(x.dim() == 2, f"{fn}: x should be 2-D [a, b], got shape {list(x.shape)}.")
    _check_same_dtype(fn, "add_num", add_num, x, "x")
    b = x.shape[1]
    check(add_num.numel() == b, f"{fn}: add_num should hold b = {b} values, got shape {list(add_num.shape)}.")
    check(1 <= k <= b, f"{fn}: k ({k}) should be in [1, {b}].")
    sig = torch.sigmoid(x.float())
    scores = sig + add_num.reshape(b).float()
    keep = _group_keep(fn, scores, group_num, group_topk, n)
    order = torch.sort(scores.masked_fill(~keep, 0.0), dim=-1, descending=True, stable=True).indices
    idx = order[:, :k]
    y = torch.gather(sig, 1, idx)
    if is_norm:
        y = y / y.sum(dim=-1, keepdim=True) * float(scale)
    indices = idx.to(torch.int32)
    if enable_expert_mapping:
        check(mapping_num is not None and mapping_table is not None,
              f"{fn}: enable_expert_mapping needs mapping_num and mapping_table.")
        check(mapping_num.numel() == b and mapping_table.dim() == 2 and mapping_table.shape[0] == b,
              f"{fn}: mapping_num should be [{b}] and mapping_table [{b}, c], got {list(mapping_num.shape)} and "
              f"{list(mapping_table.shape)}.")
        check(mapping_table.shape[1] <= 128, f"{fn}: mapping_table has {mapping_table.shape[1]} columns; at most "
                                             f"128 redundant experts are supported.")
        per = b // group_num
        last = order[:, group_topk * per - 1].to(torch.int64) + _MAPPING_OFFSET
        rand = torch.remainder(torch.full_like(last, _MAPPING_PRIME), last).float() / last.float()
        mnum = mapping_num.reshape(b).to(x.device).float()
        choice = torch.floor(mnum.view(1, -1) * rand.view(-1, 1)).long()
        if _host_checks(mapping_num):
            check(bool((mapping_num.reshape(-1) > 0).all()), f"{fn}: mapping_num should be positive.")
        col = torch.gather(choice, 1, idx).clamp(0, mapping_table.shape[1] - 1)
        indices = mapping_table.to(x.device).long()[idx, col].to(torch.int32)
    return y, indices


def npu_fused_add_topk_div(x, add_num, *, mapping_num=None, mapping_table=None, activation_type=None, group_num=1,
                           group_topk=1, n=1, k=1, is_norm=True, scale=1, enable_expert_mapping=False):
    """DeepSeek-V3 routing: s = sigmoid(x); experts of the group_topk groups (top-n sums
    of s + add_num) compete; the k best (s + add_num) are chosen; y = their s,
    normalised to sum scale when is_norm; indices int32 (mapped to logical experts by
    mapping_table with enable_expert_mapping)."""
    return _fused_add_topk_div("npu_fused_add_topk_div", x, add_num, mapping_num, mapping_table, activation_type,
                               group_num, group_topk, n, k, is_norm, scale, enable_expert_mapping)


def npu_fused_add_topk_div_out(x, add_num, *, mapping_num=None, mapping_table=None, activation_type=None,
                               group_num=1, group_topk=1, n=1, k=1, is_norm=True, scale=1,
                               enable_expert_mapping=False, y, indices):
    fn = "npu_fused_add_topk_div"
    check(y.dtype == torch.float32 and list(y.shape) == [x.shape[0], k],
          f"{fn}: y should be float32 of shape {[x.shape[0], k]}, got {y.dtype} {list(y.shape)}.")
    check(indices.dtype == torch.int32 and list(indices.shape) == [x.shape[0], k],
          f"{fn}: indices should be int32 of shape {[x.shape[0], k]}, got {indices.dtype} {list(indices.shape)}.")
    yy, ii = _fused_add_topk_div(fn, x, add_num, mapping_num, mapping_table, activation_type, group_num, group_topk,
                                 n, k, is_norm, scale, enable_expert_mapping)
    y.copy_(yy)
    indices.copy_(ii)
    return y, indices


def _npu_matmul_add_fp32(x, weight, C):
    """C += x^T @ weight in float32, in place (MindSpeed's gradient accumulation:
    main_grad += input^T @ grad_output)."""
    fn = "_npu_matmul_add_fp32"
    check(x.dim() == 2 and weight.dim() == 2 and x.shape[0] == weight.shape[0],
          f"{fn}: x {list(x.shape)} and weight {list(weight.shape)} should be 2-D with the same first dimension.")
    check(list(C.shape) == [x.shape[1], weight.shape[1]] and C.dtype == torch.float32,
          f"{fn}: C should be float32 of shape {[x.shape[1], weight.shape[1]]}, got {C.dtype} {list(C.shape)}.")
    C.add_(x.float().t() @ weight.float())


# --- MLA -------------------------------------------------------------------------------------------------

_MLA_MASKS = {"undefined": 0, "mask_type_spec": 1, "mask_type_free": 2}
_MLA_CALCS = {"calc_type_undefined": 0, "calc_type_spec": 1, "calc_type_ring": 2}
_MLA_CACHES = {"krope_ctkv": 1, "int8_nzcache": 2, "nzcache": 3}


def _mode(table, value, default, name):
    v = default if value is None else value
    check(v in table, f"Unsupported {name} value: '{v}'")
    return v


def _mla(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum, qk_scale, kv_headnum, mask, qseqlen,
         qk_descale, pv_descale, mask_type, calc_type, cache_mode, want_lse):
    fn = "npu_multi_head_latent_attention"
    mask_type = _mode(_MLA_MASKS, mask_type, "undefined", "mask_type")
    calc_type = _mode(_MLA_CALCS, calc_type, "calc_type_undefined", "calc_type")
    cache_mode = _mode(_MLA_CACHES, cache_mode, "krope_ctkv", "cache_mode")
    check(q_nope.dim() == 3 and q_rope.dim() == 3 and q_nope.shape[:2] == q_rope.shape[:2],
          f"{fn}: q_nope and q_rope should be [num_tokens, num_heads, d] with the same tokens and heads, got "
          f"{list(q_nope.shape)} and {list(q_rope.shape)}.")
    _heads(fn, q_headnum, kv_headnum, q_nope.shape[1])
    _check_dtype(fn, "q_rope", q_rope, _HALVES)
    int8 = cache_mode == "int8_nzcache"
    if int8:
        _check_dtype(fn, "q_nope", q_nope, (torch.int8,))
        _check_dtype(fn, "ctkv", ctkv, (torch.int8,))
        check(qk_descale is not None and pv_descale is not None and qk_descale.numel() == q_headnum
              and pv_descale.numel() == q_headnum,
              f"{fn}: cache_mode 'int8_nzcache' needs qk_descale and pv_descale of num_heads ({q_headnum}) values.")
    else:
        _check_same_dtype(fn, "q_nope", q_nope, q_rope, "q_rope")
        _check_same_dtype(fn, "ctkv", ctkv, q_rope, "q_rope")
    _check_same_dtype(fn, "k_rope", k_rope, q_rope, "q_rope")
    dn, dr = q_nope.shape[2], q_rope.shape[2]
    cl = _layout(fn, "ctkv", ctkv, kv_headnum, dn)
    rl = _layout(fn, "k_rope", k_rope, kv_headnum, dr)
    check(cl[1] == rl[1] and ctkv.shape[0] == k_rope.shape[0],
          f"{fn}: ctkv {list(ctkv.shape)} and k_rope {list(k_rope.shape)} should have the same blocks.")
    lens = _ints(fn, "context_lens", context_lens)
    batch = len(lens)
    _check_block_table(fn, block_tables, batch)
    if calc_type == "calc_type_spec":
        check(qseqlen is not None, f"{fn}: calc_type 'calc_type_spec' needs qseqlen.")
        q_lens = _ints(fn, "qseqlen", qseqlen)
        check(len(q_lens) == batch, f"{fn}: qseqlen has {len(q_lens)} entries for {batch} sequences.")
    else:
        q_lens = [1] * batch
    check(sum(q_lens) == q_nope.shape[0], f"{fn}: {sum(q_lens)} query tokens expected (context_lens / qseqlen), "
                                          f"q_nope has {q_nope.shape[0]}.")
    for b, (ql, kvl) in enumerate(zip(q_lens, lens)):
        check(0 <= ql <= kvl or kvl == 0, f"{fn}: sequence {b} has {ql} query tokens and a context of {kvl}.")
    bias = None
    if mask_type == "mask_type_spec":
        check(mask is not None, f"{fn}: mask_type 'mask_type_spec' needs mask.")
        bias = _token_rows_bias(fn, mask, q_nope.shape[0], q_nope.device)
    _check_tables(fn, block_tables, lens, cl[1], ctkv.shape[0])
    t, h = q_nope.shape[:2]
    out = torch.zeros(t, h, dn, dtype=torch.float32, device=q_nope.device)
    lse = torch.zeros(t, h, dtype=torch.float32, device=q_nope.device)
    if calc_type != "calc_type_spec" and not int8 and bias is None:  # decode: one query per sequence, vectorised
        lens_t = torch.tensor(lens, dtype=torch.int64)
        q = torch.cat((q_nope, q_rope), dim=-1)
        b = q.shape[0]
        width = block_tables.shape[1]
        table = block_tables[:b].long().to(q.device)
        lt = lens_t.to(q.device)
        used = torch.arange(width, device=q.device).view(1, -1) * cl[1] < lt.view(-1, 1)
        ids = torch.where(used & (table >= 0) & (table < ctkv.shape[0]), table, torch.zeros_like(table))
        kn = _gather(ctkv, cl, kv_headnum, ids).reshape(b, -1, kv_headnum, dn)
        kr = _gather(k_rope, rl, kv_headnum, ids).reshape(b, -1, kv_headnum, dr)
        k = torch.cat((kn, kr), dim=-1).transpose(1, 2)
        keep = (torch.arange(k.shape[2], device=q.device).view(1, -1) < lt.view(-1, 1)).view(b, 1, 1, -1)
        o, ls = _attend(q.unsqueeze(2), k, kn.transpose(1, 2), qk_scale, None, keep)
        out, lse = o.squeeze(2), ls.squeeze(2)
    else:
        start = 0
        for bi, (ql, kvl) in enumerate(zip(q_lens, lens)):
            if ql == 0:
                continue
            if kvl == 0:
                start += ql
                continue
            row = block_tables[bi].to(ctkv.device)
            kn = _sequence_kv(ctkv, cl, kv_headnum, row, kvl)
            kr = _sequence_kv(k_rope, rl, kv_headnum, row, kvl)
            keep = _causal_keep(ql, kvl, q_nope.device)
            b_ = bias(bi, start, ql, kvl) if bias is not None else None
            qn, qr = q_nope[start:start + ql], q_rope[start:start + ql]
            if int8:
                keep4 = keep.view(1, 1, ql, kvl)
                if b_ is not None:
                    keep4 = keep4 & (b_.view(1, -1, ql, kvl) > -1e4)
                extra = _scores(qr.float().transpose(0, 1).unsqueeze(0), kr.float().transpose(0, 1).unsqueeze(0))
                res = _attend_int8(qn.transpose(0, 1).unsqueeze(0), kn.transpose(0, 1).unsqueeze(0),
                                   kn.transpose(0, 1).unsqueeze(0), qk_scale,
                                   _scale_value(qk_descale).to(qn.device), _scale_value(pv_descale).to(qn.device),
                                   keep4, extra=extra)
                out[start:start + ql] = res[0].transpose(0, 1)
            else:
                o, ls = _one(torch.cat((qn, qr), dim=-1), torch.cat((kn, kr), dim=-1), kn, qk_scale, b_, keep)
                out[start:start + ql] = o
                lse[start:start + ql] = ls.transpose(0, 1)
            start += ql
        if int8 and want_lse:
            _unsupported(fn, "the lse of cache_mode 'int8_nzcache'", "the int8 kernel's softmax sum is not emulated")
    return out.to(q_rope.dtype), lse.unsqueeze(-1).to(q_rope.dtype)


def npu_multi_head_latent_attention(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum, qk_scale,
                                    kv_headnum, *, mask=None, qseqlen=None, qk_descale=None, pv_descale=None,
                                    mask_type=None, calc_type=None, cache_mode=None):
    """MLA decode over a paged latent cache: scores q_nope . ctkv + q_rope . k_rope
    (times qk_scale), values ctkv; output [tokens, heads, 512] in q_rope's dtype."""
    out, _ = _mla(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum, qk_scale, kv_headnum, mask,
                  qseqlen, qk_descale, pv_descale, mask_type, calc_type, cache_mode, False)
    return out


def npu_multi_head_latent_attention_out(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum,
                                        qk_scale, kv_headnum, *, mask=None, qseqlen=None, qk_descale=None,
                                        pv_descale=None, mask_type=None, calc_type=None, cache_mode=None, output):
    out, _ = _mla(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum, qk_scale, kv_headnum, mask,
                  qseqlen, qk_descale, pv_descale, mask_type, calc_type, cache_mode, False)
    check(output.shape == out.shape, f"npu_multi_head_latent_attention: output should have shape "
                                     f"{list(out.shape)}, got {list(output.shape)}.")
    output.copy_(out)
    return output


def npu_multi_head_latent_attention_lse(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum,
                                        qk_scale, kv_headnum, return_lse, *, mask=None, qseqlen=None,
                                        qk_descale=None, pv_descale=None, mask_type=None, calc_type=None,
                                        cache_mode=None, workspace=None):
    """As above, and with return_lse the log-sum-exp of each row's scaled scores,
    [tokens, heads, 1] (None without)."""
    _check_workspace("npu_multi_head_latent_attention", workspace)
    out, lse = _mla(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum, qk_scale, kv_headnum, mask,
                    qseqlen, qk_descale, pv_descale, mask_type, calc_type, cache_mode, return_lse)
    return out, (lse if return_lse else None)


def npu_multi_head_latent_attention_lse_out(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum,
                                            qk_scale, kv_headnum, return_lse, *, mask=None, qseqlen=None,
                                            qk_descale=None, pv_descale=None, mask_type=None, calc_type=None,
                                            cache_mode=None, workspace=None, output, lse):
    fn = "npu_multi_head_latent_attention"
    _check_workspace(fn, workspace)
    out, ls = _mla(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum, qk_scale, kv_headnum, mask,
                   qseqlen, qk_descale, pv_descale, mask_type, calc_type, cache_mode, return_lse)
    check(output.shape == out.shape, f"{fn}: output should have shape {list(out.shape)}, got {list(output.shape)}.")
    output.copy_(out)
    if return_lse:
        check(lse.shape == ls.shape, f"{fn}: lse should have shape {list(ls.shape)}, got {list(lse.shape)}.")
        lse.copy_(ls)
    return output, lse


def _npu_multi_head_latent_attention_get_workspace_lse(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens,
                                                       q_headnum, qk_scale, kv_headnum, return_lse, *, mask=None,
                                                       qseqlen=None, qk_descale=None, pv_descale=None,
                                                       mask_type=None, calc_type=None, cache_mode=None):
    fn = "_npu_multi_head_latent_attention_get_workspace"
    _mode(_MLA_MASKS, mask_type, "undefined", "mask_type")
    _mode(_MLA_CALCS, calc_type, "calc_type_undefined", "calc_type")
    _mode(_MLA_CACHES, cache_mode, "krope_ctkv", "cache_mode")
    check(q_nope.dim() == 3, f"{fn}: q_nope should be [num_tokens, num_heads, 512], got {list(q_nope.shape)}.")
    _heads(fn, q_headnum, kv_headnum, q_nope.shape[1])
    return _workspace(q_nope, q_headnum, q_nope.shape[2])


_RING_KERNELS = ("kernel_type_default", "kernel_type_high_precision")
_RING_MASKS = ("no_mask", "mask_type_triu")
_RING_CALCS = ("calc_type_default", "calc_type_first_ring")


def _ring_mla(q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, kv_head_num, pre_out, prev_lse,
              qk_scale, kernel_type, mask_type, input_layout, calc_type):
    fn = "npu_ring_mla"
    _mode(dict.fromkeys(_RING_KERNELS), kernel_type, "kernel_type_high_precision", "kernel_type")
    mask_type = _mode(dict.fromkeys(_RING_MASKS), mask_type, "no_mask", "mask_type")
    _mode({"type_bsnd": 0}, input_layout, "type_bsnd", "input_layout")
    calc_type = _mode(dict.fromkeys(_RING_CALCS), calc_type, "calc_type_first_ring", "calc_type")
    check(seqlen.device.type == "cpu",
          "Expected CPU tensor, please check whether the input seqlen tensor device is correct.")
    check(seqlen.dtype in _INTS and seqlen.dim() in (1, 2) and (seqlen.dim() == 1 or seqlen.shape[0] == 2),
          f"{fn}: seqlen should be an int32 tensor of shape [batch] or [2, batch], got {seqlen.dtype} "
          f"{list(seqlen.shape)}.")
    _heads(fn, head_num, kv_head_num)
    for name, t, heads in (("q_nope", q_nope, head_num), ("q_rope", q_rope, head_num), ("k_nope", k_nope, kv_head_num),
                           ("k_rope", k_rope, kv_head_num), ("value", value, kv_head_num)):
        check(t.dim() == 3 and t.shape[1] == heads,
              f"{fn}: {name} should be [tokens, {heads}, d], got shape {list(t.shape)}.")
    _check_dtype(fn, "q_nope", q_nope, _HALVES)
    for name, t in (("q_rope", q_rope), ("k_nope", k_nope), ("k_rope", k_rope), ("value", value)):
        _check_same_dtype(fn, name, t, q_nope, "q_nope")
    check(q_nope.shape[2] == k_nope.shape[2] and q_rope.shape[2] == k_rope.shape[2],
          f"{fn}: q_nope / k_nope and q_rope / k_rope should have the same head sizes.")
    check(q_nope.shape[0] == q_rope.shape[0] and k_nope.shape[0] == k_rope.shape[0] == value.shape[0],
          f"{fn}: token counts of q_nope / q_rope or k_nope / k_rope / value differ.")
    if mask_type == "mask_type_triu":
        check(mask.is_floating_point() and mask.dim() >= 2, f"{fn}: mask should be a floating [512, 512] triu mask, "
                                                            f"got {mask.dtype} {list(mask.shape)}.")
    if seqlen.dim() == 1:
        q_lens = kv_lens = [int(x) for x in seqlen.tolist()]
    else:
        q_lens, kv_lens = [int(x) for x in seqlen[0].tolist()], [int(x) for x in seqlen[1].tolist()]
    check(sum(q_lens) == q_nope.shape[0] and sum(kv_lens) == k_nope.shape[0],
          f"{fn}: seqlen gives {sum(q_lens)} query and {sum(kv_lens)} key tokens; the inputs have "
          f"{q_nope.shape[0]} and {k_nope.shape[0]}.")
    t, dv = q_nope.shape[0], value.shape[2]
    if calc_type == "calc_type_default":
        check(pre_out is not None and prev_lse is not None, f"{fn}: calc_type 'calc_type_default' needs pre_out and "
                                                            f"prev_lse.")
        check(list(pre_out.shape) == [t, head_num, dv] and list(prev_lse.shape) == [head_num, t],
              f"{fn}: pre_out should be {[t, head_num, dv]} and prev_lse {[head_num, t]}, got "
              f"{list(pre_out.shape)} and {list(prev_lse.shape)}.")
    out = torch.zeros(t, head_num, dv, dtype=torch.float32, device=q_nope.device)
    lse = torch.zeros(head_num, t, dtype=torch.float32, device=q_nope.device)
    qs = ks = 0
    for ql, kvl in zip(q_lens, kv_lens):
        check(kvl == 0 or kvl >= ql, f"{fn}: a sequence has {ql} query tokens but {kvl} keys.")
        if ql and kvl:
            q = torch.cat((q_nope[qs:qs + ql], q_rope[qs:qs + ql]), dim=-1)
            k = torch.cat((k_nope[ks:ks + kvl], k_rope[ks:ks + kvl]), dim=-1)
            keep = _causal_keep(ql, kvl, q.device) if mask_type == "mask_type_triu" else None
            o, ls = _one(q, k, value[ks:ks + kvl], qk_scale, None, keep)
            if calc_type == "calc_type_default":
                po, pl = pre_out[qs:qs + ql].float(), prev_lse[:, qs:qs + ql].float()
                new = torch.logaddexp(pl, ls)
                wo = torch.exp(pl - new).transpose(0, 1).unsqueeze(-1)
                wn = torch.exp(ls - new).transpose(0, 1).unsqueeze(-1)
                o, ls = po * wo + o * wn, new
            out[qs:qs + ql] = o
            lse[:, qs:qs + ql] = ls
        qs += ql
        ks += kvl
    return out.to(q_nope.dtype), lse


def npu_ring_mla(q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, kv_head_num, *, pre_out=None,
                 prev_lse=None, qk_scale=1, kernel_type=None, mask_type=None, input_layout=None, calc_type=None):
    """Ring attention chunk: per sequence, softmax((q_nope|q_rope).(k_nope|k_rope)^T *
    qk_scale) . value (causal with mask_type_triu) and its lse [heads, tokens];
    calc_type_default merges with the previous chunk (pre_out, prev_lse)."""
    return _ring_mla(q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, kv_head_num, pre_out, prev_lse,
                     qk_scale, kernel_type, mask_type, input_layout, calc_type)


def npu_ring_mla_out(q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, kv_head_num, *, pre_out=None,
                     prev_lse=None, qk_scale=1, kernel_type=None, mask_type=None, input_layout=None, calc_type=None,
                     output, softmax_lse):
    fn = "npu_ring_mla"
    o, ls = _ring_mla(q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, kv_head_num, pre_out, prev_lse,
                      qk_scale, kernel_type, mask_type, input_layout, calc_type)
    check(output.shape == o.shape and softmax_lse.shape == ls.shape,
          f"{fn}: output should be {list(o.shape)} and softmax_lse {list(ls.shape)}, got {list(output.shape)} and "
          f"{list(softmax_lse.shape)}.")
    output.copy_(o)
    softmax_lse.copy_(ls)
    return output, softmax_lse


# --- MLA preprocessing ---------------------------------------------------------------------------------------

def _weight_nd(fn, name, w, k):
    """A weight [N, K] given ND or NZ ([1, K / c0, N, c0])."""
    if w.dim() == 4:
        check(w.shape[0] == 1 and w.shape[1] * w.shape[3] == k,
              f"{fn}: {name} (NZ) should be [1, {k} / c0, N, c0], got shape {list(w.shape)}.")
        return _nz_to_nd(w)[0]
    check(w.dim() == 2 and w.shape[1] == k, f"{fn}: {name} should be [N, {k}] (or NZ), got shape {list(w.shape)}.")
    return w


def _quant_linear(fn, stage, h, w, descale, bias, quant_scale, quant_offset, per_token, dtype):
    """int8 quantisation of h, int8 matmul with w^T (exact), + bias, * descale
    (per output channel; * the per-token scale when dynamic), in ``dtype``."""
    _check_dtype(fn, f"the stage-{stage} weight", w, (torch.int8,))
    check(descale.numel() == w.shape[0], f"{fn}: descale{stage} should hold {w.shape[0]} values, got "
                                         f"{descale.numel()}.")
    if per_token:
        tok = h.abs().amax(dim=-1, keepdim=True) / 127.0
        tok = torch.where(tok > 0, tok, torch.ones_like(tok))
        xq = _quantize(h, tok)
    else:
        check(quant_scale is not None and quant_offset is not None,
              f"{fn}: quant_mode 'per_tensor_quant_asymm' needs quant_scale{stage} and quant_offset{stage}.")
        xq = _quantize(h, quant_scale.reshape(-1)[0].float(), quant_offset.reshape(-1)[0].float())
    acc = xq.double() @ w.to(h.device).double().t()
    if bias is not None and not per_token:
        check(bias.numel() == w.shape[0], f"{fn}: bias{stage} should hold {w.shape[0]} values.")
        acc = acc + bias.reshape(-1).to(h.device).double()
    out = acc.float() * _scale_value(descale.reshape(-1)).to(h.device)
    if per_token:
        out = out * tok
    return out.to(dtype).float()


def _rope_half(x, cos, sin):
    """Rotate-half rope (rotary coefficient 2): x * cos + rotate_half(x) * sin, cos / sin
    [T, d] broadcast over the heads of x [T, H, d]."""
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    if x.dim() == 3:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return x * cos + rot * sin


def _mla_preprocess(input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin, wuk,
                    kv_cache, kv_cache_rope, slotmapping, quant_scale0, quant_offset0, bias0, quant_scale1,
                    quant_offset1, bias1, ctkv_scale, q_nope_scale, cache_mode, quant_mode):
    fn = "npu_mla_preprocess"
    cache_mode = _mode(_MLA_CACHES, cache_mode, "krope_ctkv", "cache_mode")
    quant_mode = _mode({"per_tensor_quant_asymm": 0, "per_token_quant_symm": 1}, quant_mode, "per_token_quant_symm",
                       "quant_mode")
    per_token = quant_mode == "per_token_quant_symm"
    _check_dtype(fn, "input", input, _HALVES)
    check(input.dim() == 2, f"{fn}: input should be [tokenNum, hidden], got shape {list(input.shape)}.")
    dtype = input.dtype
    t, hidden = input.shape
    for name, g in (("gamma0", gamma0), ("beta0", beta0), ("cos", cos), ("sin", sin), ("gamma1", gamma1),
                    ("beta1", beta1), ("gamma2", gamma2), ("wuk", wuk)):
        _check_same_dtype(fn, name, g, input, "input")
    check(gamma0.numel() == hidden and beta0.numel() == hidden,
          f"{fn}: gamma0 and beta0 should hold the hidden size's {hidden} values.")
    w0 = _weight_nd(fn, "wdqkv", wdqkv, hidden)
    d_kv = gamma2.numel()
    d_rope = cos.shape[-1]
    check(cos.shape == sin.shape and list(cos.shape) == [t, d_rope] and d_rope % 2 == 0,
          f"{fn}: cos and sin should be [tokenNum, rope_dim], got {list(cos.shape)} and {list(sin.shape)}.")
    q_lora = w0.shape[0] - d_kv - d_rope
    check(q_lora > 0 and gamma1.numel() == q_lora and beta1.numel() == q_lora,
          f"{fn}: wdqkv's {w0.shape[0]} outputs should be kv ({d_kv}) + rope ({d_rope}) + q ({gamma1.numel()}).")
    w1 = _weight_nd(fn, "wuq", wuq, q_lora)
    if wuk.dim() == 4:
        wuk_nd = _nz_to_nd(wuk)
    else:
        check(wuk.dim() == 3, f"{fn}: wuk should be [headNum, 128, 512] (or NZ), got shape {list(wuk.shape)}.")
        wuk_nd = wuk
    heads, d_nope = wuk_nd.shape[0], wuk_nd.shape[1]
    check(wuk_nd.shape[2] == d_kv and w1.shape[0] == heads * (d_nope + d_rope),
          f"{fn}: wuq ({w1.shape[0]} outputs) and wuk ({list(wuk.shape)}) should give {heads} heads of "
          f"{d_nope} + {d_rope} and a latent size {d_kv}.")
    check(slotmapping.dtype in _INTS and slotmapping.numel() == t,
          f"{fn}: slotmapping should be int32 [tokenNum = {t}], got {slotmapping.dtype} {list(slotmapping.shape)}.")
    int8 = cache_mode == "int8_nzcache"
    if int8:
        check(ctkv_scale is not None and q_nope_scale is not None,
              f"{fn}: cache_mode 'int8_nzcache' needs ctkv_scale and q_nope_scale.")
        _check_dtype(fn, "kv_cache", kv_cache, (torch.int8,))
    else:
        _check_same_dtype(fn, "kv_cache", kv_cache, input, "input")
    _check_same_dtype(fn, "kv_cache_rope", kv_cache_rope, input, "input")

    x = _rms(input, 1e-5) * gamma0.reshape(-1).float() + beta0.reshape(-1).float()
    x = x.to(dtype).float()
    down = _quant_linear(fn, 0, x, w0, descale0, bias0, quant_scale0, quant_offset0, per_token, dtype)
    kv, q_down = down[:, :d_kv + d_rope], down[:, d_kv + d_rope:]
    h1 = (_rms(q_down, 1e-5) * gamma1.reshape(-1).float() + beta1.reshape(-1).float()).to(dtype).float()
    up = _quant_linear(fn, 1, h1, w1, descale1, bias1, quant_scale1, quant_offset1, per_token, dtype)
    up = up.view(t, heads, d_nope + d_rope)
    q_nope, q_pe = up[..., :d_nope], up[..., d_nope:]
    cosf, sinf = cos.float(), sin.float()
    q_out0 = torch.einsum("thd,hdk->thk", q_nope, wuk_nd.float()).to(dtype).float()
    q_out1 = _rope_half(q_pe, cosf, sinf).to(dtype)
    ctkv = (_rms(kv[:, :d_kv], 1e-5) * gamma2.reshape(-1).float()).to(dtype)
    krope = _rope_half(kv[:, d_kv:], cosf, sinf).to(dtype)
    if int8:
        q_out0 = _quantize(q_out0, q_nope_scale.reshape(1, -1, 1).float().to(q_out0.device)).to(torch.int8)
        ctkv = _quantize(ctkv.float(), ctkv_scale.reshape(-1)[0].float()).to(torch.int8)
    else:
        q_out0 = q_out0.to(dtype)
    return q_out0, ctkv, q_out1, krope


def _write_latent(fn, ctkv, krope, kv_cache, kv_cache_rope, slotmapping, cache_mode):
    nz = cache_mode != "krope_ctkv"
    _write_slots(fn, "kv", ctkv, kv_cache, slotmapping, nz or _cache_is_nz(kv_cache, ctkv))
    _write_slots(fn, "kv_rope", krope, kv_cache_rope, slotmapping, nz or _cache_is_nz(kv_cache_rope, krope))


def npu_mla_preprocess(input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin, wuk,
                       kv_cache, kv_cache_rope, slotmapping, *, quant_scale0=None, quant_offset0=None, bias0=None,
                       quant_scale1=None, quant_offset1=None, bias1=None, ctkv_scale=None, q_nope_scale=None,
                       cache_mode=None, quant_mode=None):
    """DeepSeek MLA's input chain: rmsnorm-quant, int8 down projection (wdqkv: kv
    latent, k rope, q latent), q: rmsnorm-quant, int8 up projection, nope part times
    wuk (q_out0), rope part rotated (q_out1); kv: latent rmsnorm (-> kv_cache) and k
    rope rotated (-> kv_cache_rope) written at slotmapping. Returns (q_out0, the
    updated kv_cache copy, q_out1, the updated kv_cache_rope copy)."""
    fn = "npu_mla_preprocess"
    q_out0, ctkv, q_out1, krope = _mla_preprocess(
        input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin, wuk, kv_cache,
        kv_cache_rope, slotmapping, quant_scale0, quant_offset0, bias0, quant_scale1, quant_offset1, bias1,
        ctkv_scale, q_nope_scale, cache_mode, quant_mode)
    kv0, kv1 = kv_cache.clone(), kv_cache_rope.clone()
    _write_latent(fn, ctkv, krope, kv0, kv1, slotmapping, cache_mode or "krope_ctkv")
    return q_out0, kv0, q_out1, kv1


def npu_mla_preprocess_out(input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin,
                           wuk, kv_cache, kv_cache_rope, slotmapping, *, quant_scale0=None, quant_offset0=None,
                           bias0=None, quant_scale1=None, quant_offset1=None, bias1=None, ctkv_scale=None,
                           q_nope_scale=None, cache_mode=None, quant_mode=None, q_out0, kv_cache_out0, q_out1,
                           kv_cache_out1):
    """As npu_mla_preprocess, writing q_out0 / q_out1 and the new tokens' slots of
    kv_cache_out0 / kv_cache_out1 (usually kv_cache / kv_cache_rope themselves)."""
    fn = "npu_mla_preprocess"
    q0, ctkv, q1, krope = _mla_preprocess(
        input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin, wuk, kv_cache,
        kv_cache_rope, slotmapping, quant_scale0, quant_offset0, bias0, quant_scale1, quant_offset1, bias1,
        ctkv_scale, q_nope_scale, cache_mode, quant_mode)
    check(q_out0.shape == q0.shape and q_out0.dtype == q0.dtype and q_out1.shape == q1.shape,
          f"{fn}: q_out0 should be {q0.dtype} {list(q0.shape)} and q_out1 {list(q1.shape)}, got {q_out0.dtype} "
          f"{list(q_out0.shape)} and {list(q_out1.shape)}.")
    check(kv_cache_out0.shape == kv_cache.shape and kv_cache_out1.shape == kv_cache_rope.shape,
          f"{fn}: kv_cache_out0 / kv_cache_out1 should have kv_cache's / kv_cache_rope's shapes.")
    q_out0.copy_(q0)
    q_out1.copy_(q1)
    _write_latent(fn, ctkv, krope, kv_cache_out0, kv_cache_out1, slotmapping, cache_mode or "krope_ctkv")
    return q_out0, kv_cache_out0, q_out1, kv_cache_out1


# --- registration (op-plugin's schemas, op_plugin/ops/atb/*.cpp) --------------------------------------------

_PA = ("Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, int num_heads, float scale_value, "
       "Tensor block_table, Tensor context_lens")
_PA_V2 = ("Tensor query, Tensor key_cache, Tensor block_table, SymInt[] context_lens, *, Tensor? value_cache=None, "
          "Tensor? mask=None, int num_kv_heads=0, int num_heads=0, float scale_value=1.0, int mask_type=0")
_MLA_ARGS = ("Tensor q_nope, Tensor q_rope, Tensor ctkv, Tensor k_rope, Tensor block_tables, SymInt[] context_lens, "
             "int q_headnum, float qk_scale, int kv_headnum")
_MLA_KW = ("Tensor? mask=None, SymInt[]? qseqlen=None, Tensor? qk_descale=None, Tensor? pv_descale=None, "
           "str? mask_type=None, str? calc_type=None, str? cache_mode=None")
_FATD = ("Tensor x, Tensor add_num, *, Tensor? mapping_num=None, Tensor? mapping_table=None, "
         "str? activation_type=None, int group_num=1, int group_topk=1, int n=1, int k=1,  bool is_norm=True, "
         "float scale=1, bool enable_expert_mapping=False")
_MLAPO = ("Tensor input, Tensor gamma0, Tensor beta0, Tensor wdqkv, Tensor descale0, Tensor gamma1, Tensor beta1, "
          "Tensor wuq, Tensor descale1, Tensor gamma2, Tensor cos, Tensor sin, Tensor wuk, Tensor kv_cache, "
          "Tensor kv_cache_rope, Tensor slotmapping, *,  Tensor? quant_scale0=None, Tensor? quant_offset0=None, "
          "Tensor? bias0=None, Tensor? quant_scale1=None, Tensor? quant_offset1=None, Tensor? bias1=None, "
          "Tensor? ctkv_scale=None, Tensor? q_nope_scale=None, str? cache_mode=None, str? quant_mode=None")
_RING = ("Tensor q_nope, Tensor q_rope, Tensor k_nope, Tensor k_rope, Tensor value, Tensor mask, Tensor seqlen, "
         "int head_num, int kv_head_num, *, Tensor? pre_out=None, Tensor? prev_lse=None, float qk_scale=1, "
         "str? kernel_type=None, str? mask_type=None, str? input_layout=None, str? calc_type=None")
_PCL = "Tensor key_cache, Tensor value_cache, Tensor block_table, Tensor context_lens, *, Tensor? seq_starts=None, " \
       "bool cumsum=False"
_SAPE = ("Tensor query, Tensor key, Tensor value, Tensor block_tables, SymInt[] seqlen, SymInt[] kv_seqlen, "
         "int q_headnum, float qk_scale, int kv_headnum,*, Tensor? mask=None, Tensor? slopes=None, str? mask_type=None")

SCHEMAS = [
    ("_npu_paged_attention_quant(Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, int num_heads, "
     "float scale_value, Tensor block_table, Tensor context_lens, int quant_type, int outdata_type, Tensor k_descale, "
     "Tensor v_descale, Tensor(a!) out) -> ()", _npu_paged_attention_quant),
    (f"npu_fused_add_topk_div({_FATD}) -> (Tensor, Tensor)", npu_fused_add_topk_div),
    (f"npu_fused_add_topk_div.out({_FATD}, Tensor(a!) y, Tensor(b!) indices) -> (Tensor(a!), Tensor(b!))",
     npu_fused_add_topk_div_out),
    ("_npu_group_topk(Tensor self, int k=0, int group_num=1, int n=1) -> ()", _npu_group_topk),
    ("_npu_matmul_add_fp32(Tensor x, Tensor weight, Tensor(a!) C) -> ()", _npu_matmul_add_fp32),
    (f"npu_mla_preprocess({_MLAPO}) -> (Tensor, Tensor, Tensor, Tensor)", npu_mla_preprocess),
    (f"npu_mla_preprocess.out({_MLAPO}, Tensor(a!) q_out0, Tensor(b!) kv_cache_out0, Tensor(c!) q_out1, "
     "Tensor(d!) kv_cache_out1) -> (Tensor(a!), Tensor(b!), Tensor(c!), Tensor(d!))", npu_mla_preprocess_out),
    (f"npu_multi_head_latent_attention({_MLA_ARGS}, *, {_MLA_KW}) -> Tensor", npu_multi_head_latent_attention),
    (f"npu_multi_head_latent_attention.out({_MLA_ARGS}, *, {_MLA_KW}, Tensor(a!) output) -> Tensor(a!)",
     npu_multi_head_latent_attention_out),
    (f"npu_multi_head_latent_attention.lse({_MLA_ARGS}, bool return_lse, *, {_MLA_KW}, Tensor? workspace=None) "
     "-> (Tensor, Tensor)", npu_multi_head_latent_attention_lse),
    (f"_npu_multi_head_latent_attention_get_workspace.lse({_MLA_ARGS}, bool return_lse, *, {_MLA_KW}) -> Tensor",
     _npu_multi_head_latent_attention_get_workspace_lse),
    (f"npu_multi_head_latent_attention.lse_out({_MLA_ARGS}, bool return_lse, *, {_MLA_KW}, Tensor? workspace=None, "
     "Tensor(a!) output, Tensor(b!) lse) -> (Tensor(a!), Tensor(b!))", npu_multi_head_latent_attention_lse_out),
    (f"_npu_paged_attention({_PA}, Tensor(a!) out, *,Tensor? workspace=None) -> ()", _npu_paged_attention),
    (f"_npu_paged_attention_get_workspace({_PA}, Tensor(a!) out) -> Tensor", _npu_paged_attention_get_workspace),
    (f"_npu_paged_attention_v2.out({_PA_V2}, Tensor? workspace=None, Tensor(a!) out) -> Tensor(a!)",
     _npu_paged_attention_v2_out),
    (f"_npu_paged_attention_v2_get_workspace({_PA_V2}, Tensor(a!) out) -> Tensor",
     _npu_paged_attention_v2_get_workspace),
    ("_npu_paged_attention_mla(Tensor query, Tensor key_cache, int num_kv_heads, int num_heads, float scale_value, "
     "Tensor block_table, Tensor context_lens, int mla_vheadsize, Tensor(a!) out) -> ()", _npu_paged_attention_mla),
    ("_npu_paged_attention_splitfuse(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, "
     "Tensor context_lens, Tensor mask, Tensor seq_len, int num_kv_heads, int num_heads, float scale_value, "
     "Tensor(a!) out) -> ()", _npu_paged_attention_splitfuse),
    ("_npu_paged_attention_splitfuse_v2(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, "
     "Tensor context_lens, Tensor mask, Tensor seq_len, int num_kv_heads, int num_heads, float scale_value, *, "
     "int ? mask_type = 5, Tensor(a!) out) -> ()", _npu_paged_attention_splitfuse_v2),
    (f"npu_paged_cache_load.out({_PCL}, Tensor(a!) key, Tensor(b!) value) -> (Tensor(a!), Tensor(b!))",
     npu_paged_cache_load_out),
    (f"npu_paged_cache_load({_PCL}) -> (Tensor, Tensor)", npu_paged_cache_load),
    ("_npu_quantize_per_tensor(Tensor x, Tensor scale, Tensor zero_point, Tensor(a!) y) -> ()",
     _npu_quantize_per_tensor),
    ("_npu_quant_rms_norm(Tensor self, Tensor gamma, Tensor beta, Tensor scale, Tensor offset, Tensor(a!) output, "
     "float eps=1e-05) -> ()", _npu_quant_rms_norm),
    ("_npu_reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
     "Tensor slot_indices) -> ()", _npu_reshape_and_cache),
    ("_npu_reshape_and_cache_siso(Tensor key, Tensor(a!) key_cache, Tensor slot_indices) -> ()",
     _npu_reshape_and_cache_siso),
    (f"npu_ring_mla({_RING}) -> (Tensor, Tensor)", npu_ring_mla),
    (f"npu_ring_mla.out({_RING}, Tensor(a!) output, Tensor(b!) softmax_lse) -> (Tensor(a!), Tensor(b!))",
     npu_ring_mla_out),
    ("_npu_rotary_embedding(Tensor positions, Tensor(a!) query, Tensor(b!) key, int head_size, Tensor cos_sin_cache, "
     "bool is_neox_style) -> ()", _npu_rotary_embedding),
    ("_npu_flash_attention(Tensor query, Tensor key, Tensor value, Tensor mask, Tensor seq_len, float scale_value, "
     "int num_heads, int num_kv_heads, Tensor(a!) out) -> ()", _npu_flash_attention),
    ("_npu_flash_attention_v2.out(Tensor query, Tensor key, Tensor value, SymInt[] seq_len, *, Tensor? mask=None, "
     "Tensor? slopes=None, int kernel_type=0, int mask_type=2, float scale_value=1, int num_heads=0, "
     "int num_kv_heads=0, Tensor(a!) out) -> Tensor(a!)", _npu_flash_attention_v2_out),
    ("_npu_flash_attention_v3(Tensor query, Tensor key, Tensor value, Tensor mask, Tensor seq_len, float scale_value, "
     "int num_heads, int num_kv_heads, *, int ? mask_type = 3, Tensor(a!) out) -> ()", _npu_flash_attention_v3),
    ("_npu_flash_attention_prefix_v2.out(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, "
     "Tensor mask, SymInt[] seq_len, SymInt[] context_lens, *, Tensor? slopes=None, int kernel_type=1, "
     "int mask_type=3, int num_kv_heads=0, int num_heads=0, float scale_value=1, Tensor(a!) out) -> Tensor(a!)",
     _npu_flash_attention_prefix_v2_out),
    (f"npu_self_attention_prefix_encoder({_SAPE}) -> Tensor", npu_self_attention_prefix_encoder),
    (f"npu_self_attention_prefix_encoder.out({_SAPE}, Tensor(a!) output) -> Tensor(a!)",
     npu_self_attention_prefix_encoder_out),
    ("_npu_flash_attention_qlens(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, Tensor mask, "
     "Tensor seq_len, Tensor context_lens, int num_kv_heads, int num_heads, float scale_value, Tensor(a!) out) -> ()",
     _npu_flash_attention_qlens),
    ("_npu_flash_attention_unpad(Tensor query, Tensor key, Tensor value, Tensor seq_len, float scale_value, "
     "int num_heads, int num_kv_heads, Tensor(a!) out) -> ()", _npu_flash_attention_unpad),
    ("_npu_flash_attention_unpad_v2(Tensor query, Tensor key, Tensor value, Tensor seq_len, float scale_value, "
     "int num_heads, int num_kv_heads, *, int ? kernel_type = 0, Tensor(a!) out) -> ()",
     _npu_flash_attention_unpad_v2),
]

for _schema, _fn in SCHEMAS:
    define_atb(_schema, _fn)
del _schema, _fn


def _register_atb_extensions():
    """Real torch_npu loads libop_plugin_atb.so here; vNPU defined the operators at import."""
    return None

