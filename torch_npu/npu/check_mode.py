"""Strict chip mode: torch.npu.set_check_mode(True) makes vNPU behave like
real torch_npu on the selected chip (VNPU_CHIP), so a port that runs here
is also told where a real 910B, 910A or 310P would differ:

- ops real torch_npu has no npu kernel for (the list of
  torch_npu/tools/data/npu_native_ops.txt, from Ascend/op-plugin, plus its
  own core registrations) get torch_npu's CPU-fallback warning, and raise
  under TORCH_NPU_FALLBACK_CPU_DISABLE=1;
- dtypes the chip's aclnn kernels reject raise, in aclnn's words (the table
  below, from CANN's aclnn API reference);
- every finding is collected: check_mode_report().

``VNPU_CHECK_MODE=1`` turns it on at import for a whole run and prints the
report at exit. Strict mode is process-wide: ops launched by any thread are
checked (910A/310P numerics: on the thread that turned it on). See
docs/strict_mode.md.
"""

import atexit
import functools
import pathlib
import sys

import torch

from torch_npu import _C
from torch_npu.npu.device import _is_pre_910b
from torch_npu.npu.options import get_option

__all__ = ["check_mode_report", "get_check_mode", "set_check_mode", "native_on_chip"]

_DATA = pathlib.Path(__file__).resolve().parent.parent / "tools" / "data"
_FLOATS_A2 = "DT_FLOAT,DT_FLOAT16,DT_BFLOAT16"
_FLOATS = "DT_FLOAT,DT_FLOAT16"
_ADD_A2 = "DT_FLOAT,DT_FLOAT16,DT_DOUBLE,DT_INT32,DT_INT64,DT_INT16,DT_INT8,DT_UINT8,DT_BOOL,DT_BFLOAT16"
_ADD = "DT_FLOAT,DT_FLOAT16,DT_DOUBLE,DT_INT32,DT_INT64,DT_INT16,DT_INT8,DT_UINT8,DT_BOOL"
_MATMUL_OPS = ("mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "convolution", "convolution_overrideable",
               "convolution_backward_overrideable")
_ARITHMETIC_OPS = ("add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_")
_COMPLEX = ["ComplexFloat", "ComplexDouble", "ComplexHalf"]
_UNSIGNED = ["UInt16", "UInt32", "UInt64"]


def _rules(chip):
    """(aten op, rejected dtypes, support list) for ``chip``. From CANN's aclnn
    API reference: aclnnMm / aclnnBatchMatMul / aclnnAddmm take FLOAT16 and
    FLOAT32 on the Atlas training (910A) and inference (310P) series, plus
    BFLOAT16 on Atlas A2 (910B); aclnnAdd takes FLOAT, FLOAT16, DOUBLE, INT32,
    INT64, INT16, INT8, UINT8, BOOL, plus BFLOAT16 on A2, and no unsigned
    16/32/64-bit types. Convolutions and mul/div are taken to follow the same
    lists (docs/strict_mode.md)."""
    a2 = chip.lower().startswith(("ascend910b", "ascend910_93"))
    no_bf16 = [] if a2 else ["BFloat16"]
    rules = []
    for op in _MATMUL_OPS:
        rules.append((f"aten::{op}", ["Double", "Long", "Int", "Short", "Char", "Byte", "Bool"] + _COMPLEX + _UNSIGNED
                      + no_bf16, _FLOATS_A2 if a2 else _FLOATS))
    for op in _ARITHMETIC_OPS:
        rules.append((f"aten::{op}", _UNSIGNED + no_bf16, _ADD_A2 if a2 else _ADD))
    return rules


@functools.lru_cache(maxsize=None)
def _native_names():
    """The ops real torch_npu implements (op-plugin's list and its core), read once."""
    names = set()
    for name in ("npu_native_ops.txt", "npu_core_ops.txt"):
        for line in (_DATA / name).read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                names.add(line)
    return frozenset(names)


_enabled = False
_numerics = None  # the _ChipNumerics mode pushed for 910A/310P


