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
