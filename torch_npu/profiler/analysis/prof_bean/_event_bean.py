"""An event of the device's trace (msprof's msprof_*.json), with the fields the analysis added
while reading it: ``ts_ns``/``end_ns`` (int ns), ``is_ai_core`` and ``unique_id``."""

from torch_npu.profiler.analysis.prof_bean._bean_fields import entry

__all__ = []


class EventBean:
    ts = entry("ts_ns", 0)
    end_ns = entry("end_ns", 0)
    dur = entry("dur", 0)
    pid = entry("pid", "")
    tid = entry("tid", 0)
    name = entry("name", "")
    id = entry("id")
    ph = entry("ph")
    args = entry("args", {})
    is_ai_core = entry("is_ai_core", False)
    unique_id = entry("unique_id", "")

    def __init__(self, data: dict):
        self._data = data

    @property
    def event(self) -> dict:
        """The event itself, to write back to the trace."""
        return self._data
