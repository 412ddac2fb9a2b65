"""Seeded inputs the contrib tests share, and ref_iou, the pairwise IoU that both the IoU
and the NMS tests compare against."""

import torch

NPU = "npu:0"


def rnd(*shape, seed=0, dtype=torch.float32, low=None, high=None):
    g = torch.Generator().manual_seed(seed)
    if low is not None:
        return (torch.rand(*shape, generator=g) * (high - low) + low).to(dtype)
    return torch.randn(*shape, generator=g).to(dtype)


def rand_int(shape, low, high, seed, dtype=torch.int8):
    return torch.randint(low, high, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def random_boxes(n, seed, size=100.):
    """(n, 4) well-formed corner boxes."""
    xy = rnd(n, 2, seed=seed, low=0, high=size)
    wh = rnd(n, 2, seed=seed + 1, low=1, high=size / 2)
    return torch.cat([xy, xy + wh], 1)


def ref_iou(b1, b2):
    lt = torch.max(b1[:, None, :2], b2[None, :, :2])
    rb = torch.min(b1[:, None, 2:], b2[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = lambda b: (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])  # noqa: E731
    return inter / (area(b1)[:, None] + area(b2)[None, :] - inter)
