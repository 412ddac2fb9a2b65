"""fuse_add_softmax_dropout: the attention probabilities of BERT-style models,

    dropout(softmax(attn_mask + attn_scores / sqrt(attn_head_size), dim=-1)),

in one fused kernel (torch_npu.npu_dropout_with_add_softmax) when the scores
have a shape the Ascend kernel is tuned for, and as the plain expression with
the caller's own dropout module otherwise, the rule torch_npu follows. The
two give the same values; vNPU's fused operator is that expression in ATen
operators.
"""

import math

import torch

import torch_npu

__all__ = ["fuse_add_softmax_dropout"]

# Shapes (batch, heads, rows, cols) that take the fused kernel: a sequence
# length it has tiles for, and batch * heads filling its 32-wide blocks.
_TUNED_ROWS = frozenset((128, 256, 384, 512))
_BATCH_HEADS_BLOCK = 32


def _takes_fused_kernel(attn_scores):
    if attn_scores.dim() != 4:
        raise ValueError(f"Expected attn_scores of shape (n, c, h, w), but got {tuple(attn_scores.shape)}")
    batch, heads, rows = attn_scores.shape[:3]
    return rows in _TUNED_ROWS and (batch * heads) % _BATCH_HEADS_BLOCK == 0


def fuse_add_softmax_dropout(training, dropout, attn_mask, attn_scores, attn_head_size, p=0.5, dim=-1):
    """Attention probabilities from raw (n, c, h, w) scores and an additive mask.

    ``training`` and ``p`` drive the fused kernel's dropout; the plain path
    applies ``dropout`` (an nn.Module, so its own mode and probability rule
    there). ``dim`` is accepted for torch_npu's signature only: the softmax
    is always over the last dim, as in torch_npu.
    """
    scale = 1 / math.sqrt(attn_head_size)
    if _takes_fused_kernel(attn_scores):
        drop_prob = p if training else 0.
        # It returns (mask, softmax, dropped softmax); the last is the answer.
        outputs = torch_npu.npu_dropout_with_add_softmax(attn_scores, attn_mask, alpha=scale, prob=drop_prob, dim=-1)
        return outputs[-1]
    # alpha= scales and adds in one rounding, where mask + scores * scale would round twice.
    return dropout(torch.softmax(torch.add(attn_mask, attn_scores, alpha=scale), dim=-1))
