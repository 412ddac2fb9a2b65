"""Dynamic profiling of a training script that was not changed for it.

``import torch_npu`` calls ``_NonIntrusiveProfile.init()`` when one of these
is set (torch_npu/__init__.py):

    PROF_CONFIG_PATH=<folder>   watch <folder>/profiler_config.json, as dynamic_profile.init(<folder>) does
    MSMONITOR_USE_DAEMON=1      take the configs from dynolog through msmonitor instead
                                (KINETO_USE_DAEMON=1: its deprecated name)

A script that does not call ``dynamic_profile.step()`` still has training
steps: its optimizer's ``step()``. torch calls ``Optimizer._patch_step_function``
from every optimizer's constructor; while dynamic profiling is asked for, that
hook is replaced by ``patch_step_function``, which also wraps the optimizer
class's ``step`` (once per class) so that it calls ``dynamic_profile.step()``
afterwards. A job with several optimizers would count each training step
several times, so only the optimizer made last counts. A loop without a torch
optimizer is not seen; real torch_npu has the same limit.

The profiler itself (its config poller) starts with the first optimizer, not
at import: processes that import torch_npu but never train (torchrun's
launcher, DataLoader workers) start nothing.
"""

import functools
import os
import sys

import torch

from torch_npu.profiler import dynamic_profile
from torch_npu.profiler._dynamic_profiler._dynamic_profiler_utils import DynamicProfilerUtils
from torch_npu.profiler.analysis.prof_common_func._constant import print_error_msg, print_warn_msg
from torch_npu.utils._path_manager import PathManager

__all__ = []

_torch_patch_step_function = torch.optim.Optimizer._patch_step_function


def _daemon_switch():
    """MSMONITOR_USE_DAEMON (or its old name KINETO_USE_DAEMON) as a number; 0 when unset or not a number."""
    old_name_value = os.getenv("KINETO_USE_DAEMON")
    if old_name_value is not None:
        print_warn_msg("Environment variable 'KINETO_USE_DAEMON' will be deprecated. "
                       "Please use 'MSMONITOR_USE_DAEMON' instead.")
    text = os.getenv("MSMONITOR_USE_DAEMON") or old_name_value or 0
    try:
        return int(text)
    except ValueError:
        print_error_msg("Environment variable 'MSMONITOR_USE_DAEMON' value not valid, will be set to 0 !")
        return 0


def _requested_config_folder():
    """The folder dynamic_profile.init is to watch ("" for dynolog's configs), or None: no dynamic profiling."""
    folder = os.getenv("PROF_CONFIG_PATH", "")
    use_daemon = _daemon_switch() == 1
    if folder:  # a config file wins over dynolog
        try:
            PathManager.check_input_directory_path(folder)
        except RuntimeError:
            print_error_msg(f"The path '{folder}' is invalid, and profiler will not be enabled.")
            return None
        return folder
    if not use_daemon:
        return None
    if sys.version_info < (3, 8):
        print_error_msg("Dynolog only supported above Python 3.8 !.")
        return None
    DynamicProfilerUtils.DYNAMIC_PROFILER_MODEL = DynamicProfilerUtils.DynamicProfilerConfigModel.DYNO_CONFIG
    return ""


class _NonIntrusiveProfile:
    OPTIMIZER_ID = 0  # id() of the optimizer made last: the one whose steps are counted
    _folder_to_watch = None  # what dynamic_profile.init is given when the first optimizer is made

    @staticmethod
    def init():
        """Asks torch's optimizers for their steps when the environment asks for dynamic profiling."""
        folder = _requested_config_folder()
        if folder is None:
            return
        _NonIntrusiveProfile._folder_to_watch = folder
        torch.optim.Optimizer._patch_step_function = _NonIntrusiveProfile.patch_step_function

    @staticmethod
    def patch_step_function(optimizer: torch.optim.Optimizer):
        """Optimizer._patch_step_function while dynamic profiling is on: torch's, then ours."""
        _torch_patch_step_function(optimizer)
        folder = _NonIntrusiveProfile._folder_to_watch
        if folder is not None:
            _NonIntrusiveProfile._folder_to_watch = None  # the profiler starts once
            dynamic_profile.init(folder)
        _NonIntrusiveProfile.OPTIMIZER_ID = id(optimizer)
        cls = type(optimizer)
        if getattr(cls.step, "step_hooked", False):
            return
        cls.step = _NonIntrusiveProfile.step_wrapper(cls.step)
        cls.step.step_hooked = True

    @staticmethod
    def step_wrapper(func):
        """func (an optimizer's step), followed by a training step of the dynamic profiler."""
        @functools.wraps(func)
        def counted_step(*args, **kwargs):
            result = func(*args, **kwargs)
            _NonIntrusiveProfile.step(*args, **kwargs)
            return result
        return counted_step

    @staticmethod
    def check_last_optimizer(optimizer: torch.optim.Optimizer):
        return _NonIntrusiveProfile.OPTIMIZER_ID == id(optimizer)

    @staticmethod
    def step(*args, **kwargs):
        # args[0] is the optimizer whose step just ran
        if len(args) > 0 and _NonIntrusiveProfile.check_last_optimizer(args[0]):
            dynamic_profile.step()
