"""A node of the torch-op call tree: one op, the ops it called, and the
launches (connection ids) recorded while it ran.

A node wraps an op event: anything with ``name``, ``pid``, ``tid``, ``ts``,
``end_ns``, ``dur``, ``args`` and ``call_stack``. A node made without one is
the root of a tree: it stands for the whole timeline and keeps no totals.
"""

import bisect
from types import SimpleNamespace

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

# What the root of a tree wraps: an op that runs for all time.
_WHOLE_TIMELINE = SimpleNamespace(name="", pid=None, tid=None, ts=float("-inf"), end_ns=float("inf"),
                                  dur=0, args={}, call_stack="")


def _of_event(attribute, doc=None):
    """A read-only property forwarding to the wrapped event's ``attribute``."""
    return property(lambda node: getattr(node.event, attribute), doc=doc)


class TorchOpNode:
    pid = _of_event("pid")
    tid = _of_event("tid")
    name = _of_event("name")
    args = _of_event("args")
    call_stack = _of_event("call_stack")
    start_time = _of_event("ts")
    end_time = _of_event("end_ns")
    host_total_dur = _of_event("dur", "the op's time, including the ops it called")

    def __init__(self, event=None, parent_node=None):
        self.event = _WHOLE_TIMELINE if event is None else event
        self.parent_node = parent_node
        self.child_node_list = []  # in start order
        self._child_starts = []  # their start times, to find one by bisection
        self.corr_id_self = []  # launches of this op itself
        self.corr_id_total = []  # launches of this op and of the ops under it (none kept at the root)

    @property
    def input_shape(self):
        return self.args.get(Constant.INPUT_SHAPES)

    @property
    def host_self_dur(self):
        """The op's time less the time of the ops it called directly."""
        return self.host_total_dur - sum(child.host_total_dur for child in self.child_node_list)

    def is_profiler_step(self) -> bool:
        return str(self.name).startswith("ProfilerStep#")

    def add_child_node(self, child_node):
        """Appends a child (children come in the order they start)."""
        self.child_node_list.append(child_node)
        self._child_starts.append(child_node.start_time)

    def match_child_node(self, ts):
        """The direct child running at ``ts``, or None: the last child started by then, if it has
        not ended."""
        started = bisect.bisect_right(self._child_starts, ts)
        if started and ts <= self.child_node_list[started - 1].end_time:
            return self.child_node_list[started - 1]
        return None

    def update_corr_id(self, corr_id):
        """Records a launch this op made: in its own list, and in the totals of it and its ancestors
        (the root excepted)."""
        self.corr_id_self.append(corr_id)
        ancestor = self
        while ancestor.parent_node is not None:
            ancestor.corr_id_total.append(corr_id)
            ancestor = ancestor.parent_node

    def update_corr_id_total(self, corr_id):
        """Counts a launch made while this op (a step) ran, without walking up its ancestors."""
        self.corr_id_total.append(corr_id)
