"""The step that has msprof export the profile's CANN folder (``msprof --export=on``): msprof
writes its timeline and summaries (export type text) or its database (db) there, for the steps
after this one to read. A profile without a CANN folder (CPU only) has nothing to export.
"""

import functools
import os
import pathlib
import shutil
import subprocess

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger  # noqa: F401  (real tests patch it here)
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []

_EXPORT_TIMEOUT_S = 3600
_SLOW_EXPORT_BYTES = 10 * 1024 ** 3  # from this much raw data on, msprof takes minutes: say so


class CANNExportParser(BaseParser):
    """The CANN folder and msprof are looked up on first use, not when the pipeline builds its steps."""

    @functools.cached_property
    def _cann_path(self) -> str:
        return ProfilerPathManager.get_cann_path(self._profiler_path)

    @functools.cached_property
    def msprof_path(self) -> str:
        """msprof's executable, '' when CANN's toolkit is not on PATH."""
        return shutil.which("msprof") or ""

    @property
    def _export_type(self) -> list:
        return self._param_dict.get(Constant.EXPORT_TYPE, [Constant.Text])

    def _check_msprof_environment(self):
        if not self.msprof_path:
            raise RuntimeError("msprof was not found: install CANN's toolkit and source its set_env.sh.")

    def _check_prof_data_size(self):
        size = sum(item.stat().st_size for item in pathlib.Path(self._cann_path).rglob("*") if item.is_file())
        if size > _SLOW_EXPORT_BYTES:
            self.logger.warning("The CANN data is %d bytes; msprof's export will take a while.", size)

    def _msprof_command(self) -> list:
        # Without --type msprof writes text (timeline and summaries); the database is asked for.
        type_flag = ["--type=db"] if Constant.Db in self._export_type else []
        return [self.msprof_path, "--export=on", f"--output={self._cann_path}", *type_flag]

    def _export(self):
        ProfilerConfig().load_info(self._profiler_path)
        if not (self._cann_path and os.path.isdir(self._cann_path)):
            return
        self._check_msprof_environment()
        self._check_prof_data_size()
        finished = subprocess.run(self._msprof_command(), capture_output=True, timeout=_EXPORT_TIMEOUT_S,
                                  check=False)
        if finished.returncode:
            raise RuntimeError(f"msprof --export exited with {finished.returncode}")

    def run(self, deps_data: dict):
        status = Constant.SUCCESS
        try:
            self._export()
        except Exception as err:  # the later steps then work from what the profile already holds
            self.logger.error("Failed to export CANN data: %s", err)
            status = Constant.FAIL
        return status, None
