"""DropoutWithByteMask: the module around ``contrib.function.dropout_with_byte_mask``.

It drops in training mode only (``self.training``), like torch.nn.Dropout. Real
torch_npu also patches it in as ``torch.nn.DropoutWithByteMask`` (see
torch_npu/_deprecated_patches.py).
"""

import torch.nn as nn

from ..function.npu_functional import dropout_with_byte_mask

__all__ = ["DropoutWithByteMask"]


def _check_probability(p):
    # The function checks too; checking here makes a bad p fail when the
    # model is built, not at its first training step.
    if not 0. <= p <= 1.:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


class DropoutWithByteMask(nn.Module):
    """DropoutWithByteMask(p=0.5, inplace=False, max_seed=1023).

    ``max_seed`` bounds the seeds the Ascend kernel draws its mask from; it is
    kept as an attribute for compatibility, while vNPU draws the mask from
    torch's generator (so ``torch.manual_seed`` reproduces it).
    """

    def __init__(self, p=0.5, inplace=False, max_seed=1023):
        _check_probability(p)
        nn.Module.__init__(self)
        self.p, self.inplace, self.max_seed = p, inplace, max_seed

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"

    def forward(self, input1):
        return dropout_with_byte_mask(input1, p=self.p, training=self.training, inplace=self.inplace)
