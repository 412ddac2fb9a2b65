"""Dropout driven by a uint8 (byte) mask, real torch_npu's dropout_with_byte_mask.

The Ascend kernel draws a stateless byte mask; the values it produces follow
the dropout formula, which is what this computes: where the mask keeps an
element, x / (1 - p), else 0. vNPU draws the mask with ``torch.rand`` on the
tensor's device, so ``torch.manual_seed`` makes it reproducible.
"""

import torch

__all__ = ["dropout_with_byte_mask"]


def _check_p(p):
    if p < 0. or p > 1.:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout_with_byte_mask(input1, p=0.5, training=True, inplace=False):
    """Dropout of ``input1`` with probability ``p`` when ``training``; differentiable.

    ``inplace=True`` is refused, as in real torch_npu (no in-place kernel).
    """
    _check_p(p)
    if inplace:
        raise ValueError("dropout probability has no-inplace computing.")
    if not training or p == 0.:
        return input1
    if p == 1.:
        return input1 * 0
    keep = (torch.rand(input1.shape, device=input1.device) >= p).to(torch.uint8)
    return input1 * keep.to(input1.dtype) / (1. - p)
