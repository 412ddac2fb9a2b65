"""A torch operator's range on the host (FRAMEWORK/torch.op_range).

Fixed part, little-endian::

    i64 start_ns, end_ns, sequence_number
    u64 process_id, start_thread_id, end_thread_id, forward_thread_id
    u8  scope (RecordScope)
    bool is_async

then optional text fields under their tags: the name (1), input dtypes (2), input shapes (3) and
call stack (4). ``args`` is what the trace shows of the op: its sequence number and forward thread,
and whichever optional fields it has, under PyTorch's names.
"""

from torch_npu.profiler.analysis.prof_bean._bean_fields import PackedRecord, entry
from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_TAG_NAME = 1
_ARG_TAGS = {2: Constant.INPUT_DTYPES, 3: Constant.INPUT_SHAPES, 4: Constant.CALL_STACK}


class TorchOpBean(PackedRecord):
    LAYOUT = "<3q4QB?"
    FIELDS = ("start_ns", "end_ns", "sequence_number", "pid", "tid", "end_tid", "fwd_tid", "scope", "is_async")

    is_torch_op = True
    pid = entry("pid")
    tid = entry("tid")
    scope = entry("scope")
    is_async = entry("is_async")
    ts = entry("start_ns")
    end_ns = entry("end_ns")
    name = entry("name")
    args = entry("args")

    def __init__(self, data: dict):
        fields = self._unpack_tagged(data)
        fields["name"] = data.get(_TAG_NAME, "")
        shown = {Constant.SEQUENCE_NUMBER: fields["sequence_number"], Constant.FORWARD_THREAD_ID: fields["fwd_tid"]}
        shown.update((arg, data[tag]) for tag, arg in _ARG_TAGS.items() if tag in data)
        fields["args"] = shown

    @property
    def dur(self) -> int:
        return self.end_ns - self.ts

    @property
    def call_stack(self) -> str:
        return self.args.get(Constant.CALL_STACK, "")
