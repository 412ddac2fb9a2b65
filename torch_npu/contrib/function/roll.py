"""``torch.roll`` over two dims of an NHWC tensor (swin-transformer's shifted windows).

Real torch_npu rewrites the roll as an index_select with a cached index,
which is faster on the device. The values are those of ``torch.roll``, which
this computes directly; autograd differentiates it (the gradient is the
opposite roll).
"""

import torch

__all__ = ["roll"]


def roll(x, shifts, dims):
    """``torch.roll(x, shifts, dims)`` for a 4-D ``x`` and two shifts and dims."""
    if x.dim() != 4:
        raise ValueError("Expected x.dim() == 4")
    if len(shifts) != 2:
        raise ValueError("Expected len(shifts) == 2")
    if len(dims) != 2:
        raise ValueError("Expected len(dims) == 2")
    return torch.roll(x, shifts=tuple(shifts), dims=tuple(dims))
