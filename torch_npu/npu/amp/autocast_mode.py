"""torch.npu.amp.autocast: torch.autocast for device_type "npu", float16 by default."""

import functools

import torch


class autocast(torch.amp.autocast_mode.autocast):
    """``with torch.npu.amp.autocast():`` -- same as
    ``torch.autocast(device_type="npu", dtype=torch.float16)``."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True):
        super().__init__("npu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)

    def __enter__(self):
        return super().__enter__()

    def __exit__(self, exc_type, exc_val, exc_tb):
        return super().__exit__(exc_type, exc_val, exc_tb)

    def __call__(self, func):
        return super().__call__(func)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """torch.amp.custom_fwd for npu."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return torch.amp.custom_fwd(fwd, device_type="npu", cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """torch.amp.custom_bwd for npu."""
    return torch.amp.custom_bwd(bwd, device_type="npu")
