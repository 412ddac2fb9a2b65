"""torch.npu.backends: real torch_npu's module of backend switches (the SDP
switches, re-exported from _backends.py) and ``fft_plan_cache``.

``fft_plan_cache`` is the counterpart of ``torch.backends.cuda.cufft_plan_cache``
for real torch_npu's FFT plans (an LRU of at most ``max_size`` plans, 1 to 99,
10 by default). vNPU's FFT kernels are ATen's CPU ones (pocketfft), which
keep no npu plans, so ``size`` is always 0 and ``clear()`` has nothing to
drop; ``max_size`` is kept and checked as real torch_npu checks it.
"""

from torch_npu.npu._backends import (
    enable_flash_sdp, enable_math_sdp, enable_mem_efficient_sdp, flash_sdp_enabled, math_sdp_enabled,
    mem_efficient_sdp_enabled, preferred_linalg_library, sdp_kernel)
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = []

# Real torch_npu's module re-exports these (torch.npu.backends.sdp_kernel, ...).
_SDP_SWITCHES = (enable_flash_sdp, enable_math_sdp, enable_mem_efficient_sdp, flash_sdp_enabled, math_sdp_enabled,
                 mem_efficient_sdp_enabled, preferred_linalg_library, sdp_kernel)


class NPUFFTPlanCache:
    """The FFT plan cache's settings (see the module doc)."""

    _DEFAULT_MAX_SIZE = 10

    def __init__(self):
        object.__setattr__(self, "_max_size", self._DEFAULT_MAX_SIZE)

    def __getattr__(self, name):
        if name == "size":
            return 0  # vNPU's FFT kernels make no npu plans
        if name == "max_size":
            return self._max_size
        raise AttributeError("Unknown attribute " + name)

    def __setattr__(self, name, value):
        if name == "size":
            raise RuntimeError(".size is a read-only property showing the number of plans currently in the cache.")
        if name != "max_size":
            raise AttributeError("Unknown attribute " + name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"fft_plan_cache.max_size must be an int, but got {type(value).__name__}")
        if not 1 <= value <= 99:
            raise RuntimeError("invalid value of cache_size, expected 1 to 99" + pta_error(ErrCode.VALUE))
        object.__setattr__(self, "_max_size", value)

    def clear(self):
        """Drops the cached plans: there are none on vNPU."""


fft_plan_cache = NPUFFTPlanCache()
