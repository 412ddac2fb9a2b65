"""NpuMemoryBean: one line of msprof's npu_mem.csv (the device's memory over
time) as a row of the analysis's memory_record.csv.

npu_mem.csv has a line per component and instant; memory_record.csv keeps
only the application's own totals ("APP"), so any other component becomes an
empty row. The columns are filled as real torch_npu fills them (see
_MEMORY_RECORD_SOURCES).
"""

from torch_npu.profiler.analysis.prof_bean._bean_fields import kb_to_mb
from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

# Where each column of memory_record.csv (CsvHeaders.MEMORY_RECORD) comes from: the npu_mem.csv entry
# and its conversion (None: copied as written), or no entry for a column left blank.
_MEMORY_RECORD_SOURCES = (
    ("event", None),  # Component
    ("timestamp(us)", None),  # Timestamp(us)
    ("allocated(KB)", None),  # Total Allocated(MB): the KB figure, unconverted, as in real torch_npu
    ("memory(KB)", kb_to_mb),  # Total Reserved(MB)
    (None, None),  # Total Active(MB)
    (None, None),  # Stream Ptr
    ("Device_id", None),  # Device Type
)


def _cell(line: dict, key, convert):
    if key is None:
        return ""
    if convert is None:
        return line.get(key)
    return convert(line.get(key, 0))


class NpuMemoryBean:
    """``row``: the memory_record.csv row, [] for a component other than the application."""

    def __init__(self, data: dict):
        if data.get("event") != Constant.APP:
            self.row = []
        else:
            self.row = [_cell(data, key, convert) for key, convert in _MEMORY_RECORD_SOURCES]
