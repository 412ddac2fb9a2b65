"""torch_npu.contrib.module.prefetcher: Prefetcher yields every batch on npu."""

import torch

from torch_npu.contrib import module as cm

from contrib.inputs import rnd


def test_prefetcher_yields_every_batch_on_npu():
    batches = [(rnd(4, 3, seed=i), torch.tensor([i, i, i, i])) for i in range(3)]
    prefetcher = cm.Prefetcher(batches)
    for want_x, want_y in batches:
        x, y = prefetcher.next()
        assert x.device.type == "npu" and y.device.type == "npu"
        assert torch.equal(x.cpu(), want_x) and torch.equal(y.cpu(), want_y)
    assert prefetcher.next() == (None, None)
