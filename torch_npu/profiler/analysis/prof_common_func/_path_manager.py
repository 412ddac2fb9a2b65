"""Where the parts of one ``*_ascend_pt`` profile folder are."""

import os

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
