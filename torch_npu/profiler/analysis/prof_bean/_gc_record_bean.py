"""A Python garbage collection (FRAMEWORK/torch.gc_record, written by the GC detector): the
process and its start and end (ns)."""

from torch_npu.profiler.analysis.prof_bean._bean_fields import PackedRecord, entry
from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []


class GCRecordBean(PackedRecord):
    LAYOUT = Constant.GC_RECORD_FORMAT
    FIELDS = ("pid", "start_ns", "end_ns")

    name = "GC"
    pid = entry("pid")
    tid = entry("pid", doc="collections are shown on the process's own row")
    ts = entry("start_ns")
    end_ns = entry("end_ns")

    def __init__(self, data: bytes):
        self._unpack(data)

    @property
    def dur(self) -> int:
        return self.end_ns - self.ts
