"""torch_npu.contrib.function.anchor_generator: npu_single_level_responsible_flags against
the grid formula."""

import torch

from torch_npu.contrib import function as cf

from contrib.inputs import NPU


def test_npu_single_level_responsible_flags():
    gt = torch.randint(0, 100, (64, 4), generator=torch.Generator().manual_seed(3))
    for (h, w), stride in (((10, 10), (32, 32)), ((20, 20), (16, 16)), ((7, 5), (8, 16))):
        cx, cy = (gt[:, 0] + gt[:, 2]) * 0.5, (gt[:, 1] + gt[:, 3]) * 0.5
        gx, gy = torch.floor(cx / stride[0]).long(), torch.floor(cy / stride[1]).long()
        inside = (gx < w) & (gy < h)
        grid = torch.zeros(h * w, dtype=torch.uint8)
        grid[(gy * w + gx)[inside]] = 1
        ref = grid[:, None].expand(h * w, 3).reshape(-1)
        out = cf.npu_single_level_responsible_flags((h, w), gt.to(NPU), stride, 3)
        assert out.dtype == torch.uint8
        assert torch.equal(out.cpu(), ref)


def test_npu_single_level_responsible_flags_box_dtypes_and_shape_check():
    import pytest
    gt = torch.tensor([[0., 0., 10., 10.], [40., 8., 60., 30.]])
    ref = cf.npu_single_level_responsible_flags((4, 4), gt.to(NPU), (16, 16), 2).cpu()
    assert ref.sum() == 4  # two cells, two anchors each
    for dtype in (torch.float16, torch.int32, torch.int64):
        out = cf.npu_single_level_responsible_flags((4, 4), gt.to(dtype).to(NPU), (16, 16), 2)
        assert torch.equal(out.cpu(), ref)
    with pytest.raises(ValueError, match="gt_bboxes"):
        cf.npu_single_level_responsible_flags((4, 4), gt[:, :3].to(NPU), (16, 16), 2)
