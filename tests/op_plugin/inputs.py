"""Seeded inputs the op_plugin tests share: the same tensors on every run, and the devices
the differential tests run on."""

import torch

DEVICES = ["cpu", "npu"]


def gen(seed):
    return torch.Generator().manual_seed(seed)


def rnd(*shape, seed=0, dtype=torch.float32, lo=None, hi=None):
    """Standard normal, or uniform in [lo, hi) when lo is given, drawn from gen(seed)."""
    if lo is not None:
        return (torch.rand(*shape, generator=gen(seed)) * (hi - lo) + lo).to(dtype)
    return torch.randn(*shape, generator=gen(seed)).to(dtype)


def npu(t):
    return t.to("npu")
