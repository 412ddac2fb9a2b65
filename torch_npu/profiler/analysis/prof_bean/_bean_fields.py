"""Declarative fields for the beans.

A bean keeps its source in ``self._data``, a mapping: a CSV row or trace
event as read, or a binary record unpacked by ``PackedRecord``. Each of its
properties reads one entry of it, optionally converted::

    class StepBean:
        step_id = entry("Iteration ID", default=-1, convert=int)
"""

import struct

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []


def entry(key, default=None, convert=None, doc=None):
    """A read-only property: ``self._data[key]`` (``default`` when absent), passed through ``convert``
    when one is given."""
    def read(self):
        value = self._data.get(key, default)
        return value if convert is None else convert(value)
    return property(read, doc=doc)


def kb_to_mb(value) -> float:
    return float(value) / Constant.KB_TO_MB


class PackedRecord:
    """A bean whose fixed-size part is a little-endian struct: subclasses set ``LAYOUT`` (the format)
    and ``FIELDS`` (a name for each member, in order)."""
    LAYOUT = ""
    FIELDS = ()

    @classmethod
    def record_size(cls) -> int:
        return struct.calcsize(cls.LAYOUT)

    def _unpack(self, raw: bytes) -> dict:
        self._data = dict(zip(self.FIELDS, struct.unpack(self.LAYOUT, raw)))
        return self._data

    def _unpack_tagged(self, record: dict) -> dict:
        """Unpacks the fixed part of a TLV-decoded record (see _tlv_decoder); its tagged text fields
        stay in ``record``."""
        return self._unpack(record.get(Constant.CONSTANT_BYTES))
