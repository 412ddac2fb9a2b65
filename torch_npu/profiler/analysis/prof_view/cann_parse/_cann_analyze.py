"""CANNAnalyzeParser: has msprof analyze the profile's CANN folder itself
(``msprof --analyze=on``) for the exports that use msprof's analysis: its
database for export_type "db", its communication analysis for "text".

Without CANN's toolkit (no msprof on the PATH) or without a CANN folder
there is nothing to analyze, and the step succeeds doing nothing. msprof
failing on one type is reported and does not stop the others.
"""

import os
import shutil
import subprocess

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_error_msg
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []

# msprof's analysis of a large profile takes minutes; an hour means it hangs.
_MSPROF_ANALYZE_TIMEOUT_S = 3600


def _msprof_analyze(msprof: str, cann_path: str, export_type: str):
    """One ``msprof --analyze=on`` run; a failure is reported, not raised."""
    argv = [msprof, "--analyze=on", "--type=" + export_type, "--output=" + cann_path]
    exit_code = subprocess.run(argv, capture_output=True, timeout=_MSPROF_ANALYZE_TIMEOUT_S, check=False).returncode
    if exit_code:
        print_error_msg(f"msprof --analyze=on --type={export_type} exited with {exit_code}.")


def _analyzed_types(export_types, rank_id) -> list:
    """Which of ``export_types`` msprof has an analysis for, in the order run: db, then text. Text's
    analysis is communication's: a text-only export of a process outside a job (rank_id -1) has none."""
    chosen = [kind for kind in (Constant.Db, Constant.Text) if kind in export_types]
    return [] if chosen == [Constant.Text] and rank_id == -1 else chosen


class CANNAnalyzeParser(BaseParser):
    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        self.msprof_path = shutil.which("msprof") or ""  # '' without CANN's toolkit
        self._cann_path = ProfilerPathManager.get_cann_path(self._profiler_path)

    def run(self, deps_data: dict):
        status = Constant.SUCCESS
        try:
            config = ProfilerConfig()
            types = _analyzed_types(self._param_dict.get("export_type") or config.export_type, config.rank_id)
            if self._has_msprof_and_data():
                for export_type in types:
                    _msprof_analyze(self.msprof_path, self._cann_path, export_type)
        except Exception:  # msprof hanging past its timeout, an unreadable config: no analysis, reported
            print_error_msg("Failed to analyze CANN Profiling data.")
            status = Constant.FAIL
        return status, None

    def _has_msprof_and_data(self) -> bool:
        return bool(self.msprof_path and self._cann_path) and os.path.isdir(self._cann_path)
