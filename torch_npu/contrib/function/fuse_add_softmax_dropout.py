"""BERT's attention probabilities: dropout(softmax(mask + scores / sqrt(head_size))).

Real torch_npu takes the fused npu_dropout_with_add_softmax kernel for the
shapes it is fast on (last-but-one dim in 128/256/384/512, n*c a multiple of
32) and the plain expression otherwise; both compute the same values. The
fused branch calls vNPU's npu_dropout_with_add_softmax, which is that same
formula in ATen operators.
"""

import math

import torch
import torch.nn.functional as F

import torch_npu

__all__ = ["fuse_add_softmax_dropout"]

_FUSED_SEQ_LENS = (128, 256, 384, 512)


def fuse_add_softmax_dropout(training, dropout, attn_mask, attn_scores, attn_head_size, p=0.5, dim=-1):
    """dropout(softmax(attn_mask + attn_scores / sqrt(attn_head_size), -1)) on (n, c, h, w) scores.

    Args:
        training: apply dropout (fused branch; the module decides otherwise).
        dropout: the dropout module of the plain branch.
        attn_mask, attn_scores: additive mask and raw scores, broadcastable.
        attn_head_size: the head size; the scores are scaled by its rsqrt.
        p: dropout probability of the fused branch.
        dim: accepted for compatibility; like real torch_npu, softmax is over -1.
    """
    if attn_scores.dim() != 4:
        raise ValueError(f"Expected attn_scores of shape (n, c, h, w), but got {tuple(attn_scores.shape)}")
    n, c, h, _ = attn_scores.size()
    alpha = 1 / math.sqrt(attn_head_size)
    if h in _FUSED_SEQ_LENS and (n * c) % 32 == 0:
        drop_p = p if training else 0.
        _, _, attn_probs = torch_npu.npu_dropout_with_add_softmax(attn_scores, attn_mask, alpha, drop_p, -1)
        return attn_probs
    attn_probs = F.softmax(torch.add(attn_mask, attn_scores, alpha=alpha), dim=-1)
    return dropout(attn_probs)
