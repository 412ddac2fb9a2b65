"""The settings one profile was taken with, read back from its profiler_info.json (and CANN's
host/info.json, host_start.log), shared by the analysis steps.

``ProfilerConfig()`` is one object per process; ``load_info(profile)`` fills it, ``reset_is_load()``
lets the next profile be loaded.
"""

import json
import os
import re

from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager
from torch_npu.profiler.analysis.prof_common_func._singleton import Singleton

__all__ = []

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")

# The framework-side records each trace level drops from trace_view.json (matched against the event's
# name, or, for metadata events, against the label in args.name).
_TRACE_PRUNED_AT_LEVEL = {
    Constant.LEVEL_NONE: {"Overlap Analysis", "Communication", "Computing", "Free", "Stream"},
    Constant.LEVEL0: {"Overlap Analysis", "Communication", "Computing", "Free"},
}


@Singleton
class ProfilerConfig:
    def __init__(self):
        # experimental config, as recorded in profiler_info.json
        self._profiler_level = Constant.LEVEL0
        self._ai_core_metrics = Constant.AicMetricsNone
        self._l2_cache = False
        self._msprof_tx = False
        self._op_attr = False
        self._data_simplification = True
        self._sys_io = False
        self._sys_interconnection = False
        self._export_type = [Constant.Text]
        self._activities = []
        self._rank_id = -1
        # clocks: syscnt ticks -> ns, and local-time offset
        self._localtime_diff = 0
        self._syscnt_enable = False
        self._freq = 100.0  # MHz
        self._time_offset = 0
        self._start_cnt = 0
        self._is_load = False

    # --- accessors the steps use -------------------------------------------------------------
    @property
    def rank_id(self):
        return self._rank_id

    @property
    def activities(self):
        return self._activities

    @property
    def export_type(self):
        return self._export_type

    @property
    def data_simplification(self):
        return self._data_simplification

    def get_npu_level(self):
        return self._profiler_level

    def is_all_kernel_headers(self) -> bool:
        """kernel_details.csv keeps every op_summary column above Level0, or when AI-core metrics
        are collected."""
        return self._profiler_level != Constant.LEVEL0 or self._ai_core_metrics != Constant.AicMetricsNone

    def get_prune_config(self) -> dict:
        return {name: True for name in _TRACE_PRUNED_AT_LEVEL.get(self._profiler_level, ())}

    def get_parser_bean(self) -> list:
        """(CANNDataEnum, bean class) of the msprof CSVs copied into the output for this config."""
        from torch_npu.profiler.analysis.prof_parse._cann_file_parser import CANNDataEnum
        from torch_npu.profiler.analysis.prof_bean._ai_cpu_bean import AiCpuBean
        from torch_npu.profiler.analysis.prof_bean._l2_cache_bean import L2CacheBean
        from torch_npu.profiler.analysis.prof_bean._api_statistic_bean import ApiStatisticBean
        from torch_npu.profiler.analysis.prof_bean._op_statistic_bean import OpStatisticBean
        from torch_npu.profiler.analysis.prof_bean._nic_bean import NicBean
        from torch_npu.profiler.analysis.prof_bean._roce_bean import RoCEBean
        from torch_npu.profiler.analysis.prof_bean._pcie_bean import PcieBean
        from torch_npu.profiler.analysis.prof_bean._hccs_bean import HccsBean
        beans = []
        if self._profiler_level != Constant.LEVEL_NONE:
            beans.append((CANNDataEnum.OP_STATISTIC, OpStatisticBean))
            beans.append((CANNDataEnum.API_STATISTIC, ApiStatisticBean))
        if self._profiler_level in (Constant.LEVEL1, Constant.LEVEL2):
            beans.append((CANNDataEnum.AI_CPU, AiCpuBean))
        if self._l2_cache:
            beans.append((CANNDataEnum.L2_CACHE, L2CacheBean))
        if self._sys_io:
            beans += [(CANNDataEnum.NIC, NicBean), (CANNDataEnum.ROCE, RoCEBean)]
        if self._sys_interconnection:
            beans += [(CANNDataEnum.PCIE, PcieBean), (CANNDataEnum.HCCS, HccsBean)]
        return beans

    # --- loading ------------------------------------------------------------------------------
    def reset_is_load(self):
        self._is_load = False

    def load_info(self, profiler_path: str):
        """Reads the profile's profiler_info*.json (once per profile) and its CANN clock files."""
        if self._is_load:
            return
        info_json = {}
        info_path = ProfilerPathManager.get_info_file_path(profiler_path)
        if info_path:
            try:
                info_json = json.loads(FileManager.file_read_all(info_path))
            except (OSError, ValueError):
                info_json = {}
        self._load_experimental_config(info_json)
        self._rank_id = info_json.get("rank_id", -1)
        self.load_syscnt_info(profiler_path, info_json)
        self._is_load = True

    def _load_experimental_config(self, info_json: dict):
        config = info_json.get("config", {})
        experimental = config.get("experimental_config", {}) or {}
        common = config.get("common_config", {}) or {}
        self._activities = common.get("activities", []) or []
        self._profiler_level = experimental.get("_profiler_level", Constant.LEVEL0)
        self._ai_core_metrics = experimental.get("_aic_metrics", Constant.AicMetricsNone)
        self._l2_cache = bool(experimental.get("_l2_cache", False))
        self._msprof_tx = bool(experimental.get("_msprof_tx", False))
        self._op_attr = bool(experimental.get("_op_attr", False))
        self._data_simplification = bool(experimental.get("_data_simplification", True))
        self._sys_io = bool(experimental.get("_sys_io", False))
        self._sys_interconnection = bool(experimental.get("_sys_interconnection", False))
        self._export_type = self._get_export_type_from_profiler_info(experimental)

    def _get_export_type_from_profiler_info(self, experimental_config: dict) -> list:
        """The export types asked for, keeping only the known ones; [text] when none is left."""
        wanted = experimental_config.get("export_type", experimental_config.get("_export_type", Constant.Text))
        if isinstance(wanted, str):
            wanted = [wanted]
        known = [kind for kind in (wanted or []) if kind in (Constant.Text, Constant.Db)]
        return known or [Constant.Text]

    def load_syscnt_info(self, profiler_path: str, info_json: dict):
        """Sets the syscnt clock (MHz, start tick, start ns) from CANN's host/info.json and
        host_start.log; a file that is missing or unreadable leaves the clock off."""
        self._localtime_diff = int(info_json.get("localtime_diff", 0) or 0)
        try:
            info_path = ProfilerPathManager.get_info_path(profiler_path)
            if info_path:
                cann_info = json.loads(FileManager.file_read_all(info_path))
                freq = (cann_info.get("CPU") or [{}])[0].get("Frequency", "")
                if self.is_number(str(freq)) and float(freq) > 0:
                    self._freq = float(freq)
            log_path = ProfilerPathManager.get_host_start_log_path(profiler_path)
            if log_path:
                fields = {}
                for line in FileManager.file_read_all(log_path).splitlines():
                    key, _, value = line.partition(":")
                    fields[key.strip()] = value.strip()
                if fields.get("cntvct", "").isdigit() and fields.get("clock_monotonic_raw", "").isdigit():
                    self._start_cnt = int(fields["cntvct"])
                    self._time_offset = int(fields["clock_monotonic_raw"])
                    self._syscnt_enable = True
        except (OSError, ValueError, AttributeError, IndexError):
            self._syscnt_enable = False

    def get_timestamp_from_syscnt(self, syscnt: int, time_fmt: int = 1000):
        """A syscnt tick as ns (time_fmt=1000) or us (1); ticks pass through when the clock is off."""
        if not self._syscnt_enable:
            return syscnt
        ratio = time_fmt / self._freq
        return self._time_offset + (syscnt - self._start_cnt) * ratio

    def get_local_time(self, monotonic_time):
        return int(monotonic_time + self._localtime_diff)

    @staticmethod
    def is_number(text: str) -> bool:
        return bool(_NUMBER.match(text.strip())) if isinstance(text, str) else False
