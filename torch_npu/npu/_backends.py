"""torch.npu's scaled-dot-product-attention switches and preferred_linalg_library.

As in real torch_npu, the SDP switches are PyTorch's global flags (the ones
torch.backends.cuda sets), read and set here with a warning: the npu
scaled_dot_product_attention does not choose a kernel by them (on vNPU it
is ATen's math kernel run on the stream, whatever the flags say).
preferred_linalg_library picks between CUDA's solver libraries, which an
NPU has none of: it warns and reports the default, as real torch_npu does.
"""

import contextlib
import warnings

import torch

__all__ = []


def _warn(kind):
    warnings.warn(f"Currently, the device operator does not support {kind} sdp and only sets the global variable!")


def flash_sdp_enabled() -> bool:
    _warn("flash")
    return torch._C._get_flash_sdp_enabled()


def enable_flash_sdp(enabled: bool) -> None:
    _warn("flash")
    torch._C._set_sdp_use_flash(enabled)


def mem_efficient_sdp_enabled() -> bool:
    _warn("mem_efficient")
    return torch._C._get_mem_efficient_sdp_enabled()


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _warn("mem_efficient")
    torch._C._set_sdp_use_mem_efficient(enabled)


def math_sdp_enabled() -> bool:
    _warn("math")
    return torch._C._get_math_sdp_enabled()


def enable_math_sdp(enabled: bool) -> None:
    _warn("math")
    torch._C._set_sdp_use_math(enabled)


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True):
    """Sets the three switches for the block, then puts the previous values back."""
    previous = (flash_sdp_enabled(), mem_efficient_sdp_enabled(), math_sdp_enabled())
    try:
        enable_flash_sdp(enable_flash)
        enable_mem_efficient_sdp(enable_mem_efficient)
        enable_math_sdp(enable_math)
        yield {}
    finally:
        enable_flash_sdp(previous[0])
        enable_mem_efficient_sdp(previous[1])
        enable_math_sdp(previous[2])


def preferred_linalg_library(backend=None) -> torch._C._LinalgBackend:
    """CUDA's choice of solver library has no NPU counterpart: warns and
    returns the default, as real torch_npu does."""
    warnings.warn("torch.npu.preferred_linalg_library isn't implemented!")
    return torch._C._LinalgBackend.Default
