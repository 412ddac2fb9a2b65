"""torch_npu's error codes and the suffix its errors carry, for Python code
that raises in torch_npu's format (real torch_npu's private module of this
name, which its tests and extensions import):

    raise RuntimeError("bad group size" + pta_error(ErrCode.PARAM))
    # bad group size
    # [ERROR] 2026-12-04-03:00:00 (PID:1, Device:0, RankID:-1) ERR00001 PTA invalid parameter

The code in the suffix is the component's two digits then the error's three
(ERR02200: DIST, call hccl api failed). The C++ side builds the same suffix
(csrc/core/npu_error.h); TORCH_NPU_COMPACT_ERROR_OUTPUT=1 drops it on both
sides.
"""

import os
import time
from enum import Enum

__all__ = []

# (name, number, what the message says) of each error class. The texts are
# torch_npu's, typo included ("applicaiton"): log scrapers match them.
_ERROR_CLASSES = (
    ("SUCCESS", 0, "success"),
    ("PARAM", 1, "invalid parameter"),
    ("TYPE", 2, "invalid type"),
    ("VALUE", 3, "invalid value"),
    ("PTR", 4, "invalid pointer"),
    ("INTERNAL", 5, "internal error"),
    ("MEMORY", 6, "memory error"),
    ("NOT_SUPPORT", 7, "feature not supported"),
    ("NOT_FOUND", 8, "resource not found"),
    ("UNAVAIL", 9, "resource unavailable"),
    ("SYSCALL", 10, "system call failed"),
    ("TIMEOUT", 11, "timeout error"),
    ("PERMISSION", 12, "permission error"),
    ("ACL", 100, "call acl api failed"),
    ("HCCL", 200, "call hccl api failed"),
    ("GE", 300, "call ge api failed"),
    ("EXCEPT", 999, "applicaiton exception"),
)

# The components an error can come from, with their number in the code.
_COMPONENTS = {"PTA": 0, "OPS": 1, "DIST": 2, "GRAPH": 3, "PROF": 4}


class _NumberedError(Enum):
    """An error class whose value is (number, text), read as ``code`` and ``msg``."""

    @property
    def code(self):
        return self.value[0]

    @property
    def msg(self):
        return self.value[1]


ErrCode = _NumberedError("ErrCode", [(name, (number, text)) for name, number, text in _ERROR_CLASSES],
                         module=__name__, qualname="ErrCode")


def _suffix_wanted():
    # Read through _C so that the C++ and Python suffixes follow one setting.
    from torch_npu import _C
    return _C._environment().get("TORCH_NPU_COMPACT_ERROR_OUTPUT", "0") in ("", "0")


def _where():
    """(device, rank) of this process, -1 for each one it has not taken yet."""
    import torch.distributed as dist
    from torch_npu import _C
    device = _C._current_device() if _C._is_initialized() else -1
    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else -1
    return device, rank


def _suffix(component, error):
    if not _suffix_wanted():
        return ""
    device, rank = _where()
    when = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime())
    code = f"ERR{_COMPONENTS[component]:02d}{error.code:03d}"
    return f"\n[ERROR] {when} (PID:{os.getpid()}, Device:{device}, RankID:{rank}) {code} {component} {error.msg}"


def pta_error(error: ErrCode) -> str:
    """The suffix for an error of torch_npu's framework code."""
    return _suffix("PTA", error)


def ops_error(error: ErrCode) -> str:
    """The suffix for an error of an operator."""
    return _suffix("OPS", error)


def dist_error(error: ErrCode) -> str:
    """The suffix for an error of torch_npu.distributed."""
    return _suffix("DIST", error)


def graph_error(error: ErrCode) -> str:
    """The suffix for an error of graph capture or compilation."""
    return _suffix("GRAPH", error)


def prof_error(error: ErrCode) -> str:
    """The suffix for an error of the profiler."""
    return _suffix("PROF", error)
