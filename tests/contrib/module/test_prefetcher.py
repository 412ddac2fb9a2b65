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


def test_prefetcher_copies_on_the_given_stream_and_handles_an_empty_loader():
    side = torch.npu.Stream()
    prefetcher = cm.Prefetcher([(rnd(2, 2, seed=7), torch.tensor([1, 2]))], stream=side)
    assert prefetcher.stream is side
    x, y = prefetcher.next()
    assert torch.equal(x.cpu(), rnd(2, 2, seed=7)) and torch.equal(y.cpu(), torch.tensor([1, 2]))
    assert cm.Prefetcher([]).next() == (None, None)
