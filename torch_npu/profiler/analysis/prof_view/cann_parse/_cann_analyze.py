"""Runs msprof's own analysis (``msprof --analyze=on``) over the profile's CANN folder, for the
export types that need it (its communication analysis for text, its db for db)."""

import os
import shutil
import subprocess

from ..._profiler_config import ProfilerConfig
from ...prof_common_func._constant import Constant, print_error_msg
from ...prof_common_func._path_manager import ProfilerPathManager
from .._base_parser import BaseParser

__all__ = []


class CANNAnalyzeParser(BaseParser):
    TIMEOUT_S = 3600

    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        self._cann_path = ProfilerPathManager.get_cann_path(self._profiler_path)
        self.msprof_path = shutil.which("msprof") or ""  # '' when CANN's toolkit is not installed

    def _export_types(self) -> list:
        return self._param_dict.get("export_type") or ProfilerConfig().export_type

    def run(self, deps_data: dict):
        try:
            config = ProfilerConfig()
            if not self._cann_path or not os.path.isdir(self._cann_path):
                return Constant.SUCCESS, None  # a CPU-only profile: nothing for msprof
            if not self.msprof_path:
                return Constant.SUCCESS, None
            kinds = [kind for kind in self._export_types() if kind in (Constant.Db, Constant.Text)]
            if Constant.Text in kinds and config.rank_id == -1 and Constant.Db not in kinds:
                kinds = []  # a single-rank text export has no communication to analyze
            for kind in kinds:
                command = [self.msprof_path, "--analyze=on", f"--type={kind}", f"--output={self._cann_path}"]
                done = subprocess.run(command, capture_output=True, timeout=self.TIMEOUT_S, check=False)
                if done.returncode != 0:
                    print_error_msg(f"msprof --analyze failed for {kind} (exit {done.returncode}).")
        except Exception:
            print_error_msg("Failed to analyze CANN Profiling data.")
            return Constant.FAIL, None
        return Constant.SUCCESS, None
