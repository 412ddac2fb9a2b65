"""torch_npu.contrib.module.ensemble_dropout: NpuCachedDropout's queue of pre-drawn masks."""

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

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
