"""BasicDbParser: the step of export_type "db" that opens the profile's
ascend_pytorch_profiler[_{rank}].db and writes what describes the run:

    RANK_DEVICE_MAP   the rank and the devices the CANN folder has data of
    HOST_INFO         the host's id and name
    META_DATA         the recorded environment variables, then the user's
                      profiler_metadata.json (``add_metadata``), a row per key

Its result is the path of msprof's own database (msprof_*.db, in the CANN
folder or its mindstudio_profiler_output), which the later steps read; ''
when msprof wrote none.
"""

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

_MSPROF_DB_NAME = r"^msprof_\d+(_\d+)*\.db$"
# msprof leaves its database in the CANN folder, or (newer CANN) in this subfolder of it.
_MSPROF_EXPORT_FOLDER = "mindstudio_profiler_output"


def _append_rows(table: str, rows: list):
    """Adds ``rows`` to ``table`` of the open TorchDb, creating the table on first use."""
    db = TorchDb()
    if not db.judge_table_exist(table):
        db.create_table_with_headers(table, TableColumnsManager.TableColumns[table])
    db.insert_data_into_table(table, rows)


def _db_name(rank_id) -> str:
    """ascend_pytorch_profiler.db, or ascend_pytorch_profiler_{rank}.db for a rank of a job."""
    stem, suffix = os.path.splitext(DbConstant.DB_ASCEND_PYTORCH_PROFILER)
    is_rank = isinstance(rank_id, int) and rank_id >= 0
    return f"{stem}_{rank_id}{suffix}" if is_rank else DbConstant.DB_ASCEND_PYTORCH_PROFILER


class BasicDbParser(BaseParser):
    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        self._cann_path = ProfilerPathManager.get_cann_path(self._profiler_path)

    def run(self, deps_data: dict):
        try:
            db = TorchDb()
            db.init(os.path.join(self._output_path or self._profiler_path or "",
                                 _db_name(ProfilerConfig().rank_id)))
            if not db.create_connect_db():
                ProfilerLogger.get_instance().error("Failed to connect to %s", db.get_db_path())
                return Constant.FAIL, ""
            for write in (self.save_rank_info_to_db, self.save_host_info_to_db,
                          self.save_env_vars_info_to_db, self.save_profiler_metadata_to_db):
                write()
            return Constant.SUCCESS, self.get_cann_db_path()
        except Exception as err:
            ProfilerLogger.get_instance().error("Failed to write the basic db tables: %s", err)
            return Constant.FAIL, ""

    def get_cann_db_path(self) -> str:
        """The first valid msprof_*.db of the CANN folder, else of its mindstudio_profiler_output."""
        if not self._cann_path:
            return ""
        for folder in (self._cann_path, os.path.join(self._cann_path, _MSPROF_EXPORT_FOLDER)):
            found = _valid_msprof_db_in(folder)
            if found:
                return found
        return ""

    def save_rank_info_to_db(self):
        rank_id = ProfilerConfig().rank_id
        devices = ProfilerPathManager.get_device_id(self._cann_path) if self._cann_path else []
        if not devices:  # no device data: one row saying so
            devices = [DbConstant.DB_INVALID_VALUE]
        _append_rows(DbConstant.TABLE_RANK_DEVICE_MAP, [[rank_id, device] for device in devices])

    def save_host_info_to_db(self):
        host = get_host_info()
        _append_rows(DbConstant.TABLE_HOST_INFO, [[host.get("host_uid"), host.get("host_name")]])

    def save_env_vars_info_to_db(self):
        _append_rows(DbConstant.TABLE_META_DATA,
                     [[key, json.dumps(value)] for key, value in collect_env_vars().items()])

    def save_profiler_metadata_to_db(self):
        """The user's profiler_metadata.json, a row per key; a text value is kept as is, any other
        as JSON. A file that cannot be read or parsed is logged and skipped."""
        path = os.path.join(self._profiler_path or "", Constant.PROFILER_META_DATA)
        if not os.path.exists(path):
            return
        try:
            metadata = json.loads(FileManager.file_read_all(path))
        except (OSError, RuntimeError, ValueError) as err:
            ProfilerLogger.get_instance().warning("Unreadable %s: %s", path, err)
            return
        rows = [[str(key), _as_text(value)] for key, value in metadata.items()]
        if rows:
            _append_rows(DbConstant.TABLE_META_DATA, rows)


def _as_text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _valid_msprof_db_in(folder: str) -> str:
    """The first file of ``folder`` named like msprof's database that FileManager accepts; ''."""
    if not os.path.exists(folder):
        return ""
    for name in os.listdir(folder):
        if not re.match(_MSPROF_DB_NAME, name):
            continue
        candidate = os.path.join(folder, name)
        try:
            FileManager.check_db_file_vaild(candidate)
        except RuntimeError:
            continue  # too large to read
        return candidate
    return ""
