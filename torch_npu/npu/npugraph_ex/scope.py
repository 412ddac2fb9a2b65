"""torch.npu.npugraph_ex.scope: ``limit_core_num`` and ``deterministic``,
scopes recorded in the compiled graph (torch_npu/dynamo/torchair/scope.py
says what vNPU does with them)."""

__all__ = ["limit_core_num", "deterministic"]


def limit_core_num(op_aicore_num: int, op_vectorcore_num: int, stream=None):
    """The operators inside run with at most this many AI cube and vector cores
    (on ``stream`` too, when given). A hint about where they run, which does
    not change their values: recorded in the graph."""
    from torch_npu.dynamo.torchair import scope
    return scope._limit_core_num(op_aicore_num, op_vectorcore_num, "npugraph_ex")


def deterministic(level: int):
    """The operators inside run at this determinism level
    (torch.npu.set_deterministic_level's levels). vNPU's kernels are
    deterministic at level 1 already; levels 2 and 3 are refused for a
    scope: vNPU makes level 2 (a team of one thread per kernel) for the
    whole process only, with torch.npu.set_deterministic_level(2), and
    level 3 not at all."""
    from torch_npu.dynamo.torchair import scope
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 3:
        raise ValueError(f"npugraph_ex.scope.deterministic() supports levels 0/1/2/3, got {level!r}")
    if level >= 2:
        raise RuntimeError(f"npugraph_ex.scope.deterministic({level}) is not supported on vNPU: it makes level 2 "
                           "for the whole process only (torch.npu.set_deterministic_level(2)) and level 3 not at "
                           "all. Use level 0 or 1 here.")
    return scope._Scope([("_deterministic_level", str(level))], namespace="npugraph_ex")
