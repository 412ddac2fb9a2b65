"""Finds and reads what msprof exported into a profile's CANN folder (PROF_*): the device trace
(msprof_*.json), the summary CSVs and the communication analysis."""

import json
import os
import re
from collections import defaultdict
from enum import Enum

from torch_npu.profiler.analysis.prof_bean._event_bean import EventBean
from torch_npu.profiler.analysis.prof_common_func._constant import convert_us2ns
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager

__all__ = []


class CANNDataEnum(Enum):
    """The kinds of msprof output; each value is the pattern of its file names."""
    MSPROF_TIMELINE = r"^msprof_\d+(_\d+)*(_slice_\d+)?\.json$"
    OP_SUMMARY = r"^op_summary_\d+(_\d+)*(_slice_\d+)?\.csv$"
    OP_STATISTIC = r"^op_statistic_\d+(_\d+)*\.csv$"
    API_STATISTIC = r"^api_statistic_\d+(_\d+)*\.csv$"
    STEP_TRACE = r"^step_trace_\d+(_\d+)*\.csv$"
    AI_CPU = r"^aicpu_\d+(_\d+)*\.csv$"
    L2_CACHE = r"^l2_cache_\d+(_\d+)*\.csv$"
    NPU_MEMORY = r"^npu_mem_\d+(_\d+)*\.csv$"
    NPU_MODULE_MEMORY = r"^npu_module_mem_\d+(_\d+)*\.csv$"
    GE_MEMORY = r"^memory_record_\d+(_\d+)*\.csv$"
    GE_OPERATOR_MEMORY = r"^operator_memory_\d+(_\d+)*\.csv$"
    NIC = r"^nic_\d+(_\d+)*\.csv$"
    ROCE = r"^roce_\d+(_\d+)*\.csv$"
    PCIE = r"^pcie_\d+(_\d+)*\.csv$"
    HCCS = r"^hccs_\d+(_\d+)*\.csv$"
    COMMUNICATION = r"^communication\.json$"
    MATRIX = r"^communication_matrix\.json$"
    REPORT_DB = r"^msprof_\d+(_\d+)*\.db$"
    ANALYSIS_DB = r"^communication_analyzer\.db$"


def _logger():
    try:
        return ProfilerLogger.get_instance()
    except Exception:  # log not opened
        return None


class CANNFileParser:
    def __init__(self, profiler_path: str):
        self._cann_path = ProfilerPathManager.get_cann_path(profiler_path)
        self._file_dict = self._scan(self._cann_path)

    @staticmethod
    def _scan(cann_path) -> dict:
        """{CANNDataEnum: set of paths} for every file under the CANN folder."""
        found = defaultdict(set)
        if not isinstance(cann_path, str) or not os.path.isdir(cann_path):
            return found
        for folder, _, names in os.walk(cann_path):
            for name in names:
                for kind in CANNDataEnum:
                    if re.match(kind.value, name):
                        found[kind].add(os.path.join(folder, name))
        return found

    def get_file_list_by_type(self, file_type: CANNDataEnum) -> set:
        return self._file_dict.get(file_type, set())

    # --- readers --------------------------------------------------------------------------------
    @staticmethod
    def _parse_json(text: str):
        try:
            return json.loads(text)
        except ValueError as err:
            raise RuntimeError(f"Invalid JSON content: {err}") from err

    @classmethod
    def _json_load(cls, text: str):
        """A JSON array's items; {} for an empty file, [] for JSON that is not an array."""
        if not text:
            return {}
        data = cls._parse_json(text)
        return data if isinstance(data, list) else []

    @classmethod
    def _json_dict_load(cls, text: str) -> dict:
        """A JSON object; {} for an empty file or JSON that is not an object."""
        if not text:
            return {}
        data = cls._parse_json(text)
        return data if isinstance(data, dict) else {}

    def get_timeline_all_data(self) -> list:
        events = []
        for path in sorted(self.get_file_list_by_type(CANNDataEnum.MSPROF_TIMELINE)):
            events.extend(self._json_load(FileManager.file_read_all(path)) or [])
        return events

    def get_analyze_communication_data(self, file_type: CANNDataEnum) -> dict:
        files = sorted(self.get_file_list_by_type(file_type))
        if not files:
            return {}
        return self._json_dict_load(FileManager.file_read_all(files[0]))

    def get_acl_to_npu_data(self) -> dict:
        return self.combine_acl_to_npu(self.get_timeline_all_data())

    @staticmethod
    def combine_acl_to_npu(timeline_data: list) -> dict:
        """{ns of the host launch: [EventBean of the device task it launched]}, following the
        trace's HostToDevice flows: the flow starts at the launch and ends on the task's
        (pid, tid, ts)."""
        starts, ends, tasks = {}, {}, {}
        for event in timeline_data:
            phase = event.get("ph")
            if event.get("cat") == "HostToDevice":
                if phase == "s":
                    starts[event.get("id")] = event
                elif phase == "f":
                    ends[event.get("id")] = event
            elif phase == "X":
                tasks[(event.get("pid"), event.get("tid"), str(event.get("ts")))] = event
        result = defaultdict(list)
        for flow_id, start in starts.items():
            end = ends.get(flow_id)
            task = end and tasks.get((end.get("pid"), end.get("tid"), str(end.get("ts"))))
            if not task:
                continue
            task["ts_ns"] = convert_us2ns(task.get("ts", 0))
            task["end_ns"] = task["ts_ns"] + convert_us2ns(task.get("dur", 0))
            result[convert_us2ns(start.get("ts", 0))].append(EventBean(task))
        if timeline_data and not result:
            logger = _logger()
            if logger:
                logger.warning("No HostToDevice flow links a host launch to a device task.")
        return dict(result)
