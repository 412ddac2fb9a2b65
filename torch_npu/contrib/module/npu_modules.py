"""``DropoutWithByteMask``: the module form of ``function.dropout_with_byte_mask``."""

from torch.nn import Module

from ..function import npu_functional as F

__all__ = ["DropoutWithByteMask"]


class DropoutWithByteMask(Module):
    """DropoutWithByteMask(p=0.5, inplace=False, max_seed=1023): dropout in training mode.

    ``max_seed`` is accepted for compatibility (the Ascend kernel's seed
    range); vNPU draws the mask from torch's generator.
    """

    def __init__(self, p=0.5, inplace=False, max_seed=2 ** 10 - 1):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace
        self.max_seed = max_seed

    def forward(self, input1):
        return F.dropout_with_byte_mask(input1, self.p, self.training, self.inplace)
