"""The paged KV cache of inference engines: npu_scatter_pa_kv_cache (write
tokens' keys and values into their cache slots), npu_gather_pa_kv_cache
(read sequences back out of it), and their functional forms.

Slot s of a cache with block size bs is offset s % bs of block s // bs; a
negative slot (a padding token) writes nothing. Two cache layouts, as in
op-plugin's reference:

- cache_mode "Norm" or None (ND): key_cache (blocks, block_size, heads, head_dim),
  ``key_cache[b, o] = key[i]``;
- cache_mode "PA_NZ" (the default; the NZ cache torch_npu makes with
  npu_format_cast(..., 29)): key_cache (blocks, heads * head_dim // last,
  block_size, last), each token's heads * head_dim values written in
  ``last``-wide rows, ``key_cache[b, k, o, :] = key[i].flatten()[k*last:(k+1)*last]``.

npu_gather_pa_kv_cache: sequence i (``seq_lens[i]`` tokens, or the
differences of a cumulative ``seq_lens`` with is_seq_lens_cumsum) reads
token j from block ``block_tables[i][seq_offset[i] // block_size +
j // block_size]`` at offset j % block_size; the tokens of all sequences
fill ``key`` / ``value`` from row 0, up to their length; a block index
beyond the table or the cache gives zeros. The cache is PA_NZ when it
carries the NZ format (npu_format_cast(..., 29)), ND otherwise.

Finding the valid slots (and the sequence lengths) reads them on the host
(a synchronisation).
The compressed modes (compress_lens, compress_seq_offsets, seq_lens) raise
"not supported by vNPU". The in-place form has a Functionalize kernel (its
functional form, then copy_ into the caches), as scatter.py's do.
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define, define_functionalization


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


define_functionalization("npu_scatter_pa_kv_cache", _functionalized)


def _gather_rows(fn, name, cache, out, nz, block_ids, offsets, valid):
    check(cache.dtype == out.dtype, f"{fn}: {name} should have {name}_cache's dtype {cache.dtype}, got {out.dtype}.")
    n = block_ids.shape[0]
    safe_ids = torch.where(valid, block_ids, 0)
    if nz:
        rows = cache[safe_ids, :, offsets, :].reshape(n, -1)
        check(rows.shape[1] == out[0].numel(), f"{fn}: {name}_cache (PA_NZ) holds {rows.shape[1]} values per "
                                               f"token, {name} {out[0].numel()}.")
        rows = rows.reshape((n,) + tuple(out.shape[1:]))
    else:
        check(tuple(cache.shape[2:]) == tuple(out.shape[1:]),
              f"{fn}: {name}_cache should have shape [blocks, block_size] + {list(out.shape[1:])}, got "
              f"{list(cache.shape)}.")
        rows = cache[safe_ids, offsets]
    rows = torch.where(valid.reshape((n,) + (1,) * (rows.dim() - 1)), rows, 0)
    out[:n].copy_(rows)


def npu_gather_pa_kv_cache(key_cache, value_cache, block_tables, seq_lens, key, value, *, seq_offset=None,
                           is_seq_lens_cumsum=False):
    fn = "npu_gather_pa_kv_cache"
    check(block_tables.dim() == 2 and not block_tables.is_floating_point(),
          f"{fn}: block_tables should be a 2-D integer tensor, got {block_tables.dtype} of shape "
          f"{list(block_tables.shape)}.")
    lens = [int(x) for x in seq_lens.tolist()]
    if is_seq_lens_cumsum:
        lens = [b - a for a, b in zip(lens, lens[1:])]
    check(len(lens) == block_tables.shape[0] and all(x >= 0 for x in lens),
          f"{fn}: seq_lens should give one non-negative length per row of block_tables ({block_tables.shape[0]}), "
          f"got {lens}.")
    check(key_cache.dim() == 4 and value_cache.dim() == 4, f"{fn}: key_cache and value_cache should be 4-D.")
    nz = int(torch.ops.npu.get_npu_format(key_cache)) == 29
    block_size = key_cache.shape[2] if nz else key_cache.shape[1]
    starts = [0] * len(lens) if seq_offset is None else [int(x) // block_size for x in seq_offset.tolist()]
    device = key.device
    lengths = torch.tensor(lens, dtype=torch.int64)
    batch = torch.repeat_interleave(torch.arange(len(lens)), lengths)
    first = torch.cumsum(lengths, 0) - lengths
    j = torch.arange(batch.shape[0]) - first[batch]
    n = min(batch.shape[0], key.shape[0], value.shape[0])
    batch, j = batch[:n], j[:n]
    table_index = torch.tensor(starts, dtype=torch.int64)[batch] + j // block_size
    in_table = table_index < block_tables.shape[1]
    batch, table_index, in_table = batch.to(device), table_index.to(device), in_table.to(device)
    block_ids = block_tables.long()[batch, table_index.clamp(max=max(block_tables.shape[1] - 1, 0))]
    valid = in_table & (block_ids >= 0) & (block_ids < key_cache.shape[0])
    offsets = (j % block_size).to(device)
    _gather_rows(fn, "key", key_cache, key, nz, block_ids, offsets, valid)
    _gather_rows(fn, "value", value_cache, value, nz, block_ids, offsets, valid)


def npu_gather_pa_kv_cache_functional(key_cache, value_cache, block_tables, seq_lens, key, value, *,
                                      seq_offset=None, is_seq_lens_cumsum=False):
    key, value = key.clone(), value.clone()
    npu_gather_pa_kv_cache(key_cache, value_cache, block_tables, seq_lens, key, value, seq_offset=seq_offset,
                           is_seq_lens_cumsum=is_seq_lens_cumsum)
    return key, value


define("npu_gather_pa_kv_cache_functional(Tensor key_cache, Tensor value_cache, Tensor block_tables, "
       "Tensor seq_lens, Tensor key, Tensor value, *, Tensor? seq_offset=None, bool is_seq_lens_cumsum=False) "
       "-> (Tensor, Tensor)", npu_gather_pa_kv_cache_functional)
define("npu_gather_pa_kv_cache(Tensor key_cache, Tensor value_cache, Tensor block_tables, Tensor seq_lens, "
       "Tensor(a!) key, Tensor(b!) value, *, Tensor? seq_offset=None, bool is_seq_lens_cumsum=False) -> ()",
       npu_gather_pa_kv_cache)


def _functionalized_gather(key_cache, value_cache, block_tables, seq_lens, key, value, **kwargs):
    new_key, new_value = torch.ops.npu.npu_gather_pa_kv_cache_functional(
        key_cache, value_cache, block_tables, seq_lens, key, value, **kwargs)
    key.copy_(new_key)
    value.copy_(new_value)


define_functionalization("npu_gather_pa_kv_cache", _functionalized_gather)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
