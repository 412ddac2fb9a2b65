"""torch_npu.contrib.module.ps_roi_pooling: PSROIPool against a loop."""

import math

import pytest
import torch
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


def ref_ps_roi_pool(x, rois, scale, group, out_dim):
    res = []
    for b in range(rois.shape[0]):
        for r in range(rois.shape[2]):
            bi, x1, y1, x2, y2 = rois[b, :, r].tolist()
            sw, sh = round(x1) * scale, round(y1) * scale
            ew, eh = (round(x2) + 1) * scale, (round(y2) + 1) * scale
            bw, bh = max(ew - sw, 0.1) / group, max(eh - sh, 0.1) / group
            o = torch.zeros(out_dim, group, group)
            for i in range(group):
                h0 = min(max(math.floor(i * bh + sh), 0), x.shape[2])
                h1 = min(max(math.ceil((i + 1) * bh + sh), 0), x.shape[2])
                for j in range(group):
                    w0 = min(max(math.floor(j * bw + sw), 0), x.shape[3])
                    w1 = min(max(math.ceil((j + 1) * bw + sw), 0), x.shape[3])
                    for c in range(out_dim):
                        if h1 > h0 and w1 > w0:
                            o[c, i, j] = x[int(bi), (c * group + i) * group + j, h0:h1, w0:w1].mean()
            res.append(o)
    return torch.stack(res)


def test_ps_roi_pool():
    group, out_dim = 3, 2
    x = rnd(2, out_dim * group * group, 12, 12, seed=121)
    rois = torch.tensor([[[0, 2., 1., 30., 40.], [0, 10., 10., 20., 22.]],
                         [[1, 0., 0., 47., 47.], [1, 5., 30., 9., 33.]]]).permute(0, 2, 1)
    a = x.clone().to(NPU).requires_grad_()
    out = cm.PSROIPool(group, group, 1 / 4., group, out_dim)(a, rois.to(NPU))
    assert out.shape == (4, out_dim, group, group)
    assert_close(out.detach().cpu(), ref_ps_roi_pool(x, rois, 1 / 4., group, out_dim), atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert a.grad is not None and a.grad.sum() > 0
    with pytest.raises(ValueError, match="pooled_height == pooled_width == group_size"):
        cm.PSROIPool(7, 6, 1 / 16., 7, 22)
    assert "pooled_width=3" in repr(cm.PSROIPool(3, 3, 1., 3, 2))
