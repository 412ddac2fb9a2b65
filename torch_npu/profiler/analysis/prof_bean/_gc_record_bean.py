"""A Python garbage collection (FRAMEWORK/torch.gc_record, written by the GC detector): the
process and its start and end (ns)."""

import struct

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_RECORD = struct.Struct(Constant.GC_RECORD_FORMAT)


class GCRecordBean:
    SIZE = _RECORD.size

    def __init__(self, data: bytes):
        self._pid, self._start_ns, self._end_ns = _RECORD.unpack(data)

    @property
    def name(self) -> str:
        return "GC"

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def tid(self) -> int:
        return self._pid  # collections are shown on the process's own row

    @property
    def ts(self) -> int:
        return self._start_ns

    @property
    def end_ns(self) -> int:
        return self._end_ns

    @property
    def dur(self) -> int:
        return self._end_ns - self._start_ns
