"""Decodes the framework's variable-length binary records.

Each record is laid out, little-endian, as::

    u16 type | u32 length | body (length bytes)

and its body as the record's fixed-size fields (``constant_struct_size``
bytes, decoded by the bean) followed by any number of variable fields::

    u16 tag | u32 size | size bytes of UTF-8 text

A bean receives one dict per record: the fixed part under
``Constant.CONSTANT_BYTES`` and each variable field's text under its tag.
"""

import struct

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_HEADER = struct.Struct("<HI")  # (type or tag, length): the same header for records and their fields


def _fields(body: memoryview) -> dict:
    """{tag: text} of the variable fields packed in ``body``."""
    fields = {}
    pos = 0
    while pos + _HEADER.size <= len(body):
        tag, size = _HEADER.unpack_from(body, pos)
        pos += _HEADER.size
        fields[tag] = bytes(body[pos:pos + size]).decode("utf-8", errors="ignore")
        pos += size
    return fields


class TLVDecoder:
    @staticmethod
    def decode(all_bytes: bytes, class_bean: type, constant_struct_size: int) -> list:
        """``class_bean(fields)`` for each whole record in ``all_bytes`` (a truncated last record is
        dropped)."""
        view = memoryview(all_bytes)
        beans = []
        pos = 0
        while pos + _HEADER.size <= len(view):
            _, length = _HEADER.unpack_from(view, pos)
            body_start = pos + _HEADER.size
            body_end = body_start + length
            if body_end > len(view) or length < constant_struct_size:
                break
            record = _fields(view[body_start + constant_struct_size:body_end])
            record[Constant.CONSTANT_BYTES] = bytes(view[body_start:body_start + constant_struct_size])
            beans.append(class_bean(record))
            pos = body_end
        return beans
