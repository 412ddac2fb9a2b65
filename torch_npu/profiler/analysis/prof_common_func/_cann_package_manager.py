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

import shutil
import subprocess

from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager

__all__ = []

# What msprof's help mentions when the package can do each.
_HELP_MENTIONS = {
    "export_db": "--type",
    "default_export_db": "which will also export the database",
}


def check_msprof_help_output(expected: str) -> bool:
    """Whether ``msprof --help`` works and mentions ``expected``; False without an msprof on the PATH,
    with one that is not safe to run (ProfilerPathManager.check_path_permission), or when it fails."""
    msprof = shutil.which("msprof")
    usable = msprof is not None and ProfilerPathManager.check_path_permission(msprof)
    try:
        done = subprocess.run([msprof, "--help"], capture_output=True, text=True, timeout=30,
                              check=False) if usable else None
    except (OSError, subprocess.SubprocessError):
        done = None
    return done is not None and done.returncode == 0 and expected in (done.stdout or "")


def check_cann_package_support_export_db() -> bool:
    return check_msprof_help_output(_HELP_MENTIONS["export_db"])


def check_cann_package_support_default_export_db() -> bool:
    return check_msprof_help_output(_HELP_MENTIONS["default_export_db"])


class CannPackageManager:
    """The answers, as class attributes: True/False, or None for "ask msprof when next needed"."""
    SUPPORT_EXPORT_DB = True  # export_type "db" works (vNPU's analysis writes it)
    SUPPORT_DEFAULT_EXPORT_DB = False  # the text export writes text only

    @classmethod
    def _answer(cls, attribute, probe):
        if getattr(cls, attribute) is None:
            setattr(cls, attribute, probe())
        return getattr(cls, attribute)

    @classmethod
    def is_support_export_db(cls) -> bool:
        return cls._answer("SUPPORT_EXPORT_DB", check_cann_package_support_export_db)

    @classmethod
    def is_support_default_export_db(cls) -> bool:
        return cls._answer("SUPPORT_DEFAULT_EXPORT_DB", check_cann_package_support_default_export_db)
