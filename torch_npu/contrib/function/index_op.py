"""``x[condition] = value`` without index_put.

Real torch_npu offers this because index_put with a boolean mask is slow on the
device, while an element-wise select is not. It gives the values of the
in-place assignment but returns a new tensor (``x`` is left as it was), and
gradients flow to ``x`` where ``condition`` is False.
"""

import torch

__all__ = ["npu_fast_condition_index_put"]


def npu_fast_condition_index_put(x, condition, value):
    """``x`` with every element where the bool tensor ``condition`` is True replaced by ``value``."""
    _require_bool_mask(condition)
    # masked_fill broadcasts the mask to x's shape, as the indexed assignment requires.
    return x.masked_fill(condition, value)


def _require_bool_mask(condition):
    # An integer mask would index positions instead of selecting them: refuse it.
    if condition.dtype is not torch.bool:
        raise TypeError("npu_fast_condition_index_put: condition should be a bool tensor, "
                        f"but got {condition.dtype}")
