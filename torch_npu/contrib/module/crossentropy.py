"""Cross entropy against label-smoothed targets (Szegedy et al., "Rethinking the Inception
Architecture for Computer Vision", https://arxiv.org/abs/1512.00567).

With smoothing s over C classes the target of a sample with label y puts
1 - s on class y and s / (C - 1) on each other class, so it still sums to one
(torch.nn.CrossEntropyLoss's label_smoothing spreads s / C over all classes
instead, a different target). The loss is the batch mean of
-sum_c target_c * log_softmax(pred)_c, in float32.

As in real torch_npu the smoothed target comes from npu_one_hot and the
per-sample loss from npu_softmax_cross_entropy_with_logits, whose gradient
is softmax(pred) - target.
"""

import torch
import torch.nn as nn

import torch_npu

__all__ = ["LabelSmoothingCrossEntropy"]


def _label_values(num_classes, smooth_factor):
    """(probability on the label, probability on each other class)."""
    return 1.0 - smooth_factor, smooth_factor / (num_classes - 1)


class LabelSmoothingCrossEntropy(nn.Module):
    """LabelSmoothingCrossEntropy(num_classes=1000, smooth_factor=0.0).

    forward(pred, target): pred (N, num_classes) logits, target (N,) class
    indices of any numeric dtype; returns a float32 scalar.
    """

    def __init__(self, num_classes=1000, smooth_factor=0.):
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"num_classes should be at least 2, but got {num_classes}")
        self.num_classes = num_classes
        self.on_value, self.off_value = _label_values(num_classes, smooth_factor)

    def forward(self, pred, target):
        self._check_logits(pred)
        soft_target = self._smoothed(target).to(pred.dtype)
        return _batch_mean(torch_npu.npu_softmax_cross_entropy_with_logits(pred, soft_target))

    def _check_logits(self, pred):
        if pred.dim() != 2 or pred.size(1) != self.num_classes:
            raise ValueError(f"Expected pred of shape (N, {self.num_classes}), but got {tuple(pred.shape)}")

    def _smoothed(self, target):
        # npu_one_hot wants integer labels; real torch_npu's test passes them as float32.
        labels = target.to(torch.int32)
        return torch_npu.npu_one_hot(labels, depth=self.num_classes, on_value=self.on_value,
                                     off_value=self.off_value)


def _batch_mean(per_sample):
    # float32 even for half logits: a sum of many half losses loses precision.
    return per_sample.mean(dim=0, dtype=torch.float32)
