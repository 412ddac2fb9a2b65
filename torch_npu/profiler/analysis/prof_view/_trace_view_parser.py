"""trace_view.json: the profile's timeline (framework ops, device tasks, flows) for
chrome://tracing. Levels below Level1 collect too little to fill some analysis tracks, so the
events of those tracks are dropped rather than shown empty.
"""

import os

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []


def _event_labels(event: dict) -> tuple:
    # A metadata event ("M") names its track in args.name; any other event names itself.
    return event.get("name"), (event.get("args") or {}).get("name")


class TraceViewParser(BaseParser):
    """The paths of the trace and the level's pruning; writing it is vNPU's exporter's job (see run)."""

    @property
    def _temp_trace_file_path(self) -> str:
        """Where the trace is written while the analysis runs."""
        return os.path.join(self._output_path or "", Constant.TRACE_VIEW)

    @property
    def _trace_file_path(self) -> str:
        """The same file relative to the filesystem's root: the form the profile's manifest keeps."""
        written_at = self._temp_trace_file_path
        return os.path.relpath(written_at, os.sep) if os.path.isabs(written_at) else written_at

    @staticmethod
    def _prune_trace_by_level(events):
        """The events the profiler level keeps, in their order."""
        if not events:
            return []
        dropped = ProfilerConfig().get_prune_config()
        return [event for event in events if not any(label in dropped for label in _event_labels(event))]

    def run(self, deps_data: dict):
        raise NotImplementedError(
            "TraceViewParser.run is not supported on vNPU: vNPU's own exporter (torch_npu.profiler.analysis, "
            "docs/profiler.md) writes trace_view.json; this step of real torch_npu's msprof-based pipeline is "
            "here for its helpers only.")
