"""torch_npu.npu._memory_viz: flame graphs of a memory snapshot
(``torch.npu.memory._snapshot()``), as real torch_npu ships them.

The snapshot has torch.cuda's layout, so torch's own helpers
(``torch.cuda._memory_viz``: frame formatting and filtering, the blocks'
lines) do the work; ``segments`` and ``memory`` take real torch_npu's
keyword, ``format_flamegraph_func``, where torch's take ``format_flamegraph``.
"""

import io

from torch.cuda._memory_viz import (  # noqa: F401  (real torch_npu's module exposes them)
    _block_extra,
    _block_extra_legacy,
    _frame_filter,
    _frame_fmt,
    _frames_fmt,
    _write_blocks,
    format_flamegraph,
)

__all__ = ["segments", "memory"]


def _flamegraph(snapshot, with_segment, format_flamegraph_func):
    lines = io.StringIO()
    for seg in snapshot["segments"]:
        prefix = f"stream_{seg['stream']}" + (f";seg_{seg['address']}" if with_segment else "")
        _write_blocks(lines, prefix, seg["blocks"])
    return format_flamegraph_func(lines.getvalue())


def segments(snapshot, format_flamegraph_func=format_flamegraph):
    """A flame graph of every block, under its stream and segment."""
    return _flamegraph(snapshot, True, format_flamegraph_func)


def memory(snapshot, format_flamegraph_func=format_flamegraph):
    """A flame graph of every block, under its stream."""
    return _flamegraph(snapshot, False, format_flamegraph_func)
