"""Inference caches and recurrent state (``torch.ops.npu``): the fused ops that
write keys / values into a KV cache on the way, the linear-attention
recurrences with their state caches, and the small per-step helpers of
serving engines.

KV-cache writes (slot s of a paged cache with block size bs is offset s % bs of
block s // bs; a negative slot writes nothing; a slot beyond the cache raises):

- npu_kv_rmsnorm_rope_cache (+ _v2, _v2_functional): DeepSeek MLA's kv path.
  kv (B, 1, S, rms + rope) splits into the latent part (RMSNorm with gamma) and
  the rope part (interleaved pairs de-interleaved, then ``x cos + rotate_half(x)
  sin``); with ``v`` (the V2 kernel) the whole of kv is normalised, RoPE
  applies to its first ``rope`` features and ``v`` goes to ckv_cache. Cache
  modes Norm (k_cache (B, 1, L, D), index (B, S) per-batch positions),
  PA / PA_BNSD (caches (blocks, bs, 1, D), index = slot per token), PA_NZ (same
  shape, the bytes in FRACTAL_NZ order: (blocks, D / d0, bs, d0), d0 = 32 bytes
  / element size), PA_BLK_BNSD / PA_BLK_NZ (index = the start slot of each
  block of bs tokens). Quantised caches: ``round(x * scale)`` saturated to int8
  (or clamped and cast for a float8 cache); the offsets raise "not supported"
  as on Ascend. The k_rope / c_kv outputs are always computed (is_output_kv only
  matters to the kernel's write traffic).
- npu_qkv_rms_norm_rope_cache (+ _functional): per-head RMSNorm and RoPE
  (rotate-half) of q and k out of a packed qkv; q into q_out, k and v quantised
  (``round(x / scale + offset)`` saturated to int8, as op-plugin's reference)
  into PA_NZ caches (blocks, N * D / last, bs, last), or PA / PA_BNSD caches
  (blocks, bs, N, D).
- npu_scatter_pa_cache.value: one cache (ND, "Norm" layout) of
  npu_scatter_pa_kv_cache.
- npu_rope_quant_kvcache / npu_dequant_rope_quant_kvcache: split x into q, k, v
  by size_splits (the int32 x first dequantised: ``(x [+ int bias]) *
  weight_scale [* activation_scale] [+ float bias]``), rotate-half RoPE on q
  and k, ``round(x * scale [+ offset])`` saturated to int8 into caches
  (B, L, N, D): "contiguous" writes sequence b at positions indices[b] ...,
  "page" writes token i at slot indices[i].

Recurrences (computed in float32, state carried in float32 between steps):

- npu_recurrent_gated_delta_rule (+ _functional): Gated DeltaNet decode,
  ``S <- S * exp(g) [* exp(gk) per key column]``, ``S <- S + beta (v - S k) k^T``,
  ``o = S (scale q)``, S of shape (Dv, Dk). Sequence i (actual_seq_lengths)
  starts from ``state[ssm_state_indices[start + num_accepted_tokens[i] - 1]]``
  and writes its state after token t to ``state[ssm_state_indices[t]]``.
  Output bfloat16 (op-plugin's meta). Value heads share key heads in groups of
  Nv / Nk.
- npu_chunk_gated_delta_rule: the same recurrence for prefill, computed chunk
  by chunk (64 tokens, the WY / UT-transform form: one unit lower-triangular
  solve per chunk), from initial_state (B, Nv, Dv, Dk); returns the outputs
  (bfloat16) and the final states (initial_state's dtype).
- npu_fused_causal_conv1d (+ _v2, in place into x): Mamba / Qwen3-Next's
  depthwise causal conv (K taps) whose left context comes from conv_states,
  with the doc's cache cases (first chunk: zeros; speculative decoding: rows up
  to num_accepted_tokens - 1 + K - 1; default: all C rows), the state written
  back to its last rows, the APC block-boundary states, the Pangu reset and the
  residual. bias and activation are legacy arguments without effect (as
  documented). Batches whose cache line is pad_slot_id are skipped (zeros in
  y, x left alone by _v2).
- npu_masked_causal_conv1d (+ backward): depthwise causal conv over (S, B, H)
  with zero left padding, output rows masked by mask (B, S).

Helpers: npu_top_k_top_p_sample (top-k, top-p, min-p, then qSample argmax of
``probs / (|q| + eps)``, argmax, or a multinomial draw), npu_advance_step_flashattn
(vLLM's advance_step, plain and speculative), npu_ring_attention_update (merge
two partial attentions by their softmax max / sum).

Reading indices, lengths and slots happens on the host (a synchronisation), as
in kv_cache.py; the ops that read none (masked conv, ring update, sampling)
trace under FakeTensor / torch.compile.
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.kv_cache import _check as _check_pa_args, _write as _write_slots
from torch_npu.op_plugin.norm import npu_rms_norm
from torch_npu.op_plugin.quant import _saturate_int8
from torch_npu.op_plugin.rotary import _rotate

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
_INTS = (torch.int32, torch.int64)


def _rms(x, gamma, eps):
    """RMSNorm of float32 x over its last dimension, in float32."""
    return npu_rms_norm(x.float(), gamma.float(), eps)[0]


def _rope_half(x, cos, sin):
    return x * cos + _rotate(x, "half") * sin


def _rope_interleaved(x, cos, sin):
    """MLA's rope part: pairs (x0, x1), (x2, x3), ... de-interleaved to
    (x0, x2, ..., x1, x3, ...), then rotate-half RoPE."""
    d = x.shape[-1]
    k = x.unflatten(-1, (d // 2, 2)).transpose(-1, -2).flatten(-2)
    return _rope_half(k, cos, sin)


def _host_list(t):
    return [int(v) for v in t.reshape(-1).tolist()]


def _per_channel(t, d):
    """A scale / offset of 1, d or heads * d values, shaped to broadcast over (..., heads, d)."""
    t = t.float()
    return t.reshape(-1, d) if t.numel() % d == 0 else t.reshape(-1)


def _quant_to_cache(fn, name, y, scale, offset, cache, divide=False):
    """y (float32, (..., d)) in cache's dtype: ``y * scale [+ offset]`` (``y / scale``
    with divide) rounded and saturated for an int8 cache, clamped for a float8
    one; without scale ``y [+ offset]`` cast to the (floating) cache dtype."""
    d = y.shape[-1]
    for what, t in (("scale", scale), ("offset", offset)):
        check(t is None or t.numel() in (1, d) or (t.numel() % d == 0 and y.dim() >= 2
                                                   and t.numel() // d == y.shape[-2]),
              f"{fn}: the {what} of {name} has {t.numel() if t is not None else 0} values; expected 1, {d} or "
              f"heads * {d}.")
    if scale is None:
        check(cache.dtype in _FLOATS, f"{fn}: {name} of dtype {cache.dtype} is a quantised cache; pass its scale.")
        return (y if offset is None else y + _per_channel(offset, d)).to(cache.dtype)
    check(scale.is_floating_point(), f"{fn}: the scale of {name} should be floating point, got {scale.dtype}.")
    check(cache.dtype == torch.int8 or cache.dtype in _FP8_MAX,
          f"{fn}: with a scale {name} should be int8 (or float8), got {cache.dtype}.")
    q = y / _per_channel(scale, d) if divide else y * _per_channel(scale, d)
    if offset is not None:
        q = q + _per_channel(offset, d)
    if cache.dtype == torch.int8:
        return _saturate_int8(q)
    limit = _FP8_MAX[cache.dtype]
    return q.clamp(-limit, limit).to(cache.dtype)


# --- npu_kv_rmsnorm_rope_cache -------------------------------------------------

_KV_MODES = ("Norm", "PA", "PA_BNSD", "PA_NZ", "PA_BLK_BNSD", "PA_BLK_NZ")


def _kv_cache_write(fn, name, rows, cache, index, mode):
    """Writes rows (B, S, D), already in the cache's dtype, by cache_mode."""
    b, s, d = rows.shape
    check(cache.dim() == 4, f"{fn}: {name} should be 4-D, got shape {list(cache.shape)}.")
    idx = index.long()
    if mode == "Norm":
        check(cache.shape[0] == b and cache.shape[1] == 1 and cache.shape[3] == d,
              f"{fn}: in Norm mode {name} should have shape [{b}, 1, cache_length, {d}], got {list(cache.shape)}.")
        check(tuple(index.shape) == (b, s), f"{fn}: in Norm mode index should have shape [{b}, {s}], got "
                                            f"{list(index.shape)}.")
        length = cache.shape[2]
        check(not bool((idx >= length).any()), f"{fn}: an index is beyond cache_length {length} of {name}.")
        base = torch.arange(b, device=idx.device).unsqueeze(1) * length
        slots = torch.where(idx >= 0, idx + base, -1).reshape(-1)
        _write_slots(fn, name.replace("_cache", ""), rows.reshape(b * s, 1, d), cache.transpose(1, 2), slots, False)
        return
    check(cache.shape[2] == 1 and cache.shape[3] == d,
          f"{fn}: in {mode} mode {name} should have shape [block_num, block_size, 1, {d}], got {list(cache.shape)}.")
    block_size = cache.shape[1]
    if "BLK" in mode:
        pages = -(-s // block_size)
        check(index.dim() == 1 and index.shape[0] == b * pages,
              f"{fn}: in {mode} mode index should have batch_size * ceil(seq_len / block_size) = {b * pages} "
              f"block offsets, got shape {list(index.shape)}.")
        pos = torch.arange(s, device=idx.device)
        start = idx.view(b, pages)[:, pos // block_size]
        slots = torch.where(start >= 0, start // block_size * block_size + pos % block_size, -1).reshape(-1)
    else:
        check(index.dim() == 1 and index.shape[0] == b * s,
              f"{fn}: in {mode} mode index should have batch_size * seq_len = {b * s} slots, got shape "
              f"{list(index.shape)}.")
        slots = idx
    if mode.endswith("NZ"):
        d0 = max(32 // cache.element_size(), 1)
        check(d % d0 == 0, f"{fn}: {name} of {d} values is not a whole number of {d0}-wide NZ rows.")
        check(cache.is_contiguous(), f"{fn}: {name} should be contiguous in {mode} mode.")
        nz = cache.view(cache.shape[0], d // d0, block_size, d0)
        _write_slots(fn, name.replace("_cache", ""), rows.reshape(b * s, d), nz, slots, True)
    else:
        _write_slots(fn, name.replace("_cache", ""), rows.reshape(b * s, 1, d), cache, slots, False)


def _kv_rmsnorm_rope(fn, kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale, k_rope_offset,
                     c_kv_offset, v, epsilon, cache_mode, k_cache_dtype=None, ckv_cache_dtype=None):
    check(kv.dim() == 4, f"{fn}: 4D tensor expected for input kv (B, 1, S, D), got shape {list(kv.shape)}.")
    check(gamma.dim() == 1, f"{fn}: 1D tensor expected for input gamma, got shape {list(gamma.shape)}.")
    check(cos.dim() == 4, f"{fn}: 4D tensor expected for input cos, got shape {list(cos.shape)}.")
    check(kv.dtype in _FLOATS, f"{fn}: kv should be float16 or bfloat16, got {kv.dtype}.")
    check(cache_mode in _KV_MODES, f"{fn}: cache_mode should be one of {list(_KV_MODES)}, got '{cache_mode}'.")
    check(k_rope_offset is None and c_kv_offset is None,
          f"{fn}: k_rope_offset / c_kv_offset (asymmetric quantisation) is not supported on vNPU: the kernel does "
          "not support it either.")
    check(k_cache_dtype is None and ckv_cache_dtype is None,
          f"{fn}: k_cache_dtype / ckv_cache_dtype (reinterpreting the cache bytes) is not supported on vNPU: pass "
          "caches of the dtype they hold.")
    check(index.dtype in _INTS, f"{fn}: index should be int64, got {index.dtype}.")
    b, n, s, h = kv.shape
    check(n == 1, f"{fn}: kv should have one head (B, 1, S, D), got shape {list(kv.shape)}.")
    rope = cos.shape[-1]
    check(tuple(cos.shape) == (b, 1, s, rope) and tuple(sin.shape) == tuple(cos.shape),
          f"{fn}: cos and sin should have shape [{b}, 1, {s}, rope_size], got {list(cos.shape)} and "
          f"{list(sin.shape)}.")
    check(rope % 2 == 0, f"{fn}: rope_size {rope} should be even.")
    c, sn = cos.float(), sin.float()
    if v is None:
        rms = gamma.shape[0]
        check(rms + rope == h, f"{fn}: the last dimension of kv ({h}) should be gamma's {rms} + cos's {rope}.")
        y = _rms(kv[..., :rms], gamma, epsilon)
        k_out = _rope_interleaved(kv[..., rms:].float(), c, sn)
        c_out = y
    else:
        check(v.dtype == kv.dtype, f"{fn}: v MUST have same data type as kv, got {v.dtype} and {kv.dtype}.")
        check(v.dim() == 4 and tuple(v.shape[:3]) == (b, n, s),
              f"{fn}: v should have kv's token shape [{b}, {n}, {s}, Dv], got {list(v.shape)}.")
        check(gamma.shape[0] == h and rope <= h,
              f"{fn}: with v, gamma should cover all of kv's {h} features (and rope_size {rope} <= {h}), got "
              f"gamma of {gamma.shape[0]}.")
        y = _rms(kv, gamma, epsilon)
        k_out = torch.cat((_rope_interleaved(y[..., :rope], c, sn), y[..., rope:]), dim=-1)
        c_out = v.float()
    k_rows = _quant_to_cache(fn, "k_cache", k_out, k_rope_scale, None, k_cache)
    c_rows = _quant_to_cache(fn, "ckv_cache", c_out, c_kv_scale, None, ckv_cache)
    _kv_cache_write(fn, "k_cache", k_rows.view(b, s, -1), k_cache, index, cache_mode)
    _kv_cache_write(fn, "ckv_cache", c_rows.view(b, s, -1), ckv_cache, index, cache_mode)
    return k_out.to(kv.dtype), c_out.to(kv.dtype)


def npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None, c_kv_scale=None,
                              k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5, cache_mode="Norm",
                              is_output_kv=False):
    """Updates k_cache / ckv_cache in place and returns them, with k_rope and c_kv."""
    k_rope, c_kv = _kv_rmsnorm_rope("npu_kv_rmsnorm_rope_cache", kv, gamma, cos, sin, index, k_cache, ckv_cache,
                                    k_rope_scale, c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode)
    return k_cache, ckv_cache, k_rope, c_kv


def npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None,
                                 c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5,
                                 cache_mode="Norm", is_output_kv=False, k_cache_dtype=None, ckv_cache_dtype=None):
    return _kv_rmsnorm_rope("npu_kv_rmsnorm_rope_cache_v2", kv, gamma, cos, sin, index, k_cache, ckv_cache,
                            k_rope_scale, c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode,
                            k_cache_dtype, ckv_cache_dtype)


def npu_kv_rmsnorm_rope_cache_v2_functional(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None,
                                            c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, v=None,
                                            epsilon=1e-5, cache_mode="Norm", is_output_kv=False, k_cache_dtype=None,
                                            ckv_cache_dtype=None):
    k_cache, ckv_cache = k_cache.clone(), ckv_cache.clone()
    k_rope, c_kv = _kv_rmsnorm_rope("npu_kv_rmsnorm_rope_cache_v2_functional", kv, gamma, cos, sin, index, k_cache,
                                    ckv_cache, k_rope_scale, c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon,
                                    cache_mode, k_cache_dtype, ckv_cache_dtype)
    return k_rope, c_kv, k_cache, ckv_cache


_KV_ARGS = ("Tensor? k_rope_scale=None, Tensor? c_kv_scale=None, Tensor? k_rope_offset=None, "
            "Tensor? c_kv_offset=None, Tensor? v=None, float epsilon=1e-5, str cache_mode='Norm', "
            "bool is_output_kv=False")
define("npu_kv_rmsnorm_rope_cache(Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, Tensor k_cache, "
       f"Tensor ckv_cache, *, {_KV_ARGS}) -> (Tensor, Tensor, Tensor, Tensor)", npu_kv_rmsnorm_rope_cache)
define("npu_kv_rmsnorm_rope_cache_v2(Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, "
       f"Tensor(a!) k_cache, Tensor(b!) ckv_cache, *, {_KV_ARGS}, int? k_cache_dtype=None, "
       "int? ckv_cache_dtype=None) -> (Tensor, Tensor)", npu_kv_rmsnorm_rope_cache_v2)
define("npu_kv_rmsnorm_rope_cache_v2_functional(Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, "
       f"Tensor k_cache, Tensor ckv_cache, *, {_KV_ARGS}, int? k_cache_dtype=None, int? ckv_cache_dtype=None) "
       "-> (Tensor, Tensor, Tensor, Tensor)", npu_kv_rmsnorm_rope_cache_v2_functional)


# --- npu_qkv_rms_norm_rope_cache -----------------------------------------------

def _qkv_cache_write(fn, name, rows, cache, slots, cache_mode):
    """rows (T, N, D) in cache's dtype."""
    check(cache.dim() == 4, f"{fn}: {name} should be 4-D, got shape {list(cache.shape)}.")
    _write_slots(fn, name.replace("_cache", ""), rows if cache_mode != "PA_NZ" else rows.reshape(rows.shape[0], -1),
                 cache, slots, cache_mode == "PA_NZ")


def _qkv_rms_norm_rope(fn, qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums,
                       k_scale, v_scale, k_offset, v_offset, epsilon, cache_mode, is_output_qkv):
    check(qkv_size is not None and len(qkv_size) == 4, f"{fn}: qkv_size must be length 4 [B, S, N, D].")
    check(head_nums is not None and len(head_nums) == 3, f"{fn}: head_nums must be length 3 [n_q, n_k, n_v].")
    check(qkv.dim() == 2, f"{fn}: 2D tensor expected for input qkv, got shape {list(qkv.shape)}.")
    check(q_gamma.dim() == 1 and k_gamma.dim() == 1, f"{fn}: 1D tensors expected for q_gamma and k_gamma.")
    check(cos.dim() == 2 and sin.dim() == 2 and cos.shape == sin.shape,
          f"{fn}: cos and sin should be 2-D tensors of one shape, got {list(cos.shape)} and {list(sin.shape)}.")
    check(qkv.dtype in _FLOATS, f"{fn}: qkv should be float16 or bfloat16, got {qkv.dtype}.")
    check(cache_mode in ("PA_NZ", "PA", "PA_BNSD"), f"{fn}: cache_mode should be 'PA_NZ', 'PA' or 'PA_BNSD', got "
                                                     f"'{cache_mode}'.")
    b, s, n, d = [int(x) for x in qkv_size]
    nq, nk, nv = [int(x) for x in head_nums]
    t = b * s
    check(n == nq + nk + nv and tuple(qkv.shape) == (t, n * d),
          f"{fn}: qkv should have shape [B * S, (n_q + n_k + n_v) * D] = [{t}, {(nq + nk + nv) * d}] for qkv_size "
          f"{list(qkv_size)} and head_nums {list(head_nums)}, got {list(qkv.shape)}.")
    check(tuple(q_gamma.shape) == (d,) and tuple(k_gamma.shape) == (d,),
          f"{fn}: q_gamma and k_gamma should have shape [{d}], got {list(q_gamma.shape)} and {list(k_gamma.shape)}.")
    check(cos.shape[0] in (b, t) and cos.shape[1] % d == 0 and cos.shape[1] // d in (1, nq, nk),
          f"{fn}: cos should have shape [B or B * S, D or heads * D] = [{b} or {t}, {d}], got {list(cos.shape)}.")
    check(tuple(q_out.shape) == (t, nq * d), f"{fn}: q_out should have shape [{t}, {nq * d}], got "
                                             f"{list(q_out.shape)}.")
    check(index.dim() == 1 and index.shape[0] == t and index.dtype in _INTS,
          f"{fn}: index should be a 1-D int64 tensor of {t} slots, got {index.dtype} of shape {list(index.shape)}.")
    x = qkv.float().view(b, s, n, d)
    q, k, v = x.split([nq, nk, nv], dim=2)
    c = cos.float().view(b, cos.shape[0] // b, cos.shape[1] // d, d)
    sn = sin.float().view(b, cos.shape[0] // b, cos.shape[1] // d, d)
    q = _rope_half(_rms(q, q_gamma, epsilon), c, sn)
    k = _rope_half(_rms(k, k_gamma, epsilon), c, sn)
    q_flat = q.reshape(t, nq * d)
    q_out.copy_(q_flat.to(q_out.dtype))
    k_rows = _quant_to_cache(fn, "k_cache", k.reshape(t, nk, d), k_scale, k_offset, k_cache, divide=True)
    v_rows = _quant_to_cache(fn, "v_cache", v.reshape(t, nv, d), v_scale, v_offset, v_cache, divide=True)
    slots = index.long()
    _qkv_cache_write(fn, "k_cache", k_rows, k_cache, slots, cache_mode)
    _qkv_cache_write(fn, "v_cache", v_rows, v_cache, slots, cache_mode)
    if is_output_qkv:
        return q_flat.to(qkv.dtype), k.reshape(t, nk * d).to(qkv.dtype), v.reshape(t, nv * d).to(qkv.dtype)
    empty = qkv.new_zeros(())
    return empty, empty.clone(), empty.clone()


def npu_qkv_rms_norm_rope_cache(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums,
                                *, k_scale=None, v_scale=None, k_offset=None, v_offset=None, epsilon=1e-6,
                                cache_mode="PA_NZ", is_output_qkv=False):
    return _qkv_rms_norm_rope("npu_qkv_rms_norm_rope_cache", qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache,
                              v_cache, qkv_size, head_nums, k_scale, v_scale, k_offset, v_offset, epsilon, cache_mode,
                              is_output_qkv)


def npu_qkv_rms_norm_rope_cache_functional(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size,
                                           head_nums, *, k_scale=None, v_scale=None, k_offset=None, v_offset=None,
                                           epsilon=1e-6, cache_mode="PA_NZ", is_output_qkv=False):
    q_out, k_cache, v_cache = q_out.clone(), k_cache.clone(), v_cache.clone()
    outs = _qkv_rms_norm_rope("npu_qkv_rms_norm_rope_cache_functional", qkv, q_gamma, k_gamma, cos, sin, index, q_out,
                              k_cache, v_cache, qkv_size, head_nums, k_scale, v_scale, k_offset, v_offset, epsilon,
                              cache_mode, is_output_qkv)
    return outs + (q_out, k_cache, v_cache)


_QKV_ARGS = ("int[4] qkv_size, int[3] head_nums, *, Tensor? k_scale=None, Tensor? v_scale=None, "
             "Tensor? k_offset=None, Tensor? v_offset=None, float epsilon=1e-6, str cache_mode='PA_NZ', "
             "bool is_output_qkv=False")
define("npu_qkv_rms_norm_rope_cache(Tensor qkv, Tensor q_gamma, Tensor k_gamma, Tensor cos, Tensor sin, "
       f"Tensor index, Tensor(a!) q_out, Tensor(b!) k_cache, Tensor(c!) v_cache, {_QKV_ARGS}) "
       "-> (Tensor, Tensor, Tensor)", npu_qkv_rms_norm_rope_cache)
define("npu_qkv_rms_norm_rope_cache_functional(Tensor qkv, Tensor q_gamma, Tensor k_gamma, Tensor cos, Tensor sin, "
       f"Tensor index, Tensor q_out, Tensor k_cache, Tensor v_cache, {_QKV_ARGS}) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_qkv_rms_norm_rope_cache_functional)


# --- npu_scatter_pa_cache ------------------------------------------------------

def npu_scatter_pa_cache(key, slot_mapping, *, compress_lens=None, compress_seq_offsets=None, seq_lens=None,
                         key_cache):
    """key (T, N, D) into key_cache (blocks, block_size, N, D) at slot_mapping."""
    fn = "npu_scatter_pa_cache"
    _check_pa_args(fn, key, key, slot_mapping, compress_lens, compress_seq_offsets, seq_lens, "Norm")
    _write_slots(fn, "key", key, key_cache, slot_mapping.long(), False)
    return key_cache


define("npu_scatter_pa_cache.value(Tensor key, Tensor slot_mapping, *, Tensor? compress_lens=None, "
       "Tensor? compress_seq_offsets=None, Tensor? seq_lens=None, Tensor(a!) key_cache) -> Tensor(a!)",
       npu_scatter_pa_cache)


# --- npu_rope_quant_kvcache / npu_dequant_rope_quant_kvcache -------------------

def _rope_quant_kvcache(fn, x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, offset_k,
                        offset_v, quant_mode, input_layout, kv_output, cache_mode):
    check(x.dim() in (2, 3), f"{fn}: 3D or 2D tensor expected for input x, got shape {list(x.shape)}.")
    check(len(size_splits) == 3, f"{fn}: size_splits's size should be 3, got {list(size_splits)}.")
    check(size_splits[0] >= 0, f"{fn}: size_splits[0] should not be less than 0, got {size_splits[0]}.")
    check(k_cache.dim() == 4 and v_cache.dim() == 4,
          f"{fn}: 4D tensors expected for k_cache and v_cache, got shapes {list(k_cache.shape)} and "
          f"{list(v_cache.shape)}.")
    check(quant_mode == 0, f"{fn}: quant_mode {quant_mode} (dynamic) is not supported on vNPU: only static "
                           "quantisation (quant_mode=0) is documented.")
    check(input_layout == "BSND", f"{fn}: input_layout should be 'BSND', got '{input_layout}'.")
    check(cache_mode in ("contiguous", "page"), f"{fn}: cache_mode should be 'contiguous' or 'page', got "
                                                f"'{cache_mode}'.")
    check(cos.dtype in (torch.float16, torch.bfloat16, torch.float32) and sin.dtype == cos.dtype,
          f"{fn}: cos and sin should be float16 or bfloat16 of one dtype, got {cos.dtype} and {sin.dtype}.")
    check(indices.dtype in _INTS, f"{fn}: indices should be int32, got {indices.dtype}.")
    seq3 = x.dim() == 3
    b = x.shape[0]
    s = x.shape[1] if seq3 else 1
    nkv, d = k_cache.shape[2], k_cache.shape[3]
    check(tuple(v_cache.shape[2:]) == (nkv, d), f"{fn}: v_cache {list(v_cache.shape)} should end in [{nkv}, {d}] "
                                                f"like k_cache.")
    check(d > 0 and size_splits[0] % d == 0 and size_splits[1] == nkv * d and size_splits[2] == nkv * d
          and sum(size_splits) == x.shape[-1],
          f"{fn}: size_splits {list(size_splits)} should be [Nq * {d}, {nkv * d}, {nkv * d}] and add up to the last "
          f"dimension of x ({x.shape[-1]}).")
    nq = size_splits[0] // d
    cos_shape = (b, s, 1, d) if seq3 else (b, d)
    check(tuple(cos.shape) == cos_shape and tuple(sin.shape) == cos_shape,
          f"{fn}: cos and sin should have shape {list(cos_shape)}, got {list(cos.shape)} and {list(sin.shape)}.")
    xs = x.view(b, s, -1)
    q, k, v = xs.split(list(size_splits), dim=-1)
    c = cos.float().view(b, s, 1, d)
    sn = sin.float().view(b, s, 1, d)
    q = _rope_half(q.float().view(b, s, nq, d), c, sn)
    k = _rope_half(k.float().view(b, s, nkv, d), c, sn)
    v = v.float().view(b, s, nkv, d)
    kq = _quant_to_cache(fn, "k_cache", k, scale_k, offset_k, k_cache)
    vq = _quant_to_cache(fn, "v_cache", v, scale_v, offset_v, v_cache)
    idx = indices.long().reshape(-1)
    if cache_mode == "page":
        check(idx.shape[0] == b * s, f"{fn}: in page mode indices should hold one slot per token ({b * s}), got "
                                     f"{idx.shape[0]}.")
        slots = idx
    else:
        check(idx.shape[0] == b, f"{fn}: in contiguous mode indices should hold one start position per batch ({b}), "
                                 f"got {idx.shape[0]}.")
        check(k_cache.shape[0] >= b and v_cache.shape[0] >= b,
              f"{fn}: the caches' first dimension should hold the {b} batches, got {k_cache.shape[0]}.")
        length = k_cache.shape[1]
        starts = _host_list(idx)
        check(all(0 <= p <= length - s for p in starts),
              f"{fn}: indices {starts} should lie in [0, {length - s}] (cache length {length} - seq length {s}).")
        slots = ((torch.arange(b, device=idx.device) * length + idx).unsqueeze(1)
                 + torch.arange(s, device=idx.device)).reshape(-1)
    _write_slots(fn, "k", kq.reshape(b * s, nkv, d), k_cache, slots, False)
    _write_slots(fn, "v", vq.reshape(b * s, nkv, d), v_cache, slots, False)
    out_shape = (b, s, -1, d) if seq3 else (b, -1, d)
    q_out = q.reshape(out_shape).to(cos.dtype)
    if kv_output:
        return q_out, k.reshape(out_shape).to(cos.dtype), v.reshape(out_shape).to(cos.dtype), k_cache, v_cache
    empty = cos.new_empty((0,))
    return q_out, empty, empty.clone(), k_cache, v_cache


def npu_rope_quant_kvcache(x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, *, offset_k=None,
                           offset_v=None, quant_mode=0, input_layout="BSND", kv_output=False, cache_mode="contiguous"):
    fn = "npu_rope_quant_kvcache"
    check(x.dtype in _FLOATS, f"{fn}: x should be float16 or bfloat16, got {x.dtype}.")
    return _rope_quant_kvcache(fn, x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, offset_k,
                               offset_v, quant_mode, input_layout, kv_output, cache_mode)


def npu_dequant_rope_quant_kvcache(x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, *,
                                   offset_k=None, offset_v=None, weight_scale=None, activation_scale=None, bias=None,
                                   quant_mode=0, input_layout="BSND", kv_output=False, cache_mode="contiguous"):
    """x int32: ``(x [+ int32 bias]) * weight_scale [* activation_scale per token] [+ float bias]``
    in cos's dtype, then as npu_rope_quant_kvcache."""
    fn = "npu_dequant_rope_quant_kvcache"
    check(x.dtype == torch.int32, f"{fn}: x dtype should be Int32, got {x.dtype}.")
    check(weight_scale is not None, f"{fn}: weight_scale is required to dequantise the int32 x.")
    h = x.shape[-1]
    check(weight_scale.numel() == h, f"{fn}: weight_scale should have shape [{h}], got {list(weight_scale.shape)}.")
    tokens = x.numel() // h if h else 0
    y = x.double()
    if bias is not None:
        check(bias.numel() == h, f"{fn}: bias should have shape [{h}], got {list(bias.shape)}.")
    if bias is not None and bias.dtype == torch.int32:
        y = y + bias.double().reshape(-1)
    y = y.float() * weight_scale.float().reshape(-1)
    if activation_scale is not None:
        check(activation_scale.numel() == tokens,
              f"{fn}: activation_scale should hold one scale per token ({tokens}), got {list(activation_scale.shape)}.")
        y = y * activation_scale.float().reshape(x.shape[:-1] + (1,))
    if bias is not None and bias.dtype != torch.int32:
        y = y + bias.float().reshape(-1)
    return _rope_quant_kvcache(fn, y.to(cos.dtype), cos, sin, k_cache, v_cache, indices, scale_k, scale_v,
                               size_splits, offset_k, offset_v, quant_mode, input_layout, kv_output, cache_mode)


_RQ_ARGS = ("Tensor x, Tensor cos, Tensor sin, Tensor k_cache, Tensor v_cache, Tensor indices, Tensor scale_k, "
            "Tensor scale_v, int[3] size_splits, *, Tensor? offset_k=None, Tensor? offset_v=None")
_RQ_TAIL = ("int quant_mode=0, str input_layout=\"BSND\", bool kv_output=False, str cache_mode=\"contiguous\") "
            "-> (Tensor, Tensor, Tensor, Tensor, Tensor)")
define(f"npu_dequant_rope_quant_kvcache({_RQ_ARGS}, Tensor? weight_scale=None, Tensor? activation_scale=None, "
       f"Tensor? bias=None, {_RQ_TAIL}", npu_dequant_rope_quant_kvcache)
define(f"npu_rope_quant_kvcache({_RQ_ARGS}, {_RQ_TAIL}", npu_rope_quant_kvcache)


# --- gated delta rule ----------------------------------------------------------

def _gdr_check(fn, query, key, value, beta, g):
    check(query.dim() == 3 and key.dim() == 3 and value.dim() == 3,
          f"{fn}: query, key and value should be 3-D (T, N, D), got shapes {list(query.shape)}, {list(key.shape)} "
          f"and {list(value.shape)}.")
    check(query.shape == key.shape, f"{fn}: query {list(query.shape)} and key {list(key.shape)} should have one "
                                    "shape (T, Nk, Dk).")
    t, nk, _ = key.shape
    check(value.shape[0] == t, f"{fn}: value should have T = {t} tokens, got {value.shape[0]}.")
    nv = value.shape[1]
    check(nk > 0 and nv % nk == 0, f"{fn}: the value heads ({nv}) should be a multiple of the key heads ({nk}).")
    check(query.is_floating_point() and value.is_floating_point(), f"{fn}: query, key and value should be floating "
                                                                   "point.")
    for name, tensor in (("beta", beta), ("g", g)):
        check(tensor is None or tuple(tensor.shape) == (t, nv),
              f"{fn}: {name} should have shape [{t}, {nv}], got {None if tensor is None else list(tensor.shape)}.")
    return t, nk, nv


def _seq_lengths(fn, actual_seq_lengths, t):
    if actual_seq_lengths is None:
        return [1] * t
    check(actual_seq_lengths.dim() == 1 and actual_seq_lengths.dtype in _INTS,
          f"{fn}: actual_seq_lengths should be a 1-D int32 tensor, got {actual_seq_lengths.dtype} of shape "
          f"{list(actual_seq_lengths.shape)}.")
    lengths = _host_list(actual_seq_lengths)
    check(all(x >= 1 for x in lengths) and sum(lengths) == t,
          f"{fn}: actual_seq_lengths should be positive sequence lengths adding up to T = {t}, got {lengths}.")
    return lengths


def _recurrent_gdr(fn, query, key, value, state, beta, scale, actual_seq_lengths, ssm_state_indices,
                   num_accepted_tokens, g, gk):
    t, nk, nv = _gdr_check(fn, query, key, value, beta, g)
    dk, dv = key.shape[2], value.shape[2]
    check(state.dim() == 4 and tuple(state.shape[1:]) == (nv, dv, dk),
          f"{fn}: state should have shape [BlockNum, {nv}, {dv}, {dk}], got {list(state.shape)}.")
    check(gk is None or tuple(gk.shape) == (t, nv, dk), f"{fn}: gk should have shape [{t}, {nv}, {dk}], got "
                                                        f"{list(gk.shape) if gk is not None else None}.")
    lengths = _seq_lengths(fn, actual_seq_lengths, t)
    batch = len(lengths)
    if ssm_state_indices is None:
        slots = list(range(t))
    else:
        check(not ssm_state_indices.is_floating_point() and ssm_state_indices.numel() == t,
              f"{fn}: ssm_state_indices should hold one integer state index per token ({t}), got "
              f"{ssm_state_indices.dtype} of shape {list(ssm_state_indices.shape)}.")
        slots = _host_list(ssm_state_indices)
    check(all(0 <= x < state.shape[0] for x in slots),
          f"{fn}: ssm_state_indices should lie in [0, {state.shape[0]}), got {slots}.")
    if num_accepted_tokens is None:
        accepted = [1] * batch
    else:
        check(num_accepted_tokens.numel() == batch, f"{fn}: num_accepted_tokens should hold one count per sequence "
                                                    f"({batch}), got shape {list(num_accepted_tokens.shape)}.")
        accepted = _host_list(num_accepted_tokens)
        check(all(1 <= a <= n for a, n in zip(accepted, lengths)),
              f"{fn}: num_accepted_tokens {accepted} should lie in [1, actual_seq_lengths {lengths}].")
    scale = dk ** -0.5 if scale is None else scale
    device = value.device
    starts = [sum(lengths[:i]) for i in range(batch)]
    rep = nv // nk
    qf = (query.float() * scale).repeat_interleave(rep, dim=1)
    kf = key.float().repeat_interleave(rep, dim=1)
    vf = value.float()
    bf = beta.float() if beta is not None else None
    decay = g.float().exp() if g is not None else None
    decay_k = gk.float().exp() if gk is not None else None
    slot_t = torch.tensor(slots, dtype=torch.long, device=device)
    first = torch.tensor([starts[i] + accepted[i] - 1 for i in range(batch)], dtype=torch.long, device=device)
    s_state = state[slot_t[first]].float()  # (B, Nv, Dv, Dk)
    out = torch.zeros(t, nv, dv, dtype=torch.float32, device=device)
    for step in range(max(lengths)):
        live = [i for i in range(batch) if step < lengths[i]]
        rows = torch.tensor(live, dtype=torch.long, device=device)
        tok = torch.tensor([starts[i] + step for i in live], dtype=torch.long, device=device)
        s_now = s_state[rows]
        if decay is not None:
            s_now = s_now * decay[tok][..., None, None]
        if decay_k is not None:
            s_now = s_now * decay_k[tok].unsqueeze(-2)
        k_t = kf[tok]
        err = vf[tok] - (s_now @ k_t.unsqueeze(-1)).squeeze(-1)
        if bf is not None:
            err = err * bf[tok].unsqueeze(-1)
        s_now = s_now + err.unsqueeze(-1) * k_t.unsqueeze(-2)
        out[tok] = (s_now @ qf[tok].unsqueeze(-1)).squeeze(-1)
        s_state = s_state.index_copy(0, rows, s_now)
        state[slot_t[tok]] = s_now.to(state.dtype)
    return out.to(torch.bfloat16)


def npu_recurrent_gated_delta_rule(query, key, value, state, *, beta=None, scale=None, actual_seq_lengths=None,
                                   ssm_state_indices=None, num_accepted_tokens=None, g=None, gk=None):
    return _recurrent_gdr("npu_recurrent_gated_delta_rule", query, key, value, state, beta, scale,
                          actual_seq_lengths, ssm_state_indices, num_accepted_tokens, g, gk)


def npu_recurrent_gated_delta_rule_functional(query, key, value, state, *, beta=None, scale=None,
                                              actual_seq_lengths=None, ssm_state_indices=None,
                                              num_accepted_tokens=None, g=None, gk=None):
    state = state.clone()
    out = _recurrent_gdr("npu_recurrent_gated_delta_rule_functional", query, key, value, state, beta, scale,
                         actual_seq_lengths, ssm_state_indices, num_accepted_tokens, g, gk)
    return out, state


_RGDR_ARGS = ("*, Tensor? beta=None, float? scale=None, Tensor? actual_seq_lengths=None, "
              "Tensor? ssm_state_indices=None, Tensor? num_accepted_tokens=None, Tensor? g=None, Tensor? gk=None")
define(f"npu_recurrent_gated_delta_rule(Tensor query, Tensor key, Tensor value, Tensor(a!) state, {_RGDR_ARGS}) "
       "-> Tensor", npu_recurrent_gated_delta_rule)
define(f"npu_recurrent_gated_delta_rule_functional(Tensor query, Tensor key, Tensor value, Tensor state, "
       f"{_RGDR_ARGS}) -> (Tensor, Tensor)", npu_recurrent_gated_delta_rule_functional)

_CHUNK = 64


def npu_chunk_gated_delta_rule(query, key, value, *, beta=None, initial_state=None, actual_seq_lengths=None,
                               scale=None, g=None):
    """Chunked form: within a chunk with cumulative log-decay G, the updates
    u_t of ``S_t = exp(G_t) S_0 + sum_{j<=t} exp(G_t - G_j) u_j k_j^T`` solve
    ``(I + A) U = beta (V - exp(G) K S_0^T)`` with
    ``A[t, j] = beta_t exp(G_t - G_j) k_t . k_j`` (j < t); then
    ``O = scale (exp(G) Q S_0^T + (Q K^T * exp(G_t - G_j))_{j<=t} U)``. Sequences
    are padded to whole chunks with g = beta = k = 0, which leaves the state alone."""
    fn = "npu_chunk_gated_delta_rule"
    t, nk, nv = _gdr_check(fn, query, key, value, beta, g)
    check(t > 0, f"{fn}: value cannot be empty.")
    check(initial_state is not None and actual_seq_lengths is not None,
          f"{fn}: initial_state and actual_seq_lengths are required (TND layout).")
    dk, dv = key.shape[2], value.shape[2]
    lengths = _seq_lengths(fn, actual_seq_lengths, t)
    batch = len(lengths)
    check(tuple(initial_state.shape) == (batch, nv, dv, dk),
          f"{fn}: initial_state should have shape [B, Nv, Dv, Dk] = [{batch}, {nv}, {dv}, {dk}], got "
          f"{list(initial_state.shape)}.")
    scale = 1.0 if scale is None else scale
    device = value.device
    padded = -(-max(lengths) // _CHUNK) * _CHUNK
    lengths_t = torch.tensor(lengths, dtype=torch.long)
    starts = torch.cumsum(lengths_t, 0) - lengths_t
    pos = torch.arange(padded)
    valid = (pos.unsqueeze(0) < lengths_t.unsqueeze(1)).to(device)  # (B, P)
    tok = (starts.unsqueeze(1) + pos.unsqueeze(0)).clamp(max=t - 1).to(device)

    def gather(x):  # (T, H, ...) -> (B, H, P, ...) with zeros past each sequence's end
        x = x[tok]
        x = torch.where(valid.view(valid.shape + (1,) * (x.dim() - 2)), x, torch.zeros((), dtype=x.dtype,
                                                                                        device=device))
        return x.movedim(2, 1)

    rep = nv // nk
    q = gather(query.float().repeat_interleave(rep, dim=1) * scale)
    k = gather(key.float().repeat_interleave(rep, dim=1))
    v = gather(value.float())
    bt = gather(beta.float()) if beta is not None else valid.unsqueeze(1).float().expand(batch, nv, padded)
    gt = gather(g.float()) if g is not None else torch.zeros(batch, nv, padded, device=device)
    s_state = initial_state.float()
    out = torch.empty(batch, nv, padded, dv, dtype=torch.float32, device=device)
    incl = torch.ones(_CHUNK, _CHUNK, dtype=torch.bool, device=device).tril()
    strict = incl.tril(-1)
    eye = torch.eye(_CHUNK, device=device)
    for c in range(padded // _CHUNK):
        sl = slice(c * _CHUNK, (c + 1) * _CHUNK)
        qc, kc, vc, bc = q[:, :, sl], k[:, :, sl], v[:, :, sl], bt[:, :, sl]
        big_g = gt[:, :, sl].cumsum(-1)
        decay = (big_g.unsqueeze(-1) - big_g.unsqueeze(-2)).masked_fill(~incl, float("-inf")).exp()
        a = (bc.unsqueeze(-1) * (kc @ kc.transpose(-1, -2)) * decay).masked_fill(~strict, 0.0)
        e_g = big_g.exp().unsqueeze(-1)
        rhs = bc.unsqueeze(-1) * (vc - e_g * (kc @ s_state.transpose(-1, -2)))
        u = torch.linalg.solve_triangular(eye + a, rhs, upper=False, unitriangular=True)
        out[:, :, sl] = e_g * (qc @ s_state.transpose(-1, -2)) + ((qc @ kc.transpose(-1, -2)) * decay) @ u
        last = big_g[..., -1:]
        s_state = (last.exp().unsqueeze(-1) * s_state
                   + (u * (last - big_g).exp().unsqueeze(-1)).transpose(-1, -2) @ kc)
    o = out.movedim(1, 2)[valid]  # (T, Nv, Dv), sequences back to back
    return o.to(torch.bfloat16), s_state.to(initial_state.dtype)


define("npu_chunk_gated_delta_rule(Tensor query, Tensor key, Tensor value, *, Tensor? beta=None, "
       "Tensor? initial_state=None, Tensor? actual_seq_lengths=None, float? scale=None, Tensor? g=None) "
       "-> (Tensor, Tensor)", npu_chunk_gated_delta_rule)


# --- causal conv1d -------------------------------------------------------------

def _fused_causal_conv1d(fn, x, weight, conv_states, query_start_loc, cache_indices, num_accepted_tokens,
                         pad_slot_id, residual_connection, num_computed_tokens, block_idx_first_scheduled_token,
                         block_idx_last_scheduled_token, initial_state_idx, block_size, conv_mode, keep_skipped):
    """y (x's shape and dtype); updates conv_states in place. Skipped batches
    (pad_slot_id) get zeros, or x itself with keep_skipped."""
    check(x.dtype in _FLOATS, f"{fn}: x should be float16 or bfloat16, got {x.dtype}.")
    check(weight.dtype == x.dtype and conv_states.dtype == x.dtype,
          f"{fn}: weight and conv_states should have x's dtype {x.dtype}, got {weight.dtype} and "
          f"{conv_states.dtype}.")
    check(x.dim() in (2, 3), f"{fn}: x should be 2-D [cu_seq_len, dim] or 3-D [batch, m + 1, dim], got shape "
                             f"{list(x.shape)}.")
    dim = x.shape[-1]
    check(weight.dim() == 2 and weight.shape[1] == dim and weight.shape[0] >= 2,
          f"{fn}: weight should have shape [K, {dim}], got {list(weight.shape)}.")
    taps = weight.shape[0]
    check(conv_states.dim() == 3 and conv_states.shape[2] == dim and conv_states.shape[1] >= taps - 1,
          f"{fn}: conv_states should have shape [slots, state_len >= {taps - 1}, {dim}], got "
          f"{list(conv_states.shape)}.")
    check(conv_mode in ("default", "pangu"), f"{fn}: conv_mode should be 'default' or 'pangu', got '{conv_mode}'.")
    check(residual_connection in (0, 1), f"{fn}: residual_connection should be 0 or 1, got {residual_connection}.")
    state_len = conv_states.shape[1]
    if x.dim() == 3:
        batch, seq = x.shape[0], x.shape[1]
        bounds = [(i * seq, (i + 1) * seq) for i in range(batch)]
        flat = x.reshape(batch * seq, dim)
    else:
        check(query_start_loc is not None, f"{fn}: query_start_loc is required when x is 2-D.")
        loc = _host_list(query_start_loc)
        check(len(loc) >= 2 and loc[0] == 0 and loc[-1] == x.shape[0] and all(a <= b for a, b in zip(loc, loc[1:])),
              f"{fn}: query_start_loc should rise from 0 to cu_seq_len = {x.shape[0]}, got {loc}.")
        batch = len(loc) - 1
        bounds = list(zip(loc, loc[1:]))
        flat = x
    apc = cache_indices is not None and cache_indices.dim() == 2
    lines = None
    if cache_indices is not None:
        check(cache_indices.dim() in (1, 2) and cache_indices.shape[0] == batch,
              f"{fn}: cache_indices should be [{batch}] or [{batch}, maxNumBlocks], got {list(cache_indices.shape)}.")
        lines = [[int(v) for v in row] for row in cache_indices.reshape(batch, -1).tolist()]

    def per_batch(name, tensor):
        if tensor is None:
            return None
        check(tensor.numel() == batch, f"{fn}: {name} should hold one value per batch ({batch}), got shape "
                                       f"{list(tensor.shape)}.")
        return _host_list(tensor)

    computed = per_batch("num_computed_tokens", num_computed_tokens)
    accepted = per_batch("num_accepted_tokens", num_accepted_tokens)
    first_blk = per_batch("block_idx_first_scheduled_token", block_idx_first_scheduled_token)
    last_blk = per_batch("block_idx_last_scheduled_token", block_idx_last_scheduled_token)
    init_blk = per_batch("initial_state_idx", initial_state_idx)
    if apc:
        check(None not in (first_blk, last_blk, init_blk, computed),
              f"{fn}: a 2-D cache_indices (APC) needs block_idx_first_scheduled_token, block_idx_last_scheduled_token, "
              "initial_state_idx and num_computed_tokens.")
        check(block_size >= 2, f"{fn}: block_size should be at least 2, got {block_size}.")
    if conv_mode == "pangu":
        check(computed is not None, f"{fn}: conv_mode 'pangu' needs num_computed_tokens.")
    w = weight.float()
    y = flat.float() if keep_skipped else torch.zeros(flat.shape, dtype=torch.float32, device=x.device)
    for b, (lo, hi) in enumerate(bounds):
        length = hi - lo
        if apc:
            check(init_blk[b] <= last_blk[b] and first_blk[b] <= last_blk[b] < len(lines[b]),
                  f"{fn}: batch {b}: the APC block indices (first {first_blk[b]}, last {last_blk[b]}, initial "
                  f"{init_blk[b]}) are inconsistent with {len(lines[b])} blocks.")
            read_line, write_line = lines[b][init_blk[b]], lines[b][last_blk[b]]
        elif lines is not None:
            read_line = write_line = lines[b][0]
        else:
            read_line = write_line = b
        if read_line == pad_slot_id or write_line == pad_slot_id or length == 0:
            continue
        for line in (read_line, write_line):
            check(0 <= line < conv_states.shape[0], f"{fn}: batch {b}: cache line {line} is out of range for "
                                                    f"conv_states of {conv_states.shape[0]} slots.")
        xs = flat[lo:hi]
        if computed is not None and computed[b] == 0:
            offset = 0
            cached = torch.zeros(taps - 1, dim, dtype=x.dtype, device=x.device)
        elif accepted is not None:
            offset = accepted[b] - 1
            check(0 <= offset and offset + taps - 1 <= state_len,
                  f"{fn}: batch {b}: num_accepted_tokens {accepted[b]} needs {offset + taps - 1} state rows, "
                  f"conv_states has {state_len}.")
            cached = conv_states[read_line, :offset + taps - 1]
        else:
            offset = state_len - (taps - 1)
            cached = conv_states[read_line]
        padded = torch.cat((cached, xs), dim=0)
        total = padded.shape[0]
        keep = min(state_len, total)
        xp = padded[offset:].float()  # K - 1 + L rows
        out = sum(w[j] * xp[j:j + length] for j in range(taps))
        if apc:
            done = computed[b] % block_size
            end = (length - (block_size - done)) % block_size
            last_full = length - end - block_size if end == 0 else length - end
            fills = last_blk[b] - first_blk[b]
            for chunk in range(fills):
                boundary = last_full - (fills - chunk - 1) * block_size
                check(0 <= boundary and boundary + taps - 1 <= xp.shape[0],
                      f"{fn}: batch {b}: block boundary {boundary} lies outside the {length} tokens.")
                target = lines[b][first_blk[b] + chunk]
                conv_states[target, state_len - (taps - 1):] = padded[offset + boundary:offset + boundary + taps - 1]
        conv_states[write_line, state_len - keep:] = padded[total - keep:]
        if conv_mode == "pangu":
            reset = min(max(taps - 1 - computed[b], 0), length)
            out[:reset] = 0
        if residual_connection:
            out = out + xs.float()
        y[lo:hi] = out
    return y.to(x.dtype).view(x.shape)


_CONV_ARGS = ("*, Tensor? query_start_loc=None, Tensor? cache_indices=None, Tensor? initial_state_mode=None, "
              "Tensor? bias=None, Tensor? num_accepted_tokens=None, str? activation=\"None\", int? pad_slot_id=-1, "
              "int? run_mode=0, int? residual_connection=0, int? max_query_len=-1, "
              "Tensor? num_computed_tokens=None, Tensor? block_idx_first_scheduled_token=None, "
              "Tensor? block_idx_last_scheduled_token=None, Tensor? initial_state_idx=None, int? block_size=128, "
              "str? conv_mode=\"default\"")


def _conv_call(fn, x, weight, conv_states, query_start_loc, cache_indices, num_accepted_tokens, pad_slot_id,
               residual_connection, num_computed_tokens, block_idx_first_scheduled_token,
               block_idx_last_scheduled_token, initial_state_idx, block_size, conv_mode, keep_skipped=False):
    return _fused_causal_conv1d(fn, x, weight, conv_states, query_start_loc, cache_indices, num_accepted_tokens,
                                -1 if pad_slot_id is None else pad_slot_id,
                                0 if residual_connection is None else residual_connection, num_computed_tokens,
                                block_idx_first_scheduled_token, block_idx_last_scheduled_token, initial_state_idx,
                                128 if block_size is None else block_size,
                                "default" if conv_mode is None else conv_mode, keep_skipped)


def npu_fused_causal_conv1d(x, weight, conv_states, *, query_start_loc=None, cache_indices=None,
                            initial_state_mode=None, bias=None, num_accepted_tokens=None, activation="None",
                            pad_slot_id=-1, run_mode=0, residual_connection=0, max_query_len=-1,
                            num_computed_tokens=None, block_idx_first_scheduled_token=None,
                            block_idx_last_scheduled_token=None, initial_state_idx=None, block_size=128,
                            conv_mode="default"):
    return _conv_call("npu_fused_causal_conv1d", x, weight, conv_states, query_start_loc, cache_indices,
                      num_accepted_tokens, pad_slot_id, residual_connection, num_computed_tokens,
                      block_idx_first_scheduled_token, block_idx_last_scheduled_token, initial_state_idx, block_size,
                      conv_mode)


def npu_fused_causal_conv1d_v2(x, weight, conv_states, *, query_start_loc=None, cache_indices=None,
                               initial_state_mode=None, bias=None, num_accepted_tokens=None, activation="None",
                               pad_slot_id=-1, run_mode=0, residual_connection=0, max_query_len=-1,
                               num_computed_tokens=None, block_idx_first_scheduled_token=None,
                               block_idx_last_scheduled_token=None, initial_state_idx=None, block_size=128,
                               conv_mode="default"):
    """As npu_fused_causal_conv1d, the result written into x (the skipped batches keep x)."""
    y = _conv_call("npu_fused_causal_conv1d_v2", x, weight, conv_states, query_start_loc, cache_indices,
                   num_accepted_tokens, pad_slot_id, residual_connection, num_computed_tokens,
                   block_idx_first_scheduled_token, block_idx_last_scheduled_token, initial_state_idx, block_size,
                   conv_mode, keep_skipped=True)
    x.copy_(y)


define(f"npu_fused_causal_conv1d(Tensor x, Tensor weight, Tensor(a!) conv_states, {_CONV_ARGS}) -> Tensor",
       npu_fused_causal_conv1d)
define(f"npu_fused_causal_conv1d_v2(Tensor(a!) x, Tensor weight, Tensor(b!) conv_states, {_CONV_ARGS}) -> ()",
       npu_fused_causal_conv1d_v2)


def _masked_conv_check(fn, x, weight, mask):
    check(x.dim() == 3, f"{fn}: input should be 3-D [S, B, H], got shape {list(x.shape)}.")
    check(x.dtype in _FLOATS and weight.dtype == x.dtype,
          f"{fn}: input should be float16 or bfloat16 and weight of the same dtype, got {x.dtype} and {weight.dtype}.")
    check(weight.dim() == 2 and weight.shape[1] == x.shape[2],
          f"{fn}: weight should have shape [W, {x.shape[2]}], got {list(weight.shape)}.")
    check(mask is None or (mask.dtype == torch.bool and tuple(mask.shape) == (x.shape[1], x.shape[0])),
          f"{fn}: mask should be a bool tensor of shape [{x.shape[1]}, {x.shape[0]}] (B, S), got "
          f"{None if mask is None else (mask.dtype, list(mask.shape))}.")


def npu_masked_causal_conv1d(input, weight, *, mask=None):
    """``out[s] = sum_k weight[k] * input[s - (W - 1 - k)]`` (zero before the
    start), rows with mask[b, s] false set to 0; float32 sums."""
    _masked_conv_check("npu_masked_causal_conv1d", input, weight, mask)
    taps, seq = weight.shape[0], input.shape[0]
    xp = torch.nn.functional.pad(input.float(), (0, 0, 0, 0, taps - 1, 0))
    w = weight.float()
    out = sum(w[j] * xp[j:j + seq] for j in range(taps))
    if mask is not None:
        out = out * mask.transpose(0, 1).unsqueeze(-1).to(out.dtype)
    return out.to(input.dtype)


def npu_masked_causal_conv1d_backward(grad_output, input, weight, *, mask=None):
    """(grad_input, grad_weight) of npu_masked_causal_conv1d, in grad_output's dtype."""
    fn = "npu_masked_causal_conv1d_backward"
    _masked_conv_check(fn, input, weight, mask)
    check(grad_output.shape == input.shape, f"{fn}: grad_output {list(grad_output.shape)} should have input's shape "
                                            f"{list(input.shape)}.")
    taps, seq = weight.shape[0], input.shape[0]
    go = grad_output.float()
    if mask is not None:
        go = go * mask.transpose(0, 1).unsqueeze(-1).to(go.dtype)
    w = weight.float()
    gp = torch.nn.functional.pad(go, (0, 0, 0, 0, 0, taps - 1))  # zeros after the end
    grad_input = sum(w[j] * gp[taps - 1 - j:taps - 1 - j + seq] for j in range(taps))
    xp = torch.nn.functional.pad(input.float(), (0, 0, 0, 0, taps - 1, 0))
    grad_weight = torch.stack([(go * xp[j:j + seq]).sum(dim=(0, 1)) for j in range(taps)])
    return grad_input.to(grad_output.dtype), grad_weight.to(grad_output.dtype)


define("npu_masked_causal_conv1d(Tensor input, Tensor weight, *, Tensor? mask=None) -> Tensor",
       npu_masked_causal_conv1d)
define("npu_masked_causal_conv1d_backward(Tensor grad_output, Tensor input, Tensor weight, *, Tensor? mask=None) "
       "-> (Tensor, Tensor)", npu_masked_causal_conv1d_backward)


# --- npu_top_k_top_p_sample ----------------------------------------------------

def npu_top_k_top_p_sample(logits, top_k, top_p, q=None, eps=1e-8, is_need_logits=False, top_k_guess=32, min_ps=None,
                           ks_max=1024, input_is_logits=True, post_sample="qSample", generator=None):
    """Per row: a stable descending sort; top-k keeps the first k when
    1 <= k <= min(ks_max (rounded up to 8, at most 1024), vocab); probabilities
    are the softmax of the kept logits (input_is_logits) or the values
    themselves; top-p (p < 1) keeps the tokens whose preceding cumulative
    probability is below p (p <= 0: the largest only, its probability set to 1);
    min-p (0 < min_p < 1) keeps probabilities >= min_p * max, min_p >= 1 the
    largest only. With neither top-k nor top-p the row is not sorted. Then
    qSample: argmax of ``probs / (|q[b, rank]| + eps)`` (rank = position among
    the kept tokens), multiNomial: a draw from the kept probabilities with
    ``generator``, None (or q None for qSample): argmax. logits_top_kp_select
    (float32) holds the kept logits, defLogit (-inf, or 0 without
    input_is_logits) elsewhere; vNPU always fills it."""
    fn = "npu_top_k_top_p_sample"
    eps = 1e-8 if eps is None else eps
    top_k_guess = 32 if top_k_guess is None else top_k_guess
    ks_max = 1024 if ks_max is None else ks_max
    input_is_logits = True if input_is_logits is None else input_is_logits
    post_sample = "qSample" if post_sample is None else post_sample
    check(logits.dim() == 2 and logits.dtype in _FLOATS,
          f"{fn}: logits should be a 2-D float16, bfloat16 or float32 tensor, got {logits.dtype} of shape "
          f"{list(logits.shape)}.")
    batch, vocab = logits.shape
    check(batch > 0 and vocab > 0, f"{fn}: logits should not be empty.")
    check(top_k.dim() == 1 and top_k.shape[0] == batch and not top_k.is_floating_point(),
          f"{fn}: top_k should be a 1-D int32 tensor of {batch} values, got {top_k.dtype} of shape "
          f"{list(top_k.shape)}.")
    check(top_p.dim() == 1 and top_p.shape[0] == batch and top_p.is_floating_point(),
          f"{fn}: top_p should be a 1-D floating-point tensor of {batch} values, got {top_p.dtype} of shape "
          f"{list(top_p.shape)}.")
    check(min_ps is None or (min_ps.dim() == 1 and min_ps.shape[0] == batch),
          f"{fn}: min_ps should be a 1-D tensor of {batch} values.")
    check(post_sample in ("qSample", "multiNomial", "None"),
          f"{fn}: post_sample should be 'qSample', 'multiNomial' or 'None', got '{post_sample}'.")
    check(ks_max >= 1, f"{fn}: ks_max should be a positive integer, got {ks_max}.")
    if post_sample == "qSample" and q is not None:
        check(tuple(q.shape) == (batch, vocab) and q.is_floating_point(),
              f"{fn}: q should be a float32 tensor of logits' shape [{batch}, {vocab}] for qSample, got {q.dtype} "
              f"of shape {list(q.shape)}.")
    device = logits.device
    k_max = min((ks_max + 7) // 8 * 8, 1024)
    x = logits.float()
    k = top_k.long()
    p = top_p.float()
    pos = torch.arange(vocab, device=device)
    use_k = (k >= 1) & (k <= min(k_max, vocab))
    use_p = p < 1
    vals, order = x.sort(dim=-1, descending=True, stable=True)
    keep = ~use_k.unsqueeze(1) | (pos < k.unsqueeze(1))
    if input_is_logits:
        probs = vals.masked_fill(~keep, float("-inf")).softmax(dim=-1)
    else:
        probs = vals.masked_fill(~keep, 0.0)
    before = probs.cumsum(dim=-1) - probs
    keep_p = torch.where((p > 0).unsqueeze(1), before < p.unsqueeze(1), pos == 0)
    keep = keep & (~use_p.unsqueeze(1) | keep_p)
    if input_is_logits:
        probs = torch.where(((p <= 0).unsqueeze(1)) & (pos == 0), torch.ones((), device=device), probs)
    min_p = min_ps.float() if min_ps is not None else torch.full((batch,), -1.0, device=device)
    unsorted = (~use_k & ~use_p & (min_p < 1)).unsqueeze(1)
    raw = x.softmax(dim=-1) if input_is_logits else x
    order = torch.where(unsorted, pos.expand(batch, vocab), order)
    probs = torch.where(unsorted, raw, probs)
    keep = keep | unsorted
    row_max = probs.masked_fill(~keep, float("-inf")).amax(dim=-1, keepdim=True)
    keep_m = probs >= row_max * min_p.unsqueeze(1)
    keep = torch.where(((min_p > 0) & (min_p < 1)).unsqueeze(1), keep & keep_m, keep)
    keep = torch.where((min_p >= 1).unsqueeze(1), pos == 0, keep)
    if post_sample == "multiNomial":
        weights = probs.masked_fill(~keep, 0.0)
        choice = torch.multinomial(weights, 1, replacement=True, generator=generator)
    else:
        score = probs
        if post_sample == "qSample" and q is not None:
            rank = (keep.long().cumsum(dim=-1) - 1).clamp(min=0)
            score = probs / (q.float().abs().gather(1, rank) + eps)
        choice = score.masked_fill(~keep, float("-inf")).argmax(dim=-1, keepdim=True)
    selected = order.gather(1, choice).reshape(batch)
    def_logit = float("-inf") if input_is_logits else 0.0
    kept_logits = torch.where(keep, x.gather(1, order), torch.full((), def_logit, device=device))
    select = torch.empty_like(x).scatter_(1, order, kept_logits)
    return selected, select


define("npu_top_k_top_p_sample(Tensor logits, Tensor top_k, Tensor top_p, Tensor? q=None, float? eps=1e-8, "
       "bool? is_need_logits=False, int? top_k_guess=32, Tensor? min_ps=None, int? ks_max=1024, "
       "bool? input_is_logits=True, str? post_sample='qSample', Generator? generator=None) -> (Tensor, Tensor)",
       npu_top_k_top_p_sample)


# --- npu_advance_step_flashattn ------------------------------------------------

def npu_advance_step_flashattn(input_tokens, sampled_token_ids, input_positions, seq_lens, slot_mapping,
                               block_tables, num_seqs, num_queries, block_size, *, spec_token=None,
                               accepted_num=None):
    """vLLM's advance_step. Plain: for the first num_queries sequences
    ``input_tokens = sampled[:, 0]``, ``input_positions = seq_lens``,
    ``seq_lens += 1``, ``slot_mapping = block_tables[i, pos // bs] * bs + pos % bs``;
    the padding sequences up to num_seqs get token 0, position 0 and slot -1.
    Speculative (spec_token (num_seqs, spec_num)): each request owns 1 + spec_num
    entries; positions advance by 1 + accepted_num, seq_lens = positions + 1,
    the first token is the last valid (>= 0) sampled token, the rest spec_token."""
    fn = "npu_advance_step_flashattn"
    tensors = (("input_tokens", input_tokens), ("sampled_token_ids", sampled_token_ids),
               ("input_positions", input_positions), ("seq_lens", seq_lens), ("slot_mapping", slot_mapping),
               ("block_tables", block_tables))
    for name, tensor in tensors:
        check(tensor.dtype in _INTS, f"{fn}: {name} should be int64, got {tensor.dtype}.")
    check(block_size > 0 and num_seqs > 0 and num_queries > 0,
          f"{fn}: num_seqs, num_queries and block_size should be positive, got {num_seqs}, {num_queries} and "
          f"{block_size}.")
    check(block_tables.dim() == 2 and block_tables.shape[0] >= num_seqs,
          f"{fn}: block_tables should be 2-D with a row per sequence ({num_seqs}), got {list(block_tables.shape)}.")
    device = input_tokens.device
    if spec_token is None:
        check(num_seqs >= num_queries, f"{fn}: num_seqs ({num_seqs}) should not be less than num_queries "
                                       f"({num_queries}).")
        for name, tensor in (("input_tokens", input_tokens), ("input_positions", input_positions),
                             ("seq_lens", seq_lens), ("slot_mapping", slot_mapping)):
            check(tensor.dim() == 1 and tensor.shape[0] >= num_seqs,
                  f"{fn}: {name} should be 1-D with {num_seqs} entries, got shape {list(tensor.shape)}.")
        check(sampled_token_ids.dim() == 2 and sampled_token_ids.shape[0] >= num_queries,
              f"{fn}: sampled_token_ids should have shape [{num_queries}, 1], got {list(sampled_token_ids.shape)}.")
        nq = num_queries
        pos = seq_lens[:nq].clone()
        rows = torch.arange(nq, device=device)
        blocks = block_tables[rows, pos // block_size]
        input_tokens[:nq] = sampled_token_ids[:nq, 0].to(input_tokens.dtype)
        input_positions[:nq] = pos.to(input_positions.dtype)
        seq_lens[:nq] = pos + 1
        slot_mapping[:nq] = (blocks * block_size + pos % block_size).to(slot_mapping.dtype)
        input_tokens[nq:num_seqs] = 0
        input_positions[nq:num_seqs] = 0
        slot_mapping[nq:num_seqs] = -1
        return
    check(accepted_num is not None, f"{fn}: accepted_num is required with spec_token.")
    check(spec_token.dim() == 2 and spec_token.shape[0] == num_seqs,
          f"{fn}: spec_token should have shape [{num_seqs}, spec_num], got {list(spec_token.shape)}.")
    per_req = 1 + spec_token.shape[1]
    total = num_seqs * per_req
    for name, tensor in (("input_tokens", input_tokens), ("input_positions", input_positions),
                         ("seq_lens", seq_lens), ("slot_mapping", slot_mapping)):
        check(tensor.dim() == 1 and tensor.shape[0] == total,
              f"{fn}: {name} should be 1-D with num_seqs * (1 + spec_num) = {total} entries, got shape "
              f"{list(tensor.shape)}.")
    check(tuple(sampled_token_ids.shape) == (num_seqs, per_req),
          f"{fn}: sampled_token_ids should have shape [{num_seqs}, {per_req}], got {list(sampled_token_ids.shape)}.")
    check(accepted_num.numel() == num_seqs, f"{fn}: accepted_num should hold {num_seqs} counts, got shape "
                                            f"{list(accepted_num.shape)}.")
    input_positions += accepted_num.reshape(-1).to(input_positions.dtype).repeat_interleave(per_req) + 1
    seq_lens.copy_((input_positions + 1).to(seq_lens.dtype))
    sampled = sampled_token_ids[:num_seqs]
    n_valid = (sampled >= 0).long().cumprod(dim=1).sum(dim=1)  # tokens before the first -1
    last = sampled.gather(1, (n_valid - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    grid = input_tokens.view(num_seqs, per_req)
    grid[:, 0] = last.to(input_tokens.dtype)
    grid[:, 1:] = spec_token.to(input_tokens.dtype)
    req = torch.arange(num_seqs, device=device).repeat_interleave(per_req)
    pos = input_positions.long()
    blocks = block_tables[req, pos // block_size]
    slot_mapping.copy_((blocks * block_size + pos % block_size).to(slot_mapping.dtype))


define("npu_advance_step_flashattn(Tensor(a!) input_tokens, Tensor sampled_token_ids, Tensor(b!) input_positions, "
       "Tensor(c!) seq_lens, Tensor(d!) slot_mapping, Tensor block_tables, int num_seqs, int num_queries, "
       "int block_size, *, Tensor? spec_token=None, Tensor? accepted_num=None) -> ()", npu_advance_step_flashattn)


# --- npu_ring_attention_update -------------------------------------------------

def npu_ring_attention_update(prev_attn_out, prev_softmax_max, prev_softmax_sum, cur_attn_out, cur_softmax_max,
                              cur_softmax_sum, *, actual_seq_qlen=None, input_layout="SBH", input_softmax_layout=""):
    """``m = max(m1, m2)``, ``l = l1 e^(m1 - m) + l2 e^(m2 - m)``,
    ``out = out1 l1 e^(m1 - m) / l + out2 l2 e^(m2 - m) / l``. SBH: attention
    (S, B, N * D), softmax (B, N, S, 8); TND: attention (T, N, D), softmax
    (T, N, 8) with input_softmax_layout 'TND', else the BNS8 layout (N, T, 8)."""
    fn = "npu_ring_attention_update"
    check(input_layout in ("SBH", "TND"), f"{fn}: input_layout only supports 'SBH' or 'TND', but got "
                                          f"{input_layout}.")
    check(input_softmax_layout in ("", "SBH", "TND"),
          f"{fn}: input_softmax_layout only supports '', 'SBH' or 'TND', but got '{input_softmax_layout}'.")
    check(prev_attn_out.shape == cur_attn_out.shape, f"{fn}: prev_attn_out and cur_attn_out must have the same shape.")
    check(prev_attn_out.dtype == cur_attn_out.dtype, f"{fn}: prev_attn_out and cur_attn_out must have the same dtype.")
    check(prev_attn_out.dtype in _FLOATS, f"{fn}: attn_out dtype only supports float16, float32 or bfloat16, but "
                                          f"got {prev_attn_out.dtype}.")
    softmax = (prev_softmax_max, prev_softmax_sum, cur_softmax_max, cur_softmax_sum)
    check(all(t.shape == prev_softmax_max.shape for t in softmax), f"{fn}: softmax tensors must keep the same shape.")
    check(all(t.dtype == torch.float32 for t in softmax), f"{fn}: softmax tensors must use float32.")
    check(prev_softmax_max.dim() > 0 and prev_softmax_max.shape[-1] == 8,
          f"{fn}: softmax tensors require the last dimension to be 8.")
    check(prev_attn_out.dim() == 3, f"{fn}: attention tensors must be 3D, got {prev_attn_out.dim()}D.")
    if input_layout == "SBH":
        check(prev_softmax_max.dim() == 4, f"{fn}: softmax tensors must be 4D when input_layout is 'SBH'.")
        s, b, h = prev_attn_out.shape
        n = prev_softmax_max.shape[1]
        check(tuple(prev_softmax_max.shape[:3]) == (b, n, s) and n > 0 and h % n == 0,
              f"{fn}: softmax tensors should have shape [{b}, N, {s}, 8] with N dividing {h}, got "
              f"{list(prev_softmax_max.shape)}.")
    else:
        check(actual_seq_qlen is not None, f"{fn}: actual_seq_qlen is required when input_layout is 'TND'.")
        check(prev_softmax_max.dim() == 3, f"{fn}: softmax tensors must be 3D when input_layout is 'TND'.")
        t, n, _ = prev_attn_out.shape
        want = (t, n) if input_softmax_layout == "TND" else (n, t)
        check(tuple(prev_softmax_max.shape[:2]) == want,
              f"{fn}: with input_softmax_layout '{input_softmax_layout}' the softmax tensors should have shape "
              f"{list(want) + [8]}, got {list(prev_softmax_max.shape)}.")
    if actual_seq_qlen is not None:
        check(actual_seq_qlen.dtype == torch.int64, f"{fn}: actual_seq_qlen must use int64 dtype.")
    m1, l1, m2, l2 = prev_softmax_max, prev_softmax_sum, cur_softmax_max, cur_softmax_sum
    m = torch.maximum(m1, m2)
    l1s = l1 * torch.exp(m1 - m)
    l2s = l2 * torch.exp(m2 - m)
    total = l1s + l2s
    f1, f2 = (l1s / total)[..., 0], (l2s / total)[..., 0]
    out1, out2 = prev_attn_out.float(), cur_attn_out.float()
    if input_layout == "SBH":
        s, b, h = out1.shape
        n = f1.shape[1]
        f1 = f1.permute(2, 0, 1).unsqueeze(-1)  # (S, B, N, 1)
        f2 = f2.permute(2, 0, 1).unsqueeze(-1)
        out = (out1.view(s, b, n, h // n) * f1 + out2.view(s, b, n, h // n) * f2).view(s, b, h)
    else:
        if input_softmax_layout != "TND":
            f1, f2 = f1.transpose(0, 1), f2.transpose(0, 1)
        out = out1 * f1.unsqueeze(-1) + out2 * f2.unsqueeze(-1)
    return out.to(prev_attn_out.dtype), m, total


define("npu_ring_attention_update(Tensor prev_attn_out, Tensor prev_softmax_max, Tensor prev_softmax_sum, "
       "Tensor cur_attn_out, Tensor cur_softmax_max, Tensor cur_softmax_sum, *, Tensor? actual_seq_qlen=None, "
       "str input_layout=\"SBH\", str input_softmax_layout=\"\") -> (Tensor, Tensor, Tensor)",
       npu_ring_attention_update)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
