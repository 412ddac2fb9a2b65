"""One Python call or return seen by the Python tracer (FRAMEWORK/torch.python_tracer_func): its
time, thread and process, the hash of the function (named in torch.python_tracer_hash) and the kind
of event (``trace_tag``: call, return, ...)."""

from torch_npu.profiler.analysis.prof_bean._bean_fields import PackedRecord, entry

__all__ = []


class PythonTracerFuncBean(PackedRecord):
    LAYOUT = "<4QB"
    FIELDS = ("start_ns", "tid", "pid", "key", "trace_tag")

    start_ns = entry("start_ns")
    tid = entry("tid")
    pid = entry("pid")
    key = entry("key")
    trace_tag = entry("trace_tag")

    def __init__(self, data: bytes):
        self._unpack(data)
