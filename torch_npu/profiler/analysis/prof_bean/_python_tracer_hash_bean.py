"""A name the Python tracer hashed (FRAMEWORK/torch.python_tracer_hash): the hash (u64) and, under
tag 1, the name."""

from torch_npu.profiler.analysis.prof_bean._bean_fields import PackedRecord, entry

__all__ = []

_TAG_VALUE = 1


class PythonTracerHashBean(PackedRecord):
    LAYOUT = "<Q"
    FIELDS = ("key",)

    key = entry("key")
    value = entry("value", default="")

    def __init__(self, data: dict):
        self._unpack_tagged(data)["value"] = data.get(_TAG_VALUE, "")
