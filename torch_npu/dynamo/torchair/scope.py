"""torchair.scope: graph scopes that annotate the operators inside them for
GE (``npu_stream_switch``, ``super_kernel``, ``limit_core_num``,
``op_never_timeout``, ``data_dump``) and ``npu_wait_tensor``.

As in real torchair each scope is a pair of side-effecting operators,
``torch.ops.air.scope_enter(keys, values)`` and ``scope_exit()``, which
Dynamo records in the FX graph around the scoped operators (the graph dumps
show them), and which do nothing when run. What GE does with the attributes
(another stream for the scoped operators, fused super kernels, fewer AI
cores, no timeout) changes where and how fast the operators run, never their
values; vNPU's Inductor graphs run each operator in graph order on the
current stream, so the results are the ones GE gives.

``npu_wait_tensor(t, dependency)`` orders ``t``'s later users after
``dependency`` across GE's streams; in vNPU's one-stream graphs (and in
eager mode) that order holds already, and it returns ``t``.
"""

import torch
from torch.fx.node import has_side_effect

__all__ = ["npu_stream_switch", "npu_wait_tensor", "super_kernel", "limit_core_num", "op_never_timeout", "data_dump"]


_LIBRARIES = []


def _define_scope_ops(namespace):
    """``torch.ops.<namespace>.scope_enter`` / ``scope_exit``, defined once."""
    ops = getattr(torch.ops, namespace)
    if hasattr(ops, "scope_enter"):
        return ops
    lib = torch.library.Library(namespace, "FRAGMENT")
    _LIBRARIES.append(lib)  # a Library unregisters its operators when collected
    lib.define("scope_enter(str[] keys, str[] values, bool need_execute=False) -> ()")
    lib.define("scope_exit(bool need_execute=False) -> ()")

    def scope_enter(keys, values, need_execute=False):
        pass

    def scope_exit(need_execute=False):
        pass

    for key in ("CompositeExplicitAutograd", "Meta"):
        lib.impl("scope_enter", scope_enter, key)
        lib.impl("scope_exit", scope_exit, key)
    has_side_effect(ops.scope_enter.default)  # kept in graphs although nothing uses their (no) result
    has_side_effect(ops.scope_exit.default)
    return ops


# Defined when this module loads, not when a scope is made inside traced code.
_SCOPE_OPS = {namespace: _define_scope_ops(namespace) for namespace in ("air", "npugraph_ex")}


class _Scope:
    """A context manager entering one scope of attributes (str keys and values)."""

    def __init__(self, attrs, namespace="air"):
        self.keys = [key for key, _ in attrs]
        self.values = [value for _, value in attrs]
        self.ops = _SCOPE_OPS[namespace]

    def __enter__(self):
        self.ops.scope_enter(self.keys, self.values)

    def __exit__(self, *exc):
        self.ops.scope_exit()
        return False


def npu_stream_switch(stream_tag: str, stream_priority: int = 0, enable_inner_parallel: bool = True):
    if not isinstance(stream_tag, str):
        raise TypeError(f"npu_stream_switch() argument 'stream_tag' must be str, but got {type(stream_tag).__name__}.")
    return _Scope([("_user_stream_label", stream_tag), ("_user_stream_priority", str(stream_priority)),
                   ("_enable_inner_parallel", str(enable_inner_parallel))])


def super_kernel(scope: str, options: str = ""):
    return _Scope([("_super_kernel_scope", scope or ""), ("_super_kernel_options", options)])


def limit_core_num(op_aicore_num: int, op_vectorcore_num: int):
    return _limit_core_num(op_aicore_num, op_vectorcore_num, "air")


def _limit_core_num(op_aicore_num, op_vectorcore_num, namespace):
    """``namespace``: whose scope operators record it (npugraph_ex's scope has its own)."""
    for name, value in (("op_aicore_num", op_aicore_num), ("op_vectorcore_num", op_vectorcore_num)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"limit_core_num() argument '{name}' must be a non-negative int, but got {value!r}.")
    return _Scope([("_op_aicore_num", str(op_aicore_num)), ("_op_vectorcore_num", str(op_vectorcore_num))],
                  namespace)


def op_never_timeout(enable: bool = True):
    if not isinstance(enable, bool):
        raise TypeError(f"op_never_timeout() argument 'enable' must be bool, but got {type(enable).__name__}.")
    return _Scope([("_op_exec_never_timeout", str(enable))])


def data_dump():
    return _Scope([("torchair_enable_data_dump", "True")])


def npu_wait_tensor(self: torch.Tensor, dependency: torch.Tensor):
    if not isinstance(self, torch.Tensor) or not isinstance(dependency, torch.Tensor):
        raise TypeError("npu_wait_tensor() expects two tensors")
    return self
