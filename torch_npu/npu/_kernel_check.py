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

import contextlib
import fcntl
import os
import shutil
import sys
import traceback

import torch_npu.utils._npu_trace as npu_trace
from torch_npu.utils.utils import _print_error_log, _print_info_log, _print_warn_log

# Where an operator package keeps its compiled AI Core kernels; the debug
# package and the copy share this layout.
_KERNEL_SUBDIR = os.path.join("built-in", "op_impl", "ai_core", "tbe", "kernel")
_COPY_NAME = "opp_debug_path"
_LOCK_FILE_NAME = "opp_debug.lock"
_COPY_MODE = 0o750


def _lock_file_path():
    return os.path.join(os.getcwd(), _LOCK_FILE_NAME)


@contextlib.contextmanager
def _directory_lock():
    """Yields whether this process holds the working directory's lock file.

    Ranks of one job that share a directory would otherwise build or delete
    the copy at the same time; the lock is tried, not waited for, so that
    only the first rank does the work."""
    fd = os.open(_lock_file_path(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _is_present(variable, path):
    """Whether the folder that `variable` named at start-up exists; logs
    the user's mistake when it does not."""
    if path and os.path.exists(path):
        return True
    _print_error_log(f"{variable} is not exists.")
    return False


def _link_in_place_of(path, target):
    """Makes `path` a symbolic link to `target`, whatever stood there."""
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)


class KernelPathManager:
    """The debug operator package of one run (see the module docstring).

    Creating it builds ./opp_debug_path and redirects the environment; the
    sanitizer calls clear_debug_env at exit."""

    def __init__(self):
        self.opp_debug_path = os.path.join(os.getcwd(), _COPY_NAME)
        self.ascend_opp_path = os.getenv("ASCEND_OPP_PATH")
        self.opp_debug_kernel_path = os.getenv("ASCEND_OPP_DEBUG_PATH")
        self.func_with_lock(self.make_opp_debug_path)
        # Kernels run one at a time so an error surfaces at its operator,
        # and CANN loads its kernels from the copy.
        os.environ.update(ASCEND_LAUNCH_BLOCKING="1", ASCEND_OPP_PATH=self.opp_debug_path)

    def clear_debug_env(self):
        """Deletes ./opp_debug_path and then the lock file, at the end of the run."""
        if not os.path.exists(self.opp_debug_path):
            return  # never built, or another rank removed it
        self.func_with_lock(self.remove_debug_files)
        try:
            os.remove(_lock_file_path())
        except FileNotFoundError as missing:
            _print_info_log(missing)

    def func_with_lock(self, func):
        """Calls func unless another process holds the directory's lock."""
        with _directory_lock() as held:
            if held:
                func()
            else:
                _print_warn_log(f"Permission denied to execute {func}")

    def remove_debug_files(self):
        # The link goes first, on its own: the debug kernels stay untouched.
        os.unlink(self._kernel_link())
        shutil.rmtree(self.opp_debug_path)

    def make_opp_debug_path(self):
        """Builds ./opp_debug_path: a copy of the ASCEND_OPP_PATH package
        whose kernel folder is a link to the debug kernels. Logs and leaves
        things as they are when an input is missing."""
        # The attributes, not the environment: ASCEND_OPP_PATH is redirected
        # to the copy once the manager exists.
        if not (_is_present("ASCEND_OPP_PATH", self.ascend_opp_path)
                and _is_present("ASCEND_OPP_DEBUG_PATH", self.opp_debug_kernel_path)):
            return
        debug_kernels = os.path.join(self.opp_debug_kernel_path, _KERNEL_SUBDIR)
        if os.path.exists(debug_kernels):
            self._rebuild_copy(debug_kernels)
        else:
            _print_warn_log("ASCEND_OPP_DEBUG_PATH is not valid kernel path.")

    def _kernel_link(self):
        return os.path.join(self.opp_debug_path, _KERNEL_SUBDIR)

    def _rebuild_copy(self, debug_kernels):
        # shutil.rmtree unlinks the kernel link of an earlier copy without
        # descending into the debug kernels it points to.
        if os.path.exists(self.opp_debug_path):
            shutil.rmtree(self.opp_debug_path)
        shutil.copytree(self.ascend_opp_path, self.opp_debug_path, symlinks=True)
        os.chmod(self.opp_debug_path, _COPY_MODE)
        _link_in_place_of(self._kernel_link(), debug_kernels)


def _launching_stack():
    """The Python stack of the finishing operator, outermost frame first,
    down to the handler that asked (this helper left out)."""
    return "".join(traceback.format_stack(sys._getframe(1)))


class EventHandler:
    """Receives the operator trace: prints a start line per operator, and
    the user's stack once it has finished."""

    def _handle_acl_start_execution(self, acl_name):
        npu_trace.print_check_msg(f"====== Start acl operator {acl_name}")

    def _handle_acl_finish_execution(self, acl_name):
        stack = _launching_stack()
        npu_trace.print_check_msg(f"====== {acl_name} python stack info:\n{stack}")
