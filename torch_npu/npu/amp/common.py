"""Dtypes autocast may use on the current chip."""

import torch

from torch_npu import _C


def get_amp_supported_dtype():
    """float16 and float32 everywhere (float32 autocasts the lower-precision
    ops up), bfloat16 too except on 310P chips; in torch_npu's order."""
    if _C._device_count() > 0 and _C._device_properties(-1)["supports_bf16"]:
        return [torch.float16, torch.bfloat16, torch.float32]
    return [torch.float16, torch.float32]


def amp_definitely_not_available():
    """True when no npu is there to autocast on (torch.cuda.amp.common's question, asked of npu)."""
    import torch_npu
    return not torch_npu.npu.is_available()
