"""Small checks the analysis makes about its environment."""

import os

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_warn_msg

__all__ = []


def check_msprof_env() -> bool:
    """Whether torch_npu's profiler may run: False when msprof already profiles this process (its
    static or dynamic switch is set in the environment), since two collections would conflict.

    The answer is computed once per process and kept on the function (``_called``,
    ``_cached_result``); delete those attributes to ask again."""
    if getattr(check_msprof_env, "_called", False):
        return check_msprof_env._cached_result
    under_msprof = [name for name in (Constant.MSPROF_STATIC_ENV, Constant.MSPROF_DYNAMIC_ENV)
                    if os.environ.get(name)]
    if under_msprof:
        print_warn_msg(f"msprof is profiling this process ({', '.join(under_msprof)} set): "
                       "torch_npu's profiler is disabled.")
    check_msprof_env._cached_result = not under_msprof
    check_msprof_env._called = True
    return check_msprof_env._cached_result
