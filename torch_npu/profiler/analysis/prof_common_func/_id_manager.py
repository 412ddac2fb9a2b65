"""Number the strings, call stacks and connection-id lists of export_type "db".

The database stores each such value once, in its own table, and refers to it
by a number; these managers hand out those numbers (the same value always gets
the same number) and list what they numbered, for writing the tables.
"""

from torch_npu.profiler.analysis.prof_common_func._constant import DbConstant

__all__ = []

# How a torch op's "Call stack" separates its frames.
_FRAME_SEPARATOR = ";\r\n"


class _Numbering:
    """Numbers hashable values in the order they are first seen, from ``first_id``."""

    def __init__(self, first_id: int = 0):
        self._first_id = first_id
        self._ids = {}

    def number(self, value) -> int:
        found = self._ids.get(value)
        if found is None:
            found = self._first_id + len(self._ids)
            self._ids[value] = found
        return found

    def items(self):
        """(value, id) pairs, in id order."""
        return self._ids.items()


class Str2IdManager:
    """STRING_IDS: an id per distinct string; "" (nothing to name) is DbConstant.DB_INVALID_VALUE."""

    def __init__(self, first_id: int = 0):
        self._strings = _Numbering(first_id)

    def get_id_from_str(self, value: str) -> int:
        if not value:
            return DbConstant.DB_INVALID_VALUE
        return self._strings.number(value)

    def get_all_string_2_id_data(self) -> list:
        """[[id, string], ...] for the table."""
        return [[string_id, text] for text, string_id in self._strings.items()]


class ConnectionIdManager:
    """CONNECTION_IDS: an id per distinct list of connection ids (an op linked to several tasks)."""

    def __init__(self, first_id: int = 0):
        self._lists = _Numbering(first_id)

    def get_id_from_connection_ids(self, connection_ids) -> int:
        return self._lists.number(tuple(connection_ids))

    def get_connection_ids_from_id(self, list_id: int) -> list:
        for ids, found in self._lists.items():
            if found == list_id:
                return list(ids)
        return []

    def get_all_connection_ids(self) -> dict:
        """{id: [connection id, ...]}."""
        return {found: list(ids) for ids, found in self._lists.items()}


class CallChainIdManager:
    """PYTORCH_CALLCHAINS: an id per distinct call stack; each stack is kept as its list of frames,
    outermost last, as the trace spells it."""

    def __init__(self, first_id: int = 0):
        self._stacks = _Numbering(first_id)

    def get_callchain_id_from_callstack(self, callstack: str) -> int:
        if not callstack:
            return DbConstant.DB_INVALID_VALUE
        return self._stacks.number(callstack)

    def get_all_callchain_id(self) -> dict:
        """{id: [frame, ...]} (the frames in the order the stack lists them; a frame's depth is its
        index)."""
        return {found: [frame for frame in stack.split(_FRAME_SEPARATOR) if frame]
                for stack, found in self._stacks.items()}
