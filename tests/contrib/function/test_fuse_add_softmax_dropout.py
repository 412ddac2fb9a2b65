"""torch_npu.contrib.function.fuse_add_softmax_dropout against softmax(mask + scores / sqrt(d))."""

import math

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

from torch_npu.contrib import function as cf

from contrib.inputs import NPU, rnd


@pytest.mark.parametrize("shape", [(4, 8, 128, 16), (2, 3, 9, 16)])  # fused branch, plain branch
def test_fuse_add_softmax_dropout(shape):
    n, c, h, w = shape
    mask, scores = rnd(n, c, h, w, seed=1), rnd(n, c, h, w, seed=2)
    ref = torch.softmax(mask + scores / math.sqrt(64), -1)
    dropout = nn.Dropout(0.)
    out = cf.fuse_add_softmax_dropout(True, dropout, mask.to(NPU), scores.to(NPU), 64, p=0.)
    assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    out = cf.fuse_add_softmax_dropout(False, dropout, mask.to(NPU), scores.to(NPU), 64, p=0.5)
    assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)  # eval: no dropout on the fused branch
    torch.manual_seed(0)
    dropped = cf.fuse_add_softmax_dropout(True, nn.Dropout(0.5), mask.to(NPU), scores.to(NPU), 64, p=0.5)
    kept = dropped.cpu() != 0
    assert 0.3 < kept.float().mean() < 0.7
    assert_close(dropped.cpu()[kept], (ref * 2)[kept], atol=1e-5, rtol=1e-5)


def test_fuse_add_softmax_dropout_wants_4d_scores():
    scores = rnd(8, 128, 16, seed=3)
    with pytest.raises(ValueError, match=r"shape \(n, c, h, w\), but got \(8, 128, 16\)"):
        cf.fuse_add_softmax_dropout(True, nn.Dropout(0.), scores.to(NPU), scores.to(NPU), 64)
