"""torch_npu.contrib.module.drop_path: NpuDropPath's pre-drawn randomness and its formula."""

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


def test_npu_drop_path_protocol_and_formula(fresh_task_queues):
    x = rnd(16, 3, 4, seed=151).to(NPU).requires_grad_()
    assert cm.NpuDropPath(0.)(x) is x and cm.NpuDropPath(0.3).eval()(x) is x
    drop = cm.NpuDropPath(0.5)
    model = nn.Sequential(drop)
    assert model(x) is x  # first step: only registers the request
    cm.NpuDropPath.enable_droppath_ensemble(model)
    torch.manual_seed(0)
    out = model(x)  # the pre-hook drew one random tensor per request
    torch.npu.synchronize()
    per_sample = out.detach().cpu() / x.detach().cpu()
    kept = per_sample[:, 0, 0]
    assert set(kept.unique().tolist()) <= {0.0, 2.0} and 0 < (kept == 2).sum() < 16
    assert_close(per_sample, kept.view(16, 1, 1).expand_as(per_sample))
    out.sum().backward()
    assert_close(x.grad.cpu(), kept.view(16, 1, 1).expand(16, 3, 4))
    with pytest.raises(ValueError, match="drop_prob"):
        cm.NpuDropPath(1.0)
    with pytest.raises(RuntimeError, match="input type"):
        cm.NpuDropPath(0.2)([x])
