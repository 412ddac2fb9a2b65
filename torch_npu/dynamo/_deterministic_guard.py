"""A Dynamo guard on torch_npu's deterministic level (real torch_npu's
``torch_npu.dynamo._deterministic_guard``): a backend calls
``install_npu_deterministic_level_guard()`` while it compiles, and the graph
is compiled again when the level in effect
(``torch_npu.npu._get_deterministic_level()``) is no longer the one it was
compiled at; each level's graph stays cached."""

__all__ = ["install_npu_deterministic_level_guard"]


def install_npu_deterministic_level_guard() -> bool:
    """Adds the guard to the frame being compiled. False outside a compilation."""
    import torch._guards
    from torch._dynamo.guards import get_verbose_code_parts
    from torch._dynamo.source import GlobalStateSource

    import torch_npu

    context = torch._guards.TracingContext.try_get()
    if context is None:
        return False
    level = torch_npu.npu._get_deterministic_level()

    def make_guard(builder, guard):
        def level_unchanged(_):
            return torch_npu.npu._get_deterministic_level() == level

        code = [f"torch_npu.npu._get_deterministic_level() == {level}"]
        builder.guard_manager.root.add_lambda_guard(level_unchanged, get_verbose_code_parts(code, guard),
                                                    guard.user_stack)

    context.guards_context.dynamo_guards.add(GlobalStateSource().make_guard(make_guard))
    return True
