"""Dynamic profiling of an unchanged training script, switched on by the
environment (read at ``import torch_npu``, which calls ``init()`` only when
one of these is set):

    PROF_CONFIG_PATH=<folder>   profiler_config.json in <folder>, as dynamic_profile.init(<folder>)
    MSMONITOR_USE_DAEMON=1      configs from dynolog through msmonitor instead
                                (KINETO_USE_DAEMON=1: its deprecated name)

The optimizer's ``step()`` marks the training steps: every optimizer class
made from then on has its ``step`` wrapped (through torch's
``Optimizer._patch_step_function``, which each optimizer's constructor
calls), and the wrapper calls ``dynamic_profile.step()`` after the step of
the optimizer created last, so that a job with several optimizers counts
each training step once. A custom training loop without a torch optimizer
is not seen (real torch_npu has the same limit).

``dynamic_profile.init`` runs when the first optimizer is created, not at
import: a process that never trains (torchrun's launcher, a spawned
DataLoader worker, which imports torch_npu too) starts no poller.
"""

import functools
import os
import sys

import torch

from torch_npu.profiler.analysis.prof_common_func._constant import print_error_msg, print_warn_msg
from torch_npu.utils._path_manager import PathManager

from ._dynamic_profiler._dynamic_profiler_utils import DynamicProfilerUtils
from .dynamic_profile import init as dp_init
from .dynamic_profile import step as dp_step

__all__ = []

_origin_patch_step_function = torch.optim.Optimizer._patch_step_function


class _NonIntrusiveProfile:
    OPTIMIZER_ID = 0  # id() of the optimizer created last: its steps are the training steps
    _config_path = None  # dynamic_profile.init's folder ("" in dynolog mode), until the first optimizer

    @staticmethod
    def step_wrapper(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            out = func(*args, **kwargs)
            _NonIntrusiveProfile.step(*args, **kwargs)
            return out

        return wrapper

    @staticmethod
    def patch_step_function(optimizer: torch.optim.Optimizer):
        """Optimizer._patch_step_function's replacement: torch's hook, then ours."""
        _origin_patch_step_function(optimizer)
        _NonIntrusiveProfile._init_dynamic_profile()
        _NonIntrusiveProfile.OPTIMIZER_ID = id(optimizer)
        if not getattr(optimizer.__class__.step, "step_hooked", None):
            optimizer.__class__.step = _NonIntrusiveProfile.step_wrapper(optimizer.__class__.step)
            optimizer.__class__.step.step_hooked = True

    @staticmethod
    def check_last_optimizer(optimizer: torch.optim.Optimizer):
        return id(optimizer) == _NonIntrusiveProfile.OPTIMIZER_ID

    @staticmethod
    def step(*args, **kwargs):
        if args and _NonIntrusiveProfile.check_last_optimizer(args[0]):
            dp_step()

    @staticmethod
    def _init_dynamic_profile():
        if _NonIntrusiveProfile._config_path is not None:
            dp_init(_NonIntrusiveProfile._config_path)
            _NonIntrusiveProfile._config_path = None

    @staticmethod
    def init():
        """Reads the environment; if it asks for dynamic profiling, hooks the
        optimizers (the profiler starts with the first one)."""
        prof_config_path = os.getenv("PROF_CONFIG_PATH", "")
        kineto_value = os.getenv("KINETO_USE_DAEMON")
        msmonitor_value = os.getenv("MSMONITOR_USE_DAEMON")
        if kineto_value is not None:
            print_warn_msg("Environment variable 'KINETO_USE_DAEMON' will be deprecated. "
                           "Please use 'MSMONITOR_USE_DAEMON' instead.")
        try:
            dyno_enable_flag = int(msmonitor_value or kineto_value or 0)
        except ValueError:
            print_error_msg("Environment variable 'MSMONITOR_USE_DAEMON' value not valid, will be set to 0 !")
            dyno_enable_flag = 0
        if not prof_config_path and dyno_enable_flag != 1:
            return
        if prof_config_path:  # the file wins over dynolog
            try:
                PathManager.check_input_directory_path(prof_config_path)
            except RuntimeError:
                print_error_msg(f"The path '{prof_config_path}' is invalid, and profiler will not be enabled.")
                return
        elif sys.version_info < (3, 8):
            print_error_msg("Dynolog only supported above Python 3.8 !.")
            return
        else:
            DynamicProfilerUtils.DYNAMIC_PROFILER_MODEL = DynamicProfilerUtils.DynamicProfilerConfigModel.DYNO_CONFIG
        _NonIntrusiveProfile._config_path = prof_config_path
        torch.optim.Optimizer._patch_step_function = _NonIntrusiveProfile.patch_step_function
