"""A name the Python tracer hashed (FRAMEWORK/torch.python_tracer_hash): fixed part u64 key, then
the name under tag 1."""

import struct

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_FIXED = struct.Struct("<Q")
_TAG_VALUE = 1


class PythonTracerHashBean:
    CONSTANT_STRUCT_SIZE = _FIXED.size

    def __init__(self, data: dict):
        (self._key,) = _FIXED.unpack(data.get(Constant.CONSTANT_BYTES))
        self._value = data.get(_TAG_VALUE, "")

    @property
    def key(self) -> int:
        return self._key

    @property
    def value(self) -> str:
        return self._value
