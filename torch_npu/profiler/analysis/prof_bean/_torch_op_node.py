"""A node of the torch-op call tree: one op, the ops it called, and the
enqueue marks (connection ids) recorded while it ran."""

import bisect

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []


class TorchOpNode:
    """Wraps an op event (anything with ``name``, ``pid``, ``tid``, ``ts``, ``end_ns``, ``dur``,
    ``args``, ``call_stack``). A node built without an event is the tree's root: it spans all time."""

    def __init__(self, event=None, parent_node=None):
        self._event = event
        self._parent_node = parent_node
        self._child_list = []
        self._child_starts = []  # the children's start times, for bisect
        self._corr_id_self = []
        self._corr_id_total = []

    # --- what the event says -------------------------------------------------
    @property
    def event(self):
        return self._event

    @property
    def pid(self):
        return self._event.pid

    @property
    def tid(self):
        return self._event.tid

    @property
    def name(self):
        return self._event.name

    @property
    def args(self):
        return self._event.args

    @property
    def input_shape(self):
        return self._event.args.get(Constant.INPUT_SHAPES)

    @property
    def call_stack(self):
        return self._event.call_stack

    @property
    def start_time(self):
        return float("-inf") if self._event is None else self._event.ts

    @property
    def end_time(self):
        return float("inf") if self._event is None else self._event.end_ns

    @property
    def host_total_dur(self):
        return self._event.dur

    @property
    def host_self_dur(self):
        """The op's own time: its duration less its direct children's."""
        return self._event.dur - sum(child.host_total_dur for child in self._child_list)

    def is_profiler_step(self) -> bool:
        return self._event is not None and str(self._event.name).startswith("ProfilerStep#")

    # --- the tree --------------------------------------------------------------
    @property
    def parent_node(self):
        return self._parent_node

    @property
    def child_node_list(self):
        return self._child_list

    def add_child_node(self, child_node):
        """Adds a child; children are added in the order they start."""
        self._child_list.append(child_node)
        self._child_starts.append(child_node.start_time)

    def contains(self, ts) -> bool:
        return self.start_time <= ts <= self.end_time

    def match_child_node(self, ts):
        """The direct child running at ``ts``, or None."""
        index = bisect.bisect_right(self._child_starts, ts) - 1
        if index >= 0 and self._child_list[index].contains(ts):
            return self._child_list[index]
        return None

    # --- connection ids --------------------------------------------------------
    @property
    def corr_id_self(self):
        """The connection ids launched by this op itself (not by the ops it called)."""
        return self._corr_id_self

    @property
    def corr_id_total(self):
        """The connection ids launched by this op or any op under it. The root of a tree (a node
        without parent) keeps no such list: everything is under it."""
        return self._corr_id_total

    def update_corr_id(self, corr_id):
        """Records a launch made by this op: its own, and its ancestors' (below the root) total."""
        self._corr_id_self.append(corr_id)
        node = self
        while node.parent_node is not None:
            node._corr_id_total.append(corr_id)
            node = node.parent_node
