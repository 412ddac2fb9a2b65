"""Dtypes autocast may use on the current chip."""

import torch

from torch_npu import _C


def get_amp_supported_dtype():
    """float16 everywhere; bfloat16 too except on 310P chips."""
    dtypes = [torch.float16]
    if _C._device_count() > 0 and _C._device_properties(-1)["supports_bf16"]:
        dtypes.append(torch.bfloat16)
    return dtypes
