"""Recompiling when torch_npu's deterministic level changes (real torch_npu's
``torch_npu.dynamo._deterministic_guard``).

A graph compiled at one deterministic level
(``torch_npu.npu._get_deterministic_level()``) may use kernels that the
other levels forbid. A backend that depends on the level calls
``install_npu_deterministic_level_guard()`` while it compiles: the frame's
guards then also check the level, so a call at another level compiles the
frame again. The graph of each level stays cached.
"""

import functools

__all__ = ["install_npu_deterministic_level_guard"]


def _current_level():
    import torch_npu

    return torch_npu.npu._get_deterministic_level()


def _still_at(level, _frame_locals):
    return _current_level() == level


def _guard_on_level(level, builder, guard):
    """The guard's create_fn: adds to the frame's guard manager a check that
    the level is still ``level``, described as code for guard logs and
    recompilation reasons."""
    from torch._dynamo.guards import get_verbose_code_parts

    described = get_verbose_code_parts(f"torch_npu.npu._get_deterministic_level() == {level}", guard)
    builder.guard_manager.root.add_lambda_guard(functools.partial(_still_at, level), described, guard.user_stack)


def install_npu_deterministic_level_guard() -> bool:
    """Guards the frame Dynamo is compiling on the current deterministic
    level. Returns False, having done nothing, outside a compilation."""
    from torch._dynamo.source import GlobalStateSource
    from torch._guards import Guard, TracingContext

    tracing = TracingContext.try_get()
    if tracing is None:
        return False
    # Not a source's value: the level is global state, as grad mode is.
    guard = Guard(GlobalStateSource(), functools.partial(_guard_on_level, _current_level()))
    tracing.guards_context.dynamo_guards.add(guard)
    return True
