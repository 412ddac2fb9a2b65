"""Runs ``msprof --export=on`` over the profile's CANN folder, so msprof writes its timeline and
summaries (text) or its database (db) before the analysis reads them."""

import os
import shutil
import subprocess

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []


class CANNExportParser(BaseParser):
    TIMEOUT_S = 3600
    LARGE_DATA_BYTES = 10 * 1024 ** 3  # above this, warn that the export will take long

    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        self._cann_path = ProfilerPathManager.get_cann_path(self._profiler_path)
        self._export_type = param_dict.get(Constant.EXPORT_TYPE, [Constant.Text])
        self.msprof_path = shutil.which("msprof") or ""  # '' when CANN's toolkit is not installed

    def _check_msprof_environment(self):
        if not self.msprof_path:
            raise RuntimeError("msprof was not found: install CANN's toolkit and source its set_env.sh.")

    def _check_prof_data_size(self):
        total = 0
        for folder, _, names in os.walk(self._cann_path):
            total += sum(os.path.getsize(os.path.join(folder, name)) for name in names)
        if total > self.LARGE_DATA_BYTES:
            ProfilerLogger.get_instance().warning("The CANN data is %d bytes; msprof's export will take a while.",
                                                  total)

    def _command(self) -> list:
        command = [self.msprof_path, "--export=on", f"--output={self._cann_path}"]
        if Constant.Db in self._export_type:
            command.append("--type=db")
        return command

    def run(self, deps_data: dict):
        try:
            ProfilerConfig().load_info(self._profiler_path)
            if not self._cann_path or not os.path.isdir(self._cann_path):
                return Constant.SUCCESS, None
            self._check_msprof_environment()
            self._check_prof_data_size()
            done = subprocess.run(self._command(), capture_output=True, timeout=self.TIMEOUT_S, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"msprof --export exited with {done.returncode}")
        except Exception as err:
            ProfilerLogger.get_instance().error("Failed to export CANN data: %s", err)
            return Constant.FAIL, None
        return Constant.SUCCESS, None
