"""The paged KV cache of inference engines: npu_scatter_pa_kv_cache (write
tokens' keys and values into their cache slots) and its functional form.

Slot s of a cache with block size bs is offset s % bs of block s // bs; a
negative slot (a padding token) writes nothing. Two cache layouts, as in
op-plugin's reference:

- cache_mode "Norm" or None (ND): key_cache (blocks, block_size, heads, head_dim),
  ``key_cache[b, o] = key[i]``;
- cache_mode "PA_NZ" (the default; the NZ cache torch_npu makes with
  npu_format_cast(..., 29)): key_cache (blocks, heads * head_dim // last,
  block_size, last), each token's heads * head_dim values written in
  ``last``-wide rows, ``key_cache[b, k, o, :] = key[i].flatten()[k*last:(k+1)*last]``.

Finding the valid slots reads slot_mapping on the host (a synchronisation).
The compressed modes (compress_lens, compress_seq_offsets, seq_lens) raise
"not supported by vNPU". The in-place form has a Functionalize kernel (its
functional form, then copy_ into the caches), as scatter.py's do.
"""

import torch

from torch_npu.op_plugin._library import _LIB, check, define


def _write(fn, name, tokens, cache, slots, nz):
    check(cache.dtype == tokens.dtype, f"{fn}: {name}_cache should have {name}'s dtype {tokens.dtype}, got "
                                       f"{cache.dtype}.")
    check(cache.dim() == 4, f"{fn}: {name}_cache should be 4-D, got {cache.dim()}-D.")
    per_token = tokens[0].numel() if tokens.shape[0] else 0
    if nz:
        block_size, rows, last = cache.shape[2], cache.shape[1], cache.shape[3]
        check(rows * last == per_token or tokens.shape[0] == 0,
              f"{fn}: {name}_cache rows x last dimension ({rows} x {last}) should hold one token's "
              f"{per_token} values (PA_NZ layout: blocks, heads * head_dim // last, block_size, last).")
    else:
        block_size = cache.shape[1]
        check(tuple(cache.shape[2:]) == tuple(tokens.shape[1:]),
              f"{fn}: {name}_cache should have shape [blocks, block_size] + {list(tokens.shape[1:])} "
              f"(ND layout), got {list(cache.shape)}.")
    capacity = cache.shape[0] * block_size
    valid = slots >= 0
    picked = slots[valid]
    if picked.numel() and int(picked.max()) >= capacity:
        raise RuntimeError(f"{fn}: slot {int(picked.max())} is out of range for {name}_cache of "
                           f"{cache.shape[0]} blocks of {block_size} slots.")
    block, offset = picked // block_size, picked % block_size
    values = tokens[valid]
    if nz:
        cache[block, :, offset, :] = values.reshape(values.shape[0], cache.shape[1], cache.shape[3])
    else:
        cache[block, offset] = values


def _check(fn, key, value, slot_mapping, compress_lens, compress_seq_offsets, seq_lens, cache_mode):
    check(compress_lens is None and compress_seq_offsets is None and seq_lens is None,
          f"{fn}: the compressed cache modes (compress_lens, compress_seq_offsets, seq_lens) are not supported "
          f"by vNPU.")
    check(cache_mode in ("PA_NZ", "Norm", None), f"{fn}: cache_mode should be 'PA_NZ' or 'Norm', got "
                                                 f"{cache_mode!r}.")
    check(slot_mapping.dim() == 1 and not slot_mapping.is_floating_point(),
          f"{fn}: slot_mapping should be a 1-D integer tensor, got {slot_mapping.dtype} of shape "
          f"{list(slot_mapping.shape)}.")
    check(key.shape[0] == slot_mapping.shape[0] == value.shape[0],
          f"{fn}: key, value and slot_mapping should have one entry per token, got {key.shape[0]}, "
          f"{value.shape[0]} and {slot_mapping.shape[0]}.")
    return cache_mode == "PA_NZ"


def npu_scatter_pa_kv_cache(key, value, key_cache, value_cache, slot_mapping, *, compress_lens=None,
                            compress_seq_offsets=None, seq_lens=None, cache_mode="PA_NZ"):
    fn = "npu_scatter_pa_kv_cache"
    nz = _check(fn, key, value, slot_mapping, compress_lens, compress_seq_offsets, seq_lens, cache_mode)
    slots = slot_mapping.long()
    _write(fn, "key", key, key_cache, slots, nz)
    _write(fn, "value", value, value_cache, slots, nz)


def npu_scatter_pa_kv_cache_functional(key, value, key_cache, value_cache, slot_mapping, *, compress_lens=None,
                                       compress_seq_offsets=None, seq_lens=None, cache_mode="PA_NZ"):
    key_cache, value_cache = key_cache.clone(), value_cache.clone()
    npu_scatter_pa_kv_cache(key, value, key_cache, value_cache, slot_mapping, compress_lens=compress_lens,
                            compress_seq_offsets=compress_seq_offsets, seq_lens=seq_lens, cache_mode=cache_mode)
    return key_cache, value_cache


_ARGS = ("Tensor slot_mapping, *, Tensor? compress_lens=None, Tensor? compress_seq_offsets=None, "
         "Tensor? seq_lens=None, str? cache_mode='PA_NZ'")
define(f"npu_scatter_pa_kv_cache_functional(Tensor key, Tensor value, Tensor key_cache, Tensor value_cache, "
       f"{_ARGS}) -> (Tensor, Tensor)", npu_scatter_pa_kv_cache_functional)
define(f"npu_scatter_pa_kv_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
       f"{_ARGS}) -> ()", npu_scatter_pa_kv_cache)


def _functionalized(key, value, key_cache, value_cache, slot_mapping, **kwargs):
    new_key_cache, new_value_cache = torch.ops.npu.npu_scatter_pa_kv_cache_functional(
        key, value, key_cache, value_cache, slot_mapping, **kwargs)
    key_cache.copy_(new_key_cache)
    value_cache.copy_(new_value_cache)


_LIB.impl("npu_scatter_pa_kv_cache", _functionalized, "Functionalize")
