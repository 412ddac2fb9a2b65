"""torch.npu.set_sync_debug_mode: report operations that make the host wait.

Mode 0 / "default": silent; 1 / "warn": a warning at every synchronising
operation (.item(), copies to the host, data-dependent shapes, ops on the
synchronous native path); 2 / "error": such operations raise.
Explicit torch.npu.synchronize() / Stream.synchronize() are never reported.
"""

from torch_npu import _C

_NAMES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode) -> None:
    if isinstance(debug_mode, str):
        if debug_mode not in _NAMES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _NAMES[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError("invalid value of debug_mode, expected one of 0,1,2")
    _C._set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    return _C._get_sync_debug_mode()
