"""Cross entropy against label-smoothed one-hot targets.

Paper: Rethinking the Inception Architecture for Computer Vision
(https://arxiv.org/abs/1512.00567). As real torch_npu does, the smoothed
one-hot comes from npu_one_hot (off everywhere, on at the label, with
on = 1 - s and off = s / (C - 1)) and the loss from
npu_softmax_cross_entropy_with_logits, -sum(target * log_softmax(pred)),
averaged over the batch in float32.
"""

import torch
import torch.nn as nn

import torch_npu

__all__ = ["LabelSmoothingCrossEntropy"]


class LabelSmoothingCrossEntropy(nn.Module):
    """LabelSmoothingCrossEntropy(num_classes=1000, smooth_factor=0.); forward(pred (N, C), target (N,))."""

    def __init__(self, num_classes=1000, smooth_factor=0.):
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"num_classes should be at least 2, but got {num_classes}")
        self.num_classes = num_classes
        self.on_value = 1.0 - smooth_factor
        self.off_value = 1.0 * smooth_factor / (num_classes - 1)

    def forward(self, pred, target):
        if pred.dim() != 2 or pred.size(1) != self.num_classes:
            raise ValueError(f"Expected pred of shape (N, {self.num_classes}), but got {tuple(pred.shape)}")
        one_hot = torch_npu.npu_one_hot(target.int(), -1, pred.size(1), self.on_value, self.off_value)
        loss = torch_npu.npu_softmax_cross_entropy_with_logits(pred, one_hot.to(pred.dtype))
        return torch.mean(loss, [0], keepdim=False, dtype=torch.float32)
