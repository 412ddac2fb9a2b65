"""Boolean-mask assignment as a select: ``x[condition] = value`` without an index_put."""

import torch

__all__ = ["npu_fast_condition_index_put"]


def npu_fast_condition_index_put(x, condition, value):
    """A new tensor equal to ``x`` where ``condition`` is False and ``value`` where it is True.

    Same values as ``x[condition] = value`` (which real torch_npu replaces
    because index_put with a bool mask is slow on the device), but out of
    place: ``x`` is not modified. Differentiable in ``x``.
    """
    if condition.dtype != torch.bool:
        raise TypeError(f"npu_fast_condition_index_put: condition should be a bool tensor, "
                        f"but got {condition.dtype}")
    return torch.where(condition, torch.full_like(x, value), x)
