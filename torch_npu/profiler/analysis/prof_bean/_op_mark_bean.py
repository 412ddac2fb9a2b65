"""A task-queue mark (FRAMEWORK/torch.op_mark): an operator entering (enqueue) or leaving (dequeue)
the NPU task queue, on the thread that did it.

Fixed part, little-endian: i64 time_ns, u64 category, corr_id, thread_id, process_id; then the
operator's name under tag 1. ``category`` says which end of which side the mark is. ``ts`` and
``dur`` describe the queue slice once the analysis has paired a start mark with its end.
"""

from torch_npu.profiler.analysis.prof_bean._bean_fields import PackedRecord, entry

__all__ = []

_TAG_NAME = 1
_ENQUEUE_START, _ENQUEUE_END, _DEQUEUE_START, _DEQUEUE_END = range(4)


def _category_is(*categories):
    return entry("category", convert=lambda category: category in categories)


class OpMarkBean(PackedRecord):
    LAYOUT = "<q4Q"
    FIELDS = ("time_ns", "category", "corr_id", "tid", "pid")

    time_ns = entry("time_ns")
    corr_id = entry("corr_id")
    tid = entry("tid")
    pid = entry("pid")
    origin_name = entry("origin_name")

    is_enqueue = _category_is(_ENQUEUE_START, _ENQUEUE_END)
    is_enqueue_start = _category_is(_ENQUEUE_START)
    is_enqueue_end = _category_is(_ENQUEUE_END)
    is_dequeue_start = _category_is(_DEQUEUE_START)
    is_dequeue_end = _category_is(_DEQUEUE_END)

    def __init__(self, data: dict):
        self._unpack_tagged(data)["origin_name"] = data.get(_TAG_NAME, "")
        self.ts = self.time_ns  # until paired
        self.dur = 0

    @property
    def name(self) -> str:
        """"Enqueue@<op>" or "Dequeue@<op>"."""
        return ("Enqueue@" if self.is_enqueue else "Dequeue@") + self.origin_name

    @property
    def args(self) -> dict:
        return {"correlation_id": self.corr_id}
