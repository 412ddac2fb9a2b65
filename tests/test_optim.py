"""torch_npu.optim: the fused optimizers step as their torch.optim counterparts."""

import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import rnd


def test_fused_optimizers_match_torch_optim():
    for fused, plain, kwargs in [(torch_npu.optim.NpuFusedAdamW, torch.optim.AdamW, dict(lr=0.01)),
                                 (torch_npu.optim.NpuFusedAdam, torch.optim.Adam, dict(lr=0.01)),
                                 (torch_npu.optim.NpuFusedSGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9))]:
        a = torch.nn.Parameter(rnd(5, seed=80).npu())
        b = torch.nn.Parameter(rnd(5, seed=80))
        oa, ob = fused([a], **kwargs), plain([b], **kwargs)
        for step in range(3):
            g = rnd(5, seed=81 + step)
            a.grad, b.grad = g.npu(), g
            oa.step()
            ob.step()
        assert_close(a.detach().cpu(), b.detach(), atol=1e-6, rtol=1e-5)
