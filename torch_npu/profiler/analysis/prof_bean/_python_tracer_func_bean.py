"""One Python call or return seen by the Python tracer (FRAMEWORK/torch.python_tracer_func).

Record, little-endian: u64 start_ns, thread_id, process_id, key (the hash of the function, named in
torch.python_tracer_hash); u8 trace_tag (which kind of event: call, return, ...).
"""

import struct

__all__ = []

_RECORD = struct.Struct("<4QB")


class PythonTracerFuncBean:
    SIZE = _RECORD.size

    def __init__(self, data: bytes):
        self._start_ns, self._tid, self._pid, self._key, self._trace_tag = _RECORD.unpack(data)

    @property
    def start_ns(self) -> int:
        return self._start_ns

    @property
    def tid(self) -> int:
        return self._tid

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def key(self) -> int:
        return self._key

    @property
    def trace_tag(self) -> int:
        return self._trace_tag
