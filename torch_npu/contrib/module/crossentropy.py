"""Cross entropy against label-smoothed one-hot targets.

Paper: Rethinking the Inception Architecture for Computer Vision
(https://arxiv.org/abs/1512.00567). Real torch_npu builds the smoothed
one-hot with npu_one_hot and takes npu_softmax_cross_entropy_with_logits;
here: target row = off everywhere, on at the label, with on = 1 - s and
off = s / (C - 1); loss = mean over the batch of -sum(target * log_softmax(pred)).
"""

import torch
import torch.nn as nn

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
        labels = target.long()
        smoothed = torch.full(pred.shape, self.off_value, dtype=torch.float32, device=pred.device)
        smoothed.scatter_(1, labels[:, None], self.on_value)
        loss = -(smoothed * torch.log_softmax(pred.float(), dim=1)).sum(dim=1)
        return loss.mean(dim=0, dtype=torch.float32)
