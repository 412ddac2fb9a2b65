"""What the installed CANN's profiling tools can export.

Real torch_npu asks ``msprof --help`` whether the CANN package can export
its profiling database (``export_type="db"``) and whether the text export
writes the database too. vNPU's analysis is its own (torch_npu/profiler/
analysis): it writes the database for export_type "db" (_db_export.py), and
the text export writes the text files only, as with a CANN package that
exports db on request, whatever msprof is on the PATH. So CannPackageManager
holds those answers from the start; an answer set to None is asked of msprof
(once, by the check_* functions below) when next needed.
"""

import functools
import shutil
import subprocess

from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager

__all__ = []

_HELP_TIMEOUT_S = 30


class CannPackageManager:
    """The answers, as class attributes: True/False, or None for "ask msprof when next needed"."""

    SUPPORT_EXPORT_DB = True  # export_type "db" works (vNPU's analysis writes it)
    SUPPORT_DEFAULT_EXPORT_DB = False  # the text export writes text only

    @classmethod
    def is_support_export_db(cls) -> bool:
        return _remembered(cls, "SUPPORT_EXPORT_DB", check_cann_package_support_export_db)

    @classmethod
    def is_support_default_export_db(cls) -> bool:
        return _remembered(cls, "SUPPORT_DEFAULT_EXPORT_DB", check_cann_package_support_default_export_db)


def _remembered(owner, answer_name: str, ask) -> bool:
    """``owner.<answer_name>``, asked (and stored) first if it is still None."""
    answer = getattr(owner, answer_name)
    if answer is None:
        answer = ask()
        setattr(owner, answer_name, answer)
    return answer


def check_msprof_help_output(expected: str) -> bool:
    """Whether ``msprof --help`` succeeds and mentions ``expected``."""
    msprof = _runnable_msprof()
    help_text = _help_of(msprof) if msprof else None
    return help_text is not None and expected in help_text


# Each capability is a phrase that msprof's help prints when the package has it.
check_cann_package_support_export_db = functools.partial(check_msprof_help_output, "--type")
check_cann_package_support_default_export_db = functools.partial(
    check_msprof_help_output, "which will also export the database")


def _runnable_msprof():
    """msprof's path, or None when there is none on the PATH or the one found is not safe to run
    (ProfilerPathManager.check_path_permission)."""
    found = shutil.which("msprof")
    return found if found and ProfilerPathManager.check_path_permission(found) else None


def _help_of(msprof):
    """What ``msprof --help`` prints, None if it fails."""
    try:
        done = subprocess.run([msprof, "--help"], capture_output=True, text=True,
                              timeout=_HELP_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout or "") if done.returncode == 0 else None
