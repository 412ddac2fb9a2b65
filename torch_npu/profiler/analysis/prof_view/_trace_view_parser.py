"""trace_view.json: the profile's timeline (framework ops, device tasks, flows) for chrome://tracing;
levels below Level1 drop the analysis tracks their data cannot fill."""

import os

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []


class TraceViewParser(BaseParser):
    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        output_path = self._output_path or ""
        # Where the trace is written while the analysis runs, and its place relative to the root
        # of the output (the form kept in the profile's manifest).
        self._temp_trace_file_path = os.path.join(output_path, Constant.TRACE_VIEW)
        self._trace_file_path = os.path.relpath(self._temp_trace_file_path, os.sep) \
            if os.path.isabs(self._temp_trace_file_path) else self._temp_trace_file_path

    @staticmethod
    def _prune_trace_by_level(json_data: list) -> list:
        """The events whose name (or, for metadata events, label in args.name) the level keeps."""
        if not json_data:
            return []
        pruned = ProfilerConfig().get_prune_config()
        if not pruned:
            return list(json_data)
        return [event for event in json_data
                if event.get("name") not in pruned and (event.get("args") or {}).get("name") not in pruned]

    def run(self, deps_data: dict):
        raise NotImplementedError(
            "TraceViewParser.run is not supported on vNPU: vNPU's own exporter (torch_npu.profiler.analysis, "
            "docs/profiler.md) writes trace_view.json; this step of real torch_npu's msprof-based pipeline is "
            "here for its helpers only.")
