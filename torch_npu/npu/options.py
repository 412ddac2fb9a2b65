"""torch.npu.set_option / is_support (set_compile_mode: compile_mode.py).

The options mirror torch_npu's ACL options. The virtual NPU has no graph
compiler or precision modes, so most values are validated and recorded
(get_option returns them) without changing numerics; "enable_debug"
(from the seeds) makes every CPU fallback call print a line.
"""

import warnings

import torch

from torch_npu import _C
from torch_npu.utils._error_code import ErrCode as _ErrCode, pta_error as _pta_error

# Allowed values per option; None means any string.
_OPTIONS = {
    "ACL_PRECISION_MODE": ("allow_fp32_to_fp16", "must_keep_origin_dtype"),
    "ACL_OP_SELECT_IMPL_MODE": ("high_performance", "high_precision"),
    "ACL_OPTYPELIST_FOR_IMPLMODE": None,
    "ACL_AICORE_NUM": None,
    "ACL_OP_COMPILER_CACHE_MODE": ("enable", "disable", "force"),
    "ACL_OP_COMPILER_CACHE_DIR": None,
    "ACL_OP_DEBUG_LEVEL": ("0", "1", "2", "3", "4"),
    "ACL_DEBUG_DIR": None,
    "ACL_OP_DEBUG_OPTION": None,
    "NPU_FUZZY_COMPILE_BLACKLIST": None,
    # Ops to run through their aclnn kernels rather than the old ACL ones
    # ("index,..."); every vNPU kernel is of one kind, so it is recorded.
    "FORCE_ACLNN_OP_LIST": None,
    "MM_BMM_ND_ENABLE": ("enable", "disable"),
    "enable_debug": (True, False),
    # Operator hooks of C++ extensions (at_npu::native::RegisterOpHook*Fn).
    "OP_HOOK_ENABLE": ("enable", "disable"),
}

_values = {}


def _check(key, value):
    # torch_npu's checks and messages (its npu_config.set_option, and the C++
    # option table for unknown names).
    if not isinstance(key, str):
        raise TypeError(f"npu option name must be a str, but got {type(key).__name__}" + _pta_error(_ErrCode.PARAM))
    if key not in _OPTIONS:
        raise RuntimeError(f"invalid npu option name:{key}" + _pta_error(_ErrCode.PARAM))
    allowed = _OPTIONS[key]
    if key == "ACL_AICORE_NUM":
        if not (str(value).isdigit() and 1 <= int(value) <= 32):
            raise ValueError(f"value of {key} should be an integer from 1 to 32 but got {value}" +
                             _pta_error(_ErrCode.PARAM))
        return
    if allowed is None:
        if not isinstance(value, str):
            raise ValueError(f"value of {key} should be a str but got {value!r}" + _pta_error(_ErrCode.PARAM))
        return
    if value not in allowed:
        raise ValueError(f"value of {key} should be in {list(allowed)} but got {value}" + _pta_error(_ErrCode.PARAM))


def set_option(option, value=None):
    """``set_option({"ACL_PRECISION_MODE": "allow_fp32_to_fp16"})`` or
    ``set_option("enable_debug", True)``."""
    if isinstance(option, str) and value is not None:
        option = {option: value}
    if not isinstance(option, dict):
        raise TypeError("npu option must be a dict." + _pta_error(_ErrCode.PARAM))
    for key, val in option.items():
        _check(key, val)
    for key, val in option.items():
        _values[key] = val
        if key == "enable_debug":
            _C._set_fallback_debug(bool(val))
        elif key == "OP_HOOK_ENABLE":
            _C._set_op_hooks_enabled(val == "enable")


def use_compatible_impl(is_enable):
    """torch_npu's switch between its own implementations (host allocator,
    NPU graphs, hccl) and variants that behave as PyTorch's CUDA ones. vNPU
    has only the PyTorch-compatible ones: True is what it does already;
    False cannot be honoured and warns."""
    if not isinstance(is_enable, bool):
        raise TypeError(f"use_compatible_impl expects a bool, but got {type(is_enable).__name__}")
    if not is_enable:
        warnings.warn("torch.npu.use_compatible_impl(False) has no effect on vNPU: it has only the "
                      "PyTorch-compatible implementations, so are_compatible_impl_enabled() stays True.")


def are_compatible_impl_enabled() -> bool:
    """True: vNPU's implementations are always the PyTorch-compatible ones."""
    return True


def _chip_precision_default():
    # torch_npu's default: must_keep_origin_dtype on 910B and later,
    # allow_fp32_to_fp16 on 910A and the 310P.
    from torch_npu.npu.device import _device_is_pre_910b
    return "allow_fp32_to_fp16" if _device_is_pre_910b() else "must_keep_origin_dtype"


def get_option(key):
    """The value set for ``key`` with set_option, or None (ACL_PRECISION_MODE:
    the chip's default)."""
    if key == "ACL_PRECISION_MODE" and key not in _values:
        return _chip_precision_default()
    return _values.get(key)


_SUPPORTED_KEYS = ("PrivateUse1", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                   "CompositeExplicitAutogradNonFunctional")


def is_support(op_name: str) -> bool:
    """True when ``op_name`` (e.g. "matmul", "aten::add.Tensor") runs natively
    on the NPU: it has an npu kernel, or is a composite of ops that do.
    False for unknown ops and ops that would take the CPU fallback."""
    if not isinstance(op_name, str) or not op_name:
        raise TypeError("is_support expects an operator name such as 'matmul' or 'aten::add.Tensor'")
    name = op_name.split("::", 1)[1] if "::" in op_name else op_name
    namespace = op_name.split("::", 1)[0] if "::" in op_name else "aten"
    base, _, overload = name.partition(".")
    packet = getattr(getattr(torch.ops, namespace, None), base, None)
    if packet is None or not hasattr(packet, "overloads"):
        return False
    overloads = [overload] if overload else [o for o in packet.overloads()]
    for ov in overloads:
        qualname = f"{namespace}::{base}" + (f".{ov}" if ov and ov != "default" else "")
        try:
            if any(torch._C._dispatch_has_kernel_for_dispatch_key(qualname, k) for k in _SUPPORTED_KEYS):
                return True
        except RuntimeError:
            continue
    return False


def fallback_counts() -> dict:
    """How many times each operator took the CPU fallback in this process."""
    return dict(_C._fallback_counts())
