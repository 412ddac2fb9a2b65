"""Where the parts of one ``*_ascend_pt`` profile folder are."""

import os
import re

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []


class ProfilerPathManager:
    @classmethod
    def get_realpath(cls, path: str) -> str:
        """``path`` with ``~`` expanded and links resolved."""
        return os.path.realpath(os.path.expanduser(str(path)))

    @classmethod
    def get_fwk_path(cls, profiler_path: str) -> str:
        """The folder of the framework's raw data (FRAMEWORK/), '' when there is no profile folder."""
        if not profiler_path:
            return ""
        return os.path.join(profiler_path, Constant.FRAMEWORK_DIR)

    @classmethod
    def get_output_path(cls, profiler_path: str) -> str:
        return os.path.join(profiler_path, Constant.OUTPUT_DIR)

    @classmethod
    def get_cann_path(cls, profiler_path: str) -> str:
        """The profile's CANN raw-data folder (PROF_<n>_<timestamp>_<id>/), '' when it has none
        (a CPU-only profile)."""
        if not os.path.isdir(profiler_path):
            return ""
        for name in sorted(os.listdir(profiler_path)):
            path = os.path.join(profiler_path, name)
            if re.match(Constant.CANN_DIR_PATTERN, name) and os.path.isdir(path):
                return path
        return ""

    @classmethod
    def get_host_path(cls, cann_path: str) -> str:
        path = os.path.join(cann_path, "host") if cann_path else ""
        return path if path and os.path.isdir(path) else ""

    @classmethod
    def get_device_path(cls, cann_path: str) -> list:
        """The CANN raw-data folder's device_<id>/ folders."""
        if not cann_path or not os.path.isdir(cann_path):
            return []
        return sorted(os.path.join(cann_path, name) for name in os.listdir(cann_path)
                      if re.match(r"^device_\d+$", name) and os.path.isdir(os.path.join(cann_path, name)))

    @classmethod
    def get_device_id(cls, cann_path: str) -> list:
        """The ids of the devices the CANN raw-data folder has data of."""
        return sorted(int(os.path.basename(path).split("_", 1)[1]) for path in cls.get_device_path(cann_path))

    @classmethod
    def get_info_path(cls, profiler_path: str) -> str:
        """The CANN raw-data folder's host/info.json, '' when there is none."""
        path = os.path.join(cls.get_cann_path(profiler_path), "host", "info.json")
        return path if os.path.isfile(path) else ""

    @classmethod
    def get_start_info_path(cls, cann_path: str) -> str:
        """The CANN raw-data folder's host/start_info, else its first device's start_info.<id>, else ''."""
        path = os.path.join(cann_path, "host", "start_info")
        if os.path.isfile(path):
            return path
        for device_path in cls.get_device_path(cann_path):
            path = os.path.join(device_path, "start_info." + os.path.basename(device_path).split("_", 1)[1])
            if os.path.isfile(path):
                return path
        return ""

    @classmethod
    def get_profiler_path_list(cls, input_path: str) -> list:
        """The profile folders at ``input_path``: itself when it is one, else those directly under it."""
        input_path = cls.get_realpath(input_path)
        if os.path.basename(input_path).endswith("_ascend_pt"):
            return [input_path]
        if not os.path.isdir(input_path):
            return []
        return sorted(os.path.join(input_path, name) for name in os.listdir(input_path)
                      if name.endswith("_ascend_pt") and os.path.isdir(os.path.join(input_path, name)))

    @classmethod
    def get_info_file_path(cls, profiler_path: str) -> str:
        """The profile's profiler_info.json (profiler_info_{rank}.json on a rank), '' when it has none."""
        if not os.path.isdir(profiler_path):
            return ""
        names = sorted(n for n in os.listdir(profiler_path)
                       if n.startswith("profiler_info") and n.endswith(".json"))
        return os.path.join(profiler_path, names[0]) if names else ""
