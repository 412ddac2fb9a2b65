"""A task-queue mark (FRAMEWORK/torch.op_mark): an operator entering (enqueue) or leaving (dequeue)
the NPU task queue, on the thread that did it.

Fixed part, little-endian: i64 time_ns, u64 category, corr_id, thread_id, process_id; then the
operator's name under tag 1. ``category`` says which end of which side the mark is.
"""

import struct

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_FIXED = struct.Struct("<q4Q")
_TAG_NAME = 1

_ENQUEUE_START, _ENQUEUE_END, _DEQUEUE_START, _DEQUEUE_END = range(4)


class OpMarkBean:
    CONSTANT_STRUCT_SIZE = _FIXED.size

    def __init__(self, data: dict):
        (self._time_ns, self._category, self._corr_id,
         self._tid, self._pid) = _FIXED.unpack(data.get(Constant.CONSTANT_BYTES))
        self._origin_name = data.get(_TAG_NAME, "")
        # start and duration of the queue slice, set once its two marks are paired
        self._ts = self._time_ns
        self._dur = 0

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def tid(self) -> int:
        return self._tid

    @property
    def corr_id(self) -> int:
        return self._corr_id

    @property
    def time_ns(self) -> int:
        return self._time_ns

    @property
    def origin_name(self) -> str:
        return self._origin_name

    @property
    def name(self) -> str:
        """"Enqueue@<op>" or "Dequeue@<op>"."""
        side = "Enqueue" if self.is_enqueue else "Dequeue"
        return f"{side}@{self._origin_name}"

    @property
    def is_enqueue(self) -> bool:
        return self._category in (_ENQUEUE_START, _ENQUEUE_END)

    @property
    def is_enqueue_start(self) -> bool:
        return self._category == _ENQUEUE_START

    @property
    def is_enqueue_end(self) -> bool:
        return self._category == _ENQUEUE_END

    @property
    def is_dequeue_start(self) -> bool:
        return self._category == _DEQUEUE_START

    @property
    def is_dequeue_end(self) -> bool:
        return self._category == _DEQUEUE_END

    @property
    def ts(self) -> int:
        return self._ts

    @ts.setter
    def ts(self, value):
        self._ts = value

    @property
    def dur(self):
        return self._dur

    @dur.setter
    def dur(self, value):
        self._dur = value

    @property
    def args(self) -> dict:
        return {"correlation_id": self._corr_id}
