"""Where the parts of one ``*_ascend_pt`` profile folder are."""

import os
import re
import stat

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []


class ProfilerPathManager:
    @classmethod
    def get_realpath(cls, path: str) -> str:
        """``path`` with ``~`` expanded, as an absolute path with no links in it. A path that is itself
        a soft link is refused (RuntimeError), as torch_npu refuses to follow one."""
        path = os.path.expanduser(str(path))
        if os.path.islink(path):
            raise RuntimeError(f"The path is a soft link, which is not allowed: {path}")
        return os.path.realpath(path)

    @classmethod
    def get_fwk_path(cls, profiler_path: str) -> str:
        """The profile's folder of the framework's raw data (FRAMEWORK/), '' when it has none."""
        if not profiler_path:
            return ""
        path = os.path.join(profiler_path, Constant.FRAMEWORK_DIR)
        return path if os.path.isdir(path) else ""

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
    def is_profiler_path(cls, path: str) -> bool:
        """Whether ``path`` is a profile folder: one named *_ascend_pt, or one holding the framework's
        raw data (FRAMEWORK/) or CANN's (PROF_*/)."""
        if not os.path.isdir(path):
            return False
        return (os.path.basename(os.path.normpath(path)).endswith("_ascend_pt")
                or bool(cls.get_fwk_path(path)) or bool(cls.get_cann_path(path)))

    @classmethod
    def get_profiler_path_list(cls, input_path: str) -> list:
        """The profile folders at ``input_path``: itself when it is one, else those directly under it."""
        if cls.is_profiler_path(input_path):
            return [input_path]
        if not os.path.isdir(input_path):
            return []
        return sorted(path for path in (os.path.join(input_path, name) for name in os.listdir(input_path))
                      if cls.is_profiler_path(path))

    @classmethod
    def get_host_start_log_path(cls, profiler_path: str) -> str:
        """The CANN raw-data folder's host/host_start.log, '' when there is none."""
        cann_path = cls.get_cann_path(profiler_path)
        path = os.path.join(cann_path, "host", "host_start.log") if cann_path else ""
        return path if path and os.path.isfile(path) else ""

    @classmethod
    def _files_in(cls, folder: str) -> list:
        if not os.path.isdir(folder):
            return []
        return sorted(path for path in (os.path.join(folder, name) for name in os.listdir(folder))
                      if os.path.isfile(path))

    @classmethod
    def get_output_all_file_list_by_type(cls, cann_path: str, output_type: str) -> list:
        """The files msprof exported into the CANN raw-data folder's ``output_type`` folder
        (mindstudio_profiler_output, ...)."""
        return cls._files_in(os.path.join(cann_path, output_type))

    @classmethod
    def get_analyze_all_file(cls, cann_path: str, analyze_type: str) -> list:
        """The files of the CANN raw-data folder's analysis folder ``analyze_type``."""
        return cls._files_in(os.path.join(cann_path, analyze_type))

    @classmethod
    def get_all_subdir(cls, path: str, max_depth: int = None) -> list:
        """Every folder under ``path`` (soft links not followed), down to ``max_depth`` levels below
        its direct subfolders (0: those only; None: all)."""
        found = []
        level = [path]
        depth = 0
        while level and (max_depth is None or depth <= max_depth):
            children = []
            for folder in level:
                try:
                    entries = list(os.scandir(folder))
                except OSError:
                    continue
                children.extend(entry.path for entry in entries if entry.is_dir(follow_symlinks=False))
            found.extend(children)
            level = children
            depth += 1
        return found

    @classmethod
    def check_path_permission(cls, path: str) -> bool:
        """Whether ``path`` (an executable torch_npu would run, such as msprof) is safe: it exists,
        belongs to root or to this user, and no one else may write it."""
        try:
            info = os.stat(path)
        except OSError:
            return False
        if info.st_uid not in (0, os.geteuid()):
            return False
        return not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)

    @classmethod
    def get_info_file_path(cls, profiler_path: str) -> str:
        """The profile's profiler_info.json (profiler_info_{rank}.json on a rank), '' when it has none."""
        if not os.path.isdir(profiler_path):
            return ""
        names = sorted(n for n in os.listdir(profiler_path)
                       if n.startswith("profiler_info") and n.endswith(".json"))
        return os.path.join(profiler_path, names[0]) if names else ""
