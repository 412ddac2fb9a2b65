"""Opens the profile's ascend_pytorch_profiler[_{rank}].db and writes what describes the run: rank
and devices, host, environment, the user's metadata. Its result is the path of msprof's own db
(msprof_*.db), '' when msprof wrote none."""

import json
import os
import re

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_common_func._constant import Constant, DbConstant, TableColumnsManager
from torch_npu.profiler.analysis.prof_common_func._db_manager import TorchDb
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_common_func._host_info import collect_env_vars, get_host_info
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []

_MSPROF_DB = r"^msprof_\d+(_\d+)*\.db$"
_MSPROF_OUTPUT = "mindstudio_profiler_output"
_METADATA_FILE = "profiler_metadata.json"


def _columns(table):
    return TableColumnsManager.TableColumns[table]


class BasicDbParser(BaseParser):
    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        self._cann_path = ProfilerPathManager.get_cann_path(self._profiler_path)

    def _db_path(self) -> str:
        rank_id = ProfilerConfig().rank_id
        name = DbConstant.DB_ASCEND_PYTORCH_PROFILER
        if isinstance(rank_id, int) and rank_id >= 0:
            name = name.replace(".db", f"_{rank_id}.db")
        return os.path.join(self._output_path or self._profiler_path or "", name)

    def run(self, deps_data: dict):
        try:
            db = TorchDb()
            db.init(self._db_path())
            if not db.create_connect_db():
                ProfilerLogger.get_instance().error("Failed to connect to %s", db.get_db_path())
                return Constant.FAIL, ""
            self.save_rank_info_to_db()
            self.save_host_info_to_db()
            self.save_env_vars_info_to_db()
            self.save_profiler_metadata_to_db()
            return Constant.SUCCESS, self.get_cann_db_path()
        except Exception as err:
            ProfilerLogger.get_instance().error("Failed to write the basic db tables: %s", err)
            return Constant.FAIL, ""

    def get_cann_db_path(self) -> str:
        """msprof's db: in the CANN folder itself, else in its mindstudio_profiler_output."""
        if not self._cann_path:
            return ""
        for folder in (self._cann_path, os.path.join(self._cann_path, _MSPROF_OUTPUT)):
            if not os.path.exists(folder):
                continue
            for name in os.listdir(folder):
                if not re.match(_MSPROF_DB, name):
                    continue
                path = os.path.join(folder, name)
                try:
                    FileManager.check_db_file_vaild(path)
                except RuntimeError:
                    continue
                return path
        return ""

    @staticmethod
    def _write(table: str, rows: list):
        db = TorchDb()
        if not db.judge_table_exist(table):
            db.create_table_with_headers(table, _columns(table))
        db.insert_data_into_table(table, rows)

    def save_rank_info_to_db(self):
        rank_id = ProfilerConfig().rank_id
        device_ids = ProfilerPathManager.get_device_id(self._cann_path) if self._cann_path else []
        rows = [[rank_id, device_id] for device_id in device_ids] or [[rank_id, DbConstant.DB_INVALID_VALUE]]
        self._write(DbConstant.TABLE_RANK_DEVICE_MAP, rows)

    def save_host_info_to_db(self):
        info = get_host_info()
        self._write(DbConstant.TABLE_HOST_INFO, [[info.get("host_uid"), info.get("host_name")]])

    def save_env_vars_info_to_db(self):
        env = collect_env_vars()
        self._write(DbConstant.TABLE_META_DATA, [[name, json.dumps(value)] for name, value in env.items()])

    def save_profiler_metadata_to_db(self):
        """The user's profiler_metadata.json (add_metadata), one row per key."""
        path = os.path.join(self._profiler_path or "", _METADATA_FILE)
        if not os.path.exists(path):
            return
        try:
            metadata = json.loads(FileManager.file_read_all(path))
        except (OSError, ValueError) as err:
            ProfilerLogger.get_instance().warning("Unreadable %s: %s", path, err)
            return
        rows = [[str(name), value if isinstance(value, str) else json.dumps(value)]
                for name, value in metadata.items()]
        if rows:
            self._write(DbConstant.TABLE_META_DATA, rows)
