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


def _timm_drop_path(x, u, keep):
    """timm's drop_path on the CPU, with its U[0, 1) draw given."""
    return x.div(keep) * (keep + u).floor()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_npu_drop_path_matches_timm_on_cpu(dtype):
    x = rnd(8, 5, 3, seed=152, dtype=dtype)
    u = rnd(8, 1, 1, seed=153, low=0, high=1, dtype=dtype)
    got = cm.drop_path.npu_drop_path(x.to(NPU), u.to(NPU), 0.6)
    assert_close(got.cpu(), _timm_drop_path(x, u, 0.6))


@pytest.mark.parametrize("shape", [(6, 4), (5, 2, 3, 3)])
def test_each_step_consumes_the_draws_queued_for_it(fresh_task_queues, shape):
    # Two drop paths of one shape: two requests, so each step draws two tensors, one per call.
    first, second = cm.NpuDropPath(0.25), cm.NpuDropPath(0.25)
    model = nn.Sequential(first, second)
    x = rnd(*shape, seed=154).to(NPU)
    assert model(x) is x
    cm.NpuDropPath.enable_droppath_ensemble(model)
    for _ in range(3):
        out = model(x)  # the pre-hooks queue this step's two draws, then the calls take them in order
        torch.npu.synchronize()
        ratios = (out.cpu() / x.cpu()).reshape(shape[0], -1)
        kept = ratios[:, 0]
        # per sample: dropped by either, or kept by both (scaled twice)
        scaled_twice = (kept != 0)
        assert_close(kept, scaled_twice.float() / 0.75 ** 2)
        assert_close(ratios, kept[:, None].expand_as(ratios))
