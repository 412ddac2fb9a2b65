"""torch.npu's scaled-dot-product-attention switches and preferred_linalg_library.

As in real torch_npu, the SDP switches are PyTorch's global flags (the ones
torch.backends.cuda sets), read and set here with a warning: the npu
scaled_dot_product_attention does not choose a kernel by them (on vNPU it
is ATen's math kernel run on the stream, whatever the flags say). The flags
are read and written through torch.backends.cuda's own accessors, so both
modules always agree.
preferred_linalg_library picks between CUDA's solver libraries, which an
NPU has none of: it warns and reports the default, as real torch_npu does.
"""

import warnings
from contextlib import contextmanager

import torch
from torch.backends import cuda as _global_sdp_flags

__all__ = []


class _GlobalSdpSwitch:
    """One of PyTorch's global SDP flags, read and written with a warning.

    Every access warns: a user who flips a switch expects a kernel choice that the npu operator does not make.
    """

    def __init__(self, kind: str, read, write):
        self._warning = f"Currently, the device operator does not support {kind} sdp and only sets the global variable!"
        self._read = read
        self._write = write

    def get(self) -> bool:
        warnings.warn(self._warning)
        return self._read()

    def set(self, enabled: bool) -> None:
        warnings.warn(self._warning)
        self._write(enabled)

    @contextmanager
    def held_at(self, enabled: bool):
        before = self.get()
        self.set(enabled)
        try:
            yield
        finally:
            self.set(before)


_FLASH = _GlobalSdpSwitch("flash", _global_sdp_flags.flash_sdp_enabled, _global_sdp_flags.enable_flash_sdp)
_MEM_EFFICIENT = _GlobalSdpSwitch(
    "mem_efficient", _global_sdp_flags.mem_efficient_sdp_enabled, _global_sdp_flags.enable_mem_efficient_sdp)
_MATH = _GlobalSdpSwitch("math", _global_sdp_flags.math_sdp_enabled, _global_sdp_flags.enable_math_sdp)


def flash_sdp_enabled() -> bool:
    return _FLASH.get()


def mem_efficient_sdp_enabled() -> bool:
    return _MEM_EFFICIENT.get()


def math_sdp_enabled() -> bool:
    return _MATH.get()


def enable_flash_sdp(enabled: bool) -> None:
    _FLASH.set(enabled)


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _MEM_EFFICIENT.set(enabled)


def enable_math_sdp(enabled: bool) -> None:
    _MATH.set(enabled)


@contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True):
    """Within the block the three switches have the values given; on leaving, the values they had before."""
    with _FLASH.held_at(enable_flash), _MEM_EFFICIENT.held_at(enable_mem_efficient), _MATH.held_at(enable_math):
        yield {}


def preferred_linalg_library(backend=None) -> torch._C._LinalgBackend:
    """Always ``Default``, with a warning: the choice is between CUDA solver libraries, and an NPU has none."""
    warnings.warn("torch.npu.preferred_linalg_library isn't implemented!")
    return torch._C._LinalgBackend.Default
