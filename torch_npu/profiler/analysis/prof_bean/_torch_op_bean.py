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

import struct

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_FIXED = struct.Struct("<3q4QB?")
_FIELDS = ("start_ns", "end_ns", "sequence_number", "pid", "tid", "end_tid", "fwd_tid", "scope", "is_async")
_TAG_NAME = 1
_ARG_TAGS = {2: Constant.INPUT_DTYPES, 3: Constant.INPUT_SHAPES, 4: Constant.CALL_STACK}


class TorchOpBean:
    CONSTANT_STRUCT_SIZE = _FIXED.size

    def __init__(self, data: dict):
        self._fields = dict(zip(_FIELDS, _FIXED.unpack(data.get(Constant.CONSTANT_BYTES))))
        self._name = data.get(_TAG_NAME, "")
        self._args = {Constant.SEQUENCE_NUMBER: self._fields["sequence_number"],
                      Constant.FORWARD_THREAD_ID: self._fields["fwd_tid"]}
        for tag, arg in _ARG_TAGS.items():
            if tag in data:
                self._args[arg] = data[tag]

    @property
    def pid(self) -> int:
        return self._fields["pid"]

    @property
    def tid(self) -> int:
        return self._fields["tid"]

    @property
    def name(self) -> str:
        return self._name

    @property
    def scope(self) -> int:
        return self._fields["scope"]

    @property
    def is_async(self) -> bool:
        return self._fields["is_async"]

    @property
    def ts(self) -> int:
        return self._fields["start_ns"]

    @property
    def end_ns(self) -> int:
        return self._fields["end_ns"]

    @property
    def dur(self) -> int:
        return self._fields["end_ns"] - self._fields["start_ns"]

    @property
    def args(self) -> dict:
        return self._args

    @property
    def call_stack(self) -> str:
        return self._args.get(Constant.CALL_STACK, "")

    @property
    def is_torch_op(self) -> bool:
        return True
