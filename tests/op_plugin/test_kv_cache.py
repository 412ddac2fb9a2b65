"""npu_scatter_pa_kv_cache against a token-by-token reference of op-plugin's
two cache layouts (ND and PA_NZ)."""
import pytest
import torch

import torch_npu


def _reference(key, cache, slots, nz):
    cache = cache.clone()
    for i, slot in enumerate(slots.tolist()):
        if slot < 0:
            continue
        block_size = cache.shape[2] if nz else cache.shape[1]
        b, o = divmod(slot, block_size)
        if nz:
            last = cache.shape[3]
            flat = key[i].reshape(-1)
            for k in range(cache.shape[1]):
                cache[b, k, o] = flat[k * last:(k + 1) * last]
        else:
            cache[b, o] = key[i]
    return cache


@pytest.mark.parametrize("cache_mode", ["PA_NZ", "Norm", None])
def test_tokens_land_in_their_slots_and_padding_slots_write_nothing(cache_mode):
    torch.manual_seed(0)
    tokens, heads, dk, dv, blocks, block_size, last = 10, 4, 32, 16, 3, 8, 16
    key, value = torch.randn(tokens, heads, dk).half(), torch.randn(tokens, heads, dv).half()
    nz = cache_mode == "PA_NZ"
    if nz:
        key_cache = torch.randn(blocks, heads * dk // last, block_size, last).half()
        value_cache = torch.zeros(blocks, heads * dv // last, block_size, last).half()
    else:
        key_cache = torch.randn(blocks, block_size, heads, dk).half()
        value_cache = torch.zeros(blocks, block_size, heads, dv).half()
    slots = torch.randperm(blocks * block_size)[:tokens].int()
    slots[3] = -1  # a padding token
    kc, vc = key_cache.npu(), value_cache.npu()
    torch_npu.npu_scatter_pa_kv_cache(key.npu(), value.npu(), kc, vc, slots.npu(), cache_mode=cache_mode)
    assert torch.equal(kc.cpu(), _reference(key, key_cache, slots, nz))
    assert torch.equal(vc.cpu(), _reference(value, value_cache, slots, nz))
    # The functional form leaves its inputs alone and returns the same caches.
    fk, fv = torch_npu.npu_scatter_pa_kv_cache_functional(key.npu(), value.npu(), key_cache.npu(),
                                                          value_cache.npu(), slots.npu(), cache_mode=cache_mode)
    assert torch.equal(fk.cpu(), kc.cpu()) and torch.equal(fv.cpu(), vc.cpu())


def test_bad_arguments_are_named():
    key = torch.randn(2, 1, 8).half().npu()
    cache = torch.zeros(1, 4, 1, 8).half().npu()
    with pytest.raises(RuntimeError, match="out of range"):
        torch_npu.npu_scatter_pa_kv_cache(key, key, cache, cache.clone(), torch.tensor([0, 9]).npu(),
                                          cache_mode="Norm")
    with pytest.raises(RuntimeError, match="key_cache should have key's dtype"):
        torch_npu.npu_scatter_pa_kv_cache(key, key, cache.float(), cache, torch.tensor([0, 1]).npu(),
                                          cache_mode="Norm")
    with pytest.raises(RuntimeError, match="compressed cache modes"):
        torch_npu.npu_scatter_pa_kv_cache(key, key, cache, cache, torch.tensor([0, 1]).npu(),
                                          seq_lens=torch.tensor([2]).npu())
    with pytest.raises(RuntimeError, match="one entry per token"):
        torch_npu.npu_scatter_pa_kv_cache(key, key, cache, cache, torch.tensor([0]).npu(), cache_mode="Norm")


def _gather_reference(cache, tables, lens, out, offsets, nz):
    out = out.clone()
    block_size = cache.shape[2] if nz else cache.shape[1]
    row = 0
    for i, length in enumerate(lens):
        start = 0 if offsets is None else offsets[i] // block_size
        for j in range(length):
            if row >= out.shape[0]:
                return out
            index = start + j // block_size
            block = tables[i][index] if index < len(tables[i]) else -1
            if 0 <= block < cache.shape[0]:
                token = cache[block, :, j % block_size, :].reshape(out[row].shape) if nz else cache[block, j % block_size]
            else:
                token = torch.zeros_like(out[row])
            out[row] = token
            row += 1
    return out


@pytest.mark.parametrize("nz", [False, True])
@pytest.mark.parametrize("cumsum, offsets", [(False, None), (True, [0, 8, 0])])
def test_gather_reads_sequences_back_from_their_blocks(nz, cumsum, offsets):
    torch.manual_seed(1)
    blocks, block_size, heads, dim, last = 6, 8, 2, 16, 16
    shape = (blocks, heads * dim // last, block_size, last) if nz else (blocks, block_size, heads, dim)
    key_cache, value_cache = torch.randn(shape).half(), torch.randn(shape).half()
    tables = [[2, 5, 9], [1, 0, 3], [4, -1, 0]]  # 9 is beyond the cache, -1 is no block
    lens = [13, 7, 10]
    seq_lens = torch.tensor([0, 13, 20, 30] if cumsum else lens, dtype=torch.int32)
    key, value = torch.full((28, heads, dim), 7.0).half(), torch.full((28, heads, dim), 7.0).half()
    kc, vc = key_cache.npu(), value_cache.npu()
    if nz:
        kc, vc = torch_npu.npu_format_cast(kc, 29), torch_npu.npu_format_cast(vc, 29)
    k, v = key.npu(), value.npu()
    torch_npu.npu_gather_pa_kv_cache(kc, vc, torch.tensor(tables, dtype=torch.int32).npu(), seq_lens.npu(), k, v,
                                     seq_offset=None if offsets is None else torch.tensor(offsets).npu(),
                                     is_seq_lens_cumsum=cumsum)
    assert torch.equal(k.cpu(), _gather_reference(key_cache, tables, lens, key, offsets, nz))
    assert torch.equal(v.cpu(), _gather_reference(value_cache, tables, lens, value, offsets, nz))
