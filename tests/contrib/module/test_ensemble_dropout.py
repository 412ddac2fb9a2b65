"""torch_npu.contrib.module.ensemble_dropout: NpuCachedDropout's queue of pre-drawn masks."""

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

import torch_npu
from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


def test_npu_cached_dropout_protocol(fresh_task_queues):
    x = rnd(32, 32, seed=161).to(NPU)
    dropout = cm.NpuCachedDropout(0.25)
    model = nn.Sequential(nn.Identity())
    assert dropout(x) is x  # no mask queued yet
    assert dropout([x.shape, x.dtype, x.device]) is None
    cm.NpuCachedDropout.enable_dropout_ensemble(model)
    model(x)  # forward hook tops up the queue: two requests so far
    torch.npu.synchronize()
    out = dropout(x)
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.1
    assert_close(out[kept].cpu(), (x[kept] / 0.75).cpu())
    mask = dropout([x.shape, x.dtype, x.device])
    assert mask.dtype == torch.bool and mask.shape == x.shape
    assert cm.NpuCachedDropout(0.)(x) is x
    with pytest.raises(RuntimeError, match="input type"):
        dropout("x")
    assert cm.NpuFairseqDropout is cm.NpuCachedDropout


def test_npu_pregen_dropout_takes_slices_of_one_bit_mask_per_probability():
    saved = (set(cm.NpuPreGenDropout.prob), dict(cm.NpuPreGenDropout.task_dict))
    cm.NpuPreGenDropout.prob.clear()
    cm.NpuPreGenDropout.task_dict.clear()
    try:
        x = rnd(4, 300, seed=162).to(NPU)
        dropout = cm.NpuPreGenDropout(0.5)
        with pytest.raises(RuntimeError, match="prob error"):
            dropout(x)  # no mask drawn before enable_dropout_ensemble
        model = nn.Sequential(nn.Identity())
        cm.NpuPreGenDropout.enable_dropout_ensemble(model)
        task = cm.NpuPreGenDropout.task_dict[0.5]
        assert task.mask.numel() == 16 * 1024 * 1024 // 8 and task.idx == 0  # 16 Mi elements, a bit each
        model(x)  # pre-hook waits for the side stream; the forward hook draws the next mask
        torch.npu.synchronize()
        mask = dropout([x.shape, x.dtype, x.device])  # 1200 elements: 10 blocks of 128 bits
        assert mask.numel() == 160 and task.idx == 0
        out = dropout(x)
        assert task.idx == 160
        expected = torch_npu.npu_dropout_do_mask(x, mask, 0.5)[0]
        assert_close(out.cpu(), expected.cpu())  # the slice taken is the one the list call showed
        kept = out != 0
        assert 0.35 < kept.float().mean().item() < 0.65
        assert_close(out[kept].cpu(), (x[kept] * 2).cpu())
        second = dropout(x)
        assert task.idx == 320 and not torch.equal(second.cpu(), out.cpu())  # the next slice
        task.idx = task.mask.numel() - 10  # a step that runs out: reuses the start, draws more next time
        assert_close(dropout(x).cpu(), expected.cpu())
        assert task.max_mb == 17
        assert cm.NpuPreGenDropout(0.)(x) is x
        with pytest.raises(RuntimeError, match="input type"):
            dropout("x")
    finally:
        cm.NpuPreGenDropout.prob.clear()
        cm.NpuPreGenDropout.prob.update(saved[0])
        cm.NpuPreGenDropout.task_dict.clear()
        cm.NpuPreGenDropout.task_dict.update(saved[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_npu_cached_dropout_matches_dropout_on_cpu_with_the_same_mask(fresh_task_queues, dtype):
    p = 0.4
    x = rnd(64, 48, seed=163, dtype=dtype)
    # The dropout runs inside the hooked model, as in fairseq: the forward's pre-hook makes the current
    # stream wait for the masks the side stream drew after the last step (called outside the model, a
    # dropout could read its mask before the side stream has drawn it).
    model = nn.Sequential(cm.NpuCachedDropout(p))
    cm.NpuCachedDropout.enable_dropout_ensemble(model)
    assert_close(model(x.to(NPU)).cpu(), x)  # the first call registers the request; its mask is drawn after it
    for _ in range(2):
        out = model(x.to(NPU)).cpu()
        keep = out != 0  # x has no zeros: a zero output is a dropped element
        assert out.dtype == dtype and 0.5 < keep.float().mean().item() < 0.7
        assert_close(out, x * keep.to(dtype) / (1 - p))  # the CPU's dropout, with the mask the npu drew


def test_each_key_has_its_own_mask_queue(fresh_task_queues):
    # Another shape, dtype or p is another queue: a mask drawn for one is never applied to another.
    dropout, other_p = cm.NpuCachedDropout(0.5), cm.NpuCachedDropout(0.25)
    a, b = rnd(8, 8, seed=164).to(NPU), rnd(4, 8, seed=165).to(NPU)
    model = nn.Sequential(nn.Identity())
    assert dropout(a) is a and dropout(b) is b and other_p(a) is a and dropout(a.half()) is not None
    cm.NpuCachedDropout.enable_dropout_ensemble(model)
    model(a)
    assert len(cm.NpuCachedDropout.task_dict) == 4
    assert dropout(b).shape == b.shape and other_p(a).shape == a.shape and dropout(a).shape == a.shape
    assert dropout(a) is a  # one request per step for this key: its mask is used up


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_npu_pregen_dropout_matches_dropout_on_cpu_with_the_bits_it_shows(dtype):
    saved = (set(cm.NpuPreGenDropout.prob), dict(cm.NpuPreGenDropout.task_dict))
    cm.NpuPreGenDropout.prob.clear()
    cm.NpuPreGenDropout.task_dict.clear()
    try:
        p = 0.3
        dropout = cm.NpuPreGenDropout(p)
        cm.NpuPreGenDropout.enable_dropout_ensemble(nn.Sequential(nn.Identity()))
        for shape in ((5, 70), (3, 2, 128), (1,)):  # padded to 384, exactly 768, padded to 128 elements
            x = rnd(*shape, seed=166, dtype=dtype)
            packed = dropout([x.shape, x.dtype, x.device]).cpu()  # the slice the next call takes
            assert packed.dtype == torch.uint8 and packed.numel() * 8 % 128 == 0
            out = dropout(x.to(NPU)).cpu()
            # Bit i of the slice (least significant first) keeps element i.
            bits = (packed[:, None].int() >> torch.arange(8)) & 1
            keep = bits.flatten()[:x.numel()].view(shape).bool()
            assert_close(out, x * keep.to(dtype) / (1 - p))
    finally:
        cm.NpuPreGenDropout.prob.clear()
        cm.NpuPreGenDropout.prob.update(saved[0])
        cm.NpuPreGenDropout.task_dict.clear()
        cm.NpuPreGenDropout.task_dict.update(saved[1])
