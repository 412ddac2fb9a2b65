"""Runs msprof's own analysis (``msprof --analyze=on``) over the profile's CANN folder, for the
export types that need it (its communication analysis for text, its db for db)."""

import os
import shutil
import subprocess

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_error_msg
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []

_ANALYZE_TIMEOUT_S = 3600


def _find_msprof() -> str:
    """msprof's path, '' when CANN's toolkit is not installed."""
    return shutil.which("msprof") or ""


class CANNAnalyzeParser(BaseParser):
    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        self.msprof_path = _find_msprof()
        self._cann_path = ProfilerPathManager.get_cann_path(self._profiler_path)

    def _analyze_commands(self, config) -> list:
        """One msprof call per export type that needs msprof's analysis; a single-rank text export
        has no communication to analyze."""
        kinds = self._param_dict.get("export_type") or config.export_type
        wanted = [kind for kind in (Constant.Db, Constant.Text) if kind in kinds]
        if wanted == [Constant.Text] and config.rank_id == -1:
            wanted = []
        return [[self.msprof_path, "--analyze=on", "--type=" + kind, "--output=" + self._cann_path]
                for kind in wanted]

    def run(self, deps_data: dict):
        try:
            config = ProfilerConfig()
            has_cann_data = bool(self._cann_path) and os.path.isdir(self._cann_path)
            commands = self._analyze_commands(config) if has_cann_data and self.msprof_path else []
            for command in commands:
                finished = subprocess.run(command, capture_output=True, timeout=_ANALYZE_TIMEOUT_S, check=False)
                if finished.returncode:
                    print_error_msg(f"{' '.join(command[1:3])} exited with {finished.returncode}.")
        except Exception:
            print_error_msg("Failed to analyze CANN Profiling data.")
            return Constant.FAIL, None
        return Constant.SUCCESS, None
