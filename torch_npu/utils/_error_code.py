"""torch_npu's error codes and the suffix its errors carry, for Python code
that raises in torch_npu's format (real torch_npu's private module of this
name, which its tests and extensions import):

    raise RuntimeError("bad group size" + pta_error(ErrCode.PARAM))
    # bad group size
    # [ERROR] 2026-12-04-03:00:00 (PID:1, Device:0, RankID:-1) ERR00001 PTA invalid parameter

The C++ side builds the same suffix (csrc/core/npu_error.h);
TORCH_NPU_COMPACT_ERROR_OUTPUT=1 drops it on both sides.
"""

import os
import time
from enum import Enum

__all__ = []


class _SubModuleID(Enum):
    PTA = 0
    OPS = 1
    DIST = 2
    GRAPH = 3
    PROF = 4
    UNKNOWN = 99


class ErrCode(Enum):
    """(number, description) of each error class, as in torch_npu's messages."""
    SUCCESS = (0, "success")
    PARAM = (1, "invalid parameter")
    TYPE = (2, "invalid type")
    VALUE = (3, "invalid value")
    PTR = (4, "invalid pointer")
    INTERNAL = (5, "internal error")
    MEMORY = (6, "memory error")
    NOT_SUPPORT = (7, "feature not supported")
    NOT_FOUND = (8, "resource not found")
    UNAVAIL = (9, "resource unavailable")
    SYSCALL = (10, "system call failed")
    TIMEOUT = (11, "timeout error")
    PERMISSION = (12, "permission error")
    ACL = (100, "call acl api failed")
    HCCL = (200, "call hccl api failed")
    GE = (300, "call ge api failed")
    EXCEPT = (999, "applicaiton exception")  # sic: torch_npu's spelling, which log scrapers match

    @property
    def code(self):
        return self.value[0]

    @property
    def msg(self):
        return self.value[1]


def _compact():
    from torch_npu import _C
    return _C._environment().get("TORCH_NPU_COMPACT_ERROR_OUTPUT", "0") not in ("", "0")


def _device():
    from torch_npu import _C
    return _C._current_device() if _C._is_initialized() else -1


def _rank():
    import torch.distributed as dist
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else -1


def _format_error_msg(submodule, error):
    if _compact():
        return ""
    stamp = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime())
    return (f"\n[ERROR] {stamp} (PID:{os.getpid()}, Device:{_device()}, RankID:{_rank()}) "
            f"ERR{submodule.value:02d}{error.code:03d} {submodule.name} {error.msg}")


def pta_error(error: ErrCode) -> str:
    return _format_error_msg(_SubModuleID.PTA, error)


def ops_error(error: ErrCode) -> str:
    return _format_error_msg(_SubModuleID.OPS, error)


def dist_error(error: ErrCode) -> str:
    return _format_error_msg(_SubModuleID.DIST, error)


def graph_error(error: ErrCode) -> str:
    return _format_error_msg(_SubModuleID.GRAPH, error)


def prof_error(error: ErrCode) -> str:
    return _format_error_msg(_SubModuleID.PROF, error)
