"""The NPU Sanitizer's kernel check (``TORCH_NPU_SANITIZER=1`` with
``ASCEND_OPP_DEBUG_PATH``): every npu operator reported as it starts and
finishes, with the Python stack that launched it, each run to completion
before the next (errors raise at the operator that made them).

On Ascend the check also swaps CANN's kernels for the debug build named by
ASCEND_OPP_DEBUG_PATH: ``KernelPathManager`` copies the operator package of
ASCEND_OPP_PATH to ``./opp_debug_path``, links the debug kernels into it and
points ASCEND_OPP_PATH there for the run (``clear_debug_env`` removes it).
vNPU builds that folder the same way, so tools that look for it find it,
but its own kernels are ATen's and do not read it: what the check gives on
vNPU is the operator trace and the synchronous launch (docs/sanitizer.md).
"""

import fcntl
import os
import shutil
import traceback

import torch_npu.utils._npu_trace as npu_trace
from torch_npu.utils.utils import _print_error_log, _print_info_log, _print_warn_log

_KERNEL_DIR = "built-in/op_impl/ai_core/tbe/kernel"  # inside an operator package
_LOCK_NAME = "opp_debug.lock"


class EventHandler:
    """Prints an operator's start, and its launching Python stack at its finish."""

    def _handle_acl_start_execution(self, acl_name):
        npu_trace.print_check_msg(f"====== Start acl operator {acl_name}")

    def _handle_acl_finish_execution(self, acl_name):
        frames = traceback.StackSummary.extract(traceback.walk_stack(None), lookup_lines=False)
        frames.reverse()  # walk_stack goes from the innermost frame out
        npu_trace.print_check_msg(f"====== {acl_name} python stack info:\n{''.join(frames.format())}")


class KernelPathManager:
    """The debug operator package of one run (see the module docstring)."""

    def __init__(self):
        self.folder_permission = 0o750
        self.ascend_opp_path = os.getenv("ASCEND_OPP_PATH")
        self.opp_debug_kernel_path = os.getenv("ASCEND_OPP_DEBUG_PATH")
        self.opp_debug_path = os.path.join(os.getcwd(), "opp_debug_path")
        self.func_with_lock(self.make_opp_debug_path)
        os.environ["ASCEND_LAUNCH_BLOCKING"] = "1"
        os.environ["ASCEND_OPP_PATH"] = self.opp_debug_path

    @staticmethod
    def _lock_path():
        return os.path.join(os.getcwd(), _LOCK_NAME)

    def func_with_lock(self, func):
        """Runs func holding the working directory's lock file, so that the
        ranks of one job sharing a directory build the folder once."""
        with open(os.open(self._lock_path(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                _print_warn_log(f"Permission denied to execute {func}")
                return
            try:
                func()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def make_opp_debug_path(self):
        """./opp_debug_path: ASCEND_OPP_PATH's package with the debug kernels linked in."""
        if not self.ascend_opp_path or not os.path.exists(self.ascend_opp_path):
            _print_error_log("ASCEND_OPP_PATH is not exists.")
            return
        if not self.opp_debug_kernel_path or not os.path.exists(self.opp_debug_kernel_path):
            _print_error_log("ASCEND_OPP_DEBUG_PATH is not exists.")
            return
        debug_kernels = os.path.join(self.opp_debug_kernel_path, _KERNEL_DIR)
        if not os.path.exists(debug_kernels):
            _print_warn_log("ASCEND_OPP_DEBUG_PATH is not valid kernel path.")
            return
        kernels = os.path.join(self.opp_debug_path, _KERNEL_DIR)
        if os.path.islink(kernels):
            os.unlink(kernels)  # before the tree goes: never follow it into the debug kernels
        if os.path.exists(self.opp_debug_path):
            shutil.rmtree(self.opp_debug_path)
        shutil.copytree(self.ascend_opp_path, self.opp_debug_path, symlinks=True)
        os.chmod(self.opp_debug_path, self.folder_permission)
        if os.path.islink(kernels):
            os.unlink(kernels)
        elif os.path.exists(kernels):
            shutil.rmtree(kernels)
        os.makedirs(os.path.dirname(kernels), exist_ok=True)
        os.symlink(debug_kernels, kernels)

    def remove_debug_files(self):
        os.unlink(os.path.join(self.opp_debug_path, _KERNEL_DIR))
        shutil.rmtree(self.opp_debug_path)

    def clear_debug_env(self):
        """Removes ./opp_debug_path and the lock file (at the end of the run)."""
        if not os.path.exists(self.opp_debug_path):
            return
        self.func_with_lock(self.remove_debug_files)
        try:
            os.remove(self._lock_path())
        except FileNotFoundError as error:
            _print_info_log(error)
