"""Builds the torch-op call tree from the ops' start and end times, and hangs
the task-queue enqueue marks on the op that launched each."""

from torch_npu.profiler.analysis.prof_bean._torch_op_node import TorchOpNode

__all__ = []


class TreeBuilder:
    @classmethod
    def build_tree(cls, event_list: list, enqueue_list: list) -> list:
        """All nodes, the root (no event) first, then one per op in start order. An op is the child
        of the innermost op that encloses it. Each enqueue mark (``ts``, ``tid``, ``corr_id``) is
        then credited to the innermost op of its thread running at its time."""
        root = TorchOpNode()
        nodes = [root]
        open_ops = [root]  # the enclosing ops of the next one, innermost last
        for event in sorted(event_list, key=lambda e: (e.ts, -e.end_ns)):
            while len(open_ops) > 1 and not cls._encloses(open_ops[-1], event):
                open_ops.pop()
            node = TorchOpNode(event, open_ops[-1])
            open_ops[-1].add_child_node(node)
            open_ops.append(node)
            nodes.append(node)
        for enqueue in enqueue_list:
            cls.update_tree_node_info(enqueue.ts, root, corr_id=enqueue.corr_id, tid=enqueue.tid)
        return nodes

    @staticmethod
    def _encloses(node, event) -> bool:
        return node.start_time <= event.ts and event.end_ns <= node.end_time

    @classmethod
    def update_tree_node_info(cls, ts, root_node, corr_id=None, tid=None):
        """Credits a launch at ``ts`` (its connection id ``corr_id``, by default ``ts`` itself) to the
        op that made it; nothing when no op (of thread ``tid``, if given) runs then."""
        node = cls.match_self_torch_op(ts, root_node, tid)
        if node is not None:
            node.update_corr_id(ts if corr_id is None else corr_id)

    @classmethod
    def match_self_torch_op(cls, ts, root_node, tid=None):
        """The innermost op running at ``ts`` (only ops of thread ``tid`` when it is given), or
        None."""
        found = None
        node = root_node.match_child_node(ts)
        while node is not None:
            if tid is None or node.tid == tid:
                found = node
            node = node.match_child_node(ts)
        return found
