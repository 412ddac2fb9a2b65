"""Checks the analysis makes about the process it runs in."""

import functools
import os

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_warn_msg

__all__ = []


def _asked_once(question):
    """Answers ``question`` on the first call and repeats that answer afterwards.

    The answer is kept on the returned function (``_called``, ``_cached_result``), not in a
    closure, so a caller (a test that changes the environment) can delete both to ask again."""
    @functools.wraps(question)
    def answer():
        if not getattr(answer, "_called", False):
            answer._cached_result = question()
            answer._called = True
        return answer._cached_result
    return answer


@_asked_once
def check_msprof_env() -> bool:
    """False when msprof already profiles this process (its static or dynamic switch is set in the
    environment): two collections of one process would conflict, so torch_npu's profiler stays off."""
    switches = [name for name in (Constant.MSPROF_STATIC_ENV, Constant.MSPROF_DYNAMIC_ENV) if os.environ.get(name)]
    if switches:
        print_warn_msg(f"msprof is profiling this process ({', '.join(switches)} set): "
                       "torch_npu's profiler is disabled.")
    return not switches
