"""The deprecated names real torch_npu patches into torch.nn:
``torch.nn.DropoutWithByteMask`` and ``torch.nn.functional.dropout_with_byte_mask``.
Each warns with torch_npu's deprecation text and hands over to
torch_npu.contrib (imported only when first used).
"""

import warnings

import torch

_MODULE_WARNING = ("torch.nn.DropoutWithByteMask is deprecated and will be removed in future version. "
                   "Use torch_npu.contrib.module.DropoutWithByteMask instead.")
_FUNCTION_WARNING = ("torch.nn.functional.dropout_with_byte_mask is deprecated and will be removed in future "
                     "version. Use torch_npu.contrib.function.dropout_with_byte_mask instead.")


class DropoutWithByteMask:
    """Creates torch_npu.contrib.module.DropoutWithByteMask, after the deprecation warning."""

    def __new__(cls, *args, **kwargs):
        warnings.warn(_MODULE_WARNING, DeprecationWarning, stacklevel=2)
        from torch_npu.contrib.module import DropoutWithByteMask as module
        return module(*args, **kwargs)


def dropout_with_byte_mask(*args, **kwargs):
    warnings.warn(_FUNCTION_WARNING, DeprecationWarning, stacklevel=2)
    from torch_npu.contrib.function import dropout_with_byte_mask as function
    return function(*args, **kwargs)


def install():
    if not hasattr(torch.nn, "DropoutWithByteMask"):
        torch.nn.DropoutWithByteMask = DropoutWithByteMask
    if not hasattr(torch.nn.functional, "dropout_with_byte_mask"):
        torch.nn.functional.dropout_with_byte_mask = dropout_with_byte_mask