class _ChipNumerics(torch.utils._python_dispatch.TorchDispatchMode):
    """The numeric defaults of 910A and 310P, emulated in strict mode:
    - ACL_PRECISION_MODE allow_fp32_to_fp16: float32 matrix products run on
      the Cube in float16 (inputs rounded to float16, result back in float32);
    - saturation mode: a floating result's inf becomes +-max of its dtype and
      NaN becomes 0.
    A Python dispatch mode: strict mode on these chips trades speed for the
    chip's numbers."""

    _CUBE = {"mm", "addmm", "bmm", "baddbmm", "convolution", "convolution_overrideable"}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in self._CUBE and get_option("ACL_PRECISION_MODE") == "allow_fp32_to_fp16":
            def down(t):
                return t.half() if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t
            if any(isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.device.type == "npu" for t in args):
                out = func(*[down(a) for a in args], **kwargs)
                return out.float() if isinstance(out, torch.Tensor) else out
        out = func(*args, **kwargs)
        if getattr(func, "is_view", False) or not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return out
        if out.device.type != "npu" or name in ("empty", "empty_strided", "empty_like", "copy_", "_to_copy"):
            return out
        limit = torch.finfo(out.dtype).max
        return torch.nan_to_num_(out, nan=0.0, posinf=limit, neginf=-limit) if func._schema.is_mutable \
            else torch.nan_to_num(out, nan=0.0, posinf=limit, neginf=-limit)


def set_check_mode(check_mode: bool, chip=None):
    """Strict chip mode on (True) or off (False), for the whole process.
    ``chip`` (default: the device's, VNPU_CHIP) selects the dtype tables.
    Synchronizes the device first: the switch re-registers kernels."""
    global _enabled
    if not isinstance(check_mode, bool):
        raise TypeError(f"check_mode must be a bool, but got {type(check_mode).__name__}")
    if chip is None:
        chip = torch.npu.get_device_name() if torch.npu.is_available() else "Ascend910B2"
    elif not isinstance(chip, str) or not chip.lower().startswith(("ascend910", "ascend310")):
        raise ValueError(f"chip must name an Ascend 910 or 310 chip (as VNPU_CHIP does), but got {chip!r}")
    if torch.npu.is_available():
        torch.npu.synchronize()  # no kernel runs while the dispatcher's tables change
    _C._set_strict_mode(check_mode, sorted(_native_names()) if check_mode else [], _rules(chip) if check_mode else [],
                        chip)
    global _numerics
    if _numerics is not None:
        torch.utils._python_dispatch._pop_mode()
        _numerics = None
    if check_mode and _is_pre_910b(chip):
        _numerics = _ChipNumerics()
        torch.utils._python_dispatch._push_mode(_numerics)
    _enabled = check_mode


def get_check_mode() -> bool:
    return _enabled


def native_on_chip(op):
    """Whether real torch_npu has an npu kernel for ``op`` ("aten::add.Tensor" or "add")."""
    name = op.split("::", 1)[-1]
    names = _native_names()
    return name in names or name.split(".", 1)[0] in names


def check_mode_report(clear=False):
    """What strict mode found: a list of dicts (op, kind: "cpu_fallback" or
    "dtype", detail: the message given, count: the calls seen)."""
    found = [{"op": op, "kind": kind, "detail": detail, "count": count}
             for op, kind, detail, count in _C._strict_findings()]
    if clear:
        _C._clear_strict_findings()
    return found


def _print_report_at_exit():
    found = check_mode_report()
    if not found:
        print("[torch_npu] strict chip mode: no findings", file=sys.stderr)
        return
    print(f"[torch_npu] strict chip mode: {len(found)} findings on {torch.npu.get_device_name()}:", file=sys.stderr)
    for f in found:
        print(f"  {f['kind']:<12} {f['op']:<48} x{f['count']}", file=sys.stderr)


def _enable_from_environment(value):
    if value not in ("0", "1"):
        raise ValueError(f"VNPU_CHECK_MODE must be 0 or 1, but got {value!r}")
    if value == "1":
        set_check_mode(True)
        atexit.register(_print_report_at_exit)
