"""torch.npu.npurt(): the raw runtime calls real torch_npu exposes
(torch_npu._C._npurt): host memory registration and raw streams.

Each returns an ACL status code (0 for success, ACL_ERROR_INVALID_PARAM for a
bad argument), as the real ones do, instead of raising. On vNPU the device
reads host memory directly, so any host range is device accessible; the
registry here checks the arguments (null pointer, empty range, unknown flags,
MAPPED on an address that is not 4 KiB aligned, double registration) as the
ACL runtime does. A raw stream is a torch.npu.Stream kept alive until
npuStreamDestroy; its handle is the stream's aclrtStream (its npu_stream),
so ``torch.npu.ExternalStream(handle)`` wraps it, as on a chip.

Thread-safety: every function may be called from any thread.
"""

import ctypes
import sys
import threading

from torch_npu import _C

ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000

ACL_HOST_REG_MAPPED = 0x2
ACL_HOST_REG_PINNED = 0x10000000
_KNOWN_FLAGS = ACL_HOST_REG_MAPPED | ACL_HOST_REG_PINNED
_MAPPED_ALIGNMENT_BYTES = 4096

_lock = threading.Lock()
_registered = {}  # host address -> (bytes, flags)
_streams = {}     # raw handle -> torch.npu.Stream


def npuHostRegister(ptr: int, size: int, flags: int) -> int:  # noqa: N802 (torch_npu's name)
    if not ptr or size <= 0 or flags == 0 or flags & ~_KNOWN_FLAGS:
        return ACL_ERROR_INVALID_PARAM
    if flags & ACL_HOST_REG_MAPPED and ptr % _MAPPED_ALIGNMENT_BYTES:
        return ACL_ERROR_INVALID_PARAM
    with _lock:
        if ptr in _registered:
            return ACL_ERROR_INVALID_PARAM
        _registered[ptr] = (int(size), int(flags))
    return ACL_SUCCESS


def npuHostUnregister(ptr: int) -> int:  # noqa: N802
    with _lock:
        return ACL_SUCCESS if _registered.pop(ptr, None) is not None else ACL_ERROR_INVALID_PARAM


def npuStreamCreate(stream_out: int) -> int:  # noqa: N802
    """Creates a stream on the current device and writes its handle to the
    pointer-sized slot at address ``stream_out``."""
    if not stream_out:
        return ACL_ERROR_INVALID_PARAM
    import torch_npu.npu.streams as streams
    stream = streams.Stream()
    with _lock:
        _streams[stream.npu_stream] = stream
    ctypes.c_void_p.from_address(stream_out).value = stream.npu_stream
    return ACL_SUCCESS


def npuStreamDestroy(stream: int) -> int:  # noqa: N802
    with _lock:
        known = _streams.pop(stream, None)
    if known is None:
        return ACL_ERROR_INVALID_PARAM
    known.synchronize()
    return ACL_SUCCESS


def _registered_bytes() -> int:
    """Bytes currently registered (tests)."""
    with _lock:
        return sum(size for size, _ in _registered.values())


# Real torch_npu's binding is the submodule torch_npu._C._npurt; this module
# is vNPU's, published under that name too.
_C._npurt = sys.modules[__name__]
