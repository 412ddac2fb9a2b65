"""Capturing ``torch.cond`` into an NPU graph as conditional nodes.

A graph replays fixed work, so a ``torch.cond`` met during a capture cannot
be decided then: the predicate is a device tensor whose value may differ at
every replay. Both branches are therefore recorded, each inside a
conditional node of vnpu::Graph (``NPUGraph.begin_capture_to_if_node`` ...
``end_capture_to_conditional_node``, CUDA graphs' "if" nodes):

    node(pred):      out  = true_fn(*operands)
    node(not pred):  out <- false_fn(*operands)   (copied into ``out``)

Replay evaluates each node's predicate on the device and runs exactly one
branch; since the false branch writes into the true branch's buffers, the
work after the cond reads a single set of outputs whichever branch ran.
Branches may themselves contain conds: the mode stays active inside them,
so those become nested nodes.

Two dispatch modes use this:
- ``NPUGraphCaptureControlFlowOpDispatchMode``, active during a capture;
- ``ControlFlowOpWarmupDispatchMode``, active during the eager warm-up runs
  before a capture (the graph trees run one). Its cond records both
  branches once into a discarded graph, so that anything they allocate or
  initialise lazily happens before the real capture, then computes the
  cond eagerly.

PyTorch does the same for CUDA in torch/_higher_order_ops/cudagraph_conditional_nodes.py.
"""

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["NPUGraphCaptureControlFlowOpDispatchMode", "ControlFlowOpWarmupDispatchMode"]


def _require_device_predicate(pred):
    # A host predicate would be read once, at capture: the node needs one the
    # device reads at each replay.
    if isinstance(pred, torch.Tensor) and pred.device.type == "npu":
        return
    raise ValueError("Conditions must be on an npu device to use conditional nodes in npu graphs")


def _record_as_node(pred, body):
    """Runs ``body()`` with its work captured into a conditional node that
    executes only when ``pred`` is true at replay; returns what body returned."""
    graph = torch.npu.NPUGraph.get_currently_capturing_graph()
    graph.begin_capture_to_if_node(pred)
    try:
        return body()
    finally:
        # Closed even when the body raised, so the capture itself can end
        # (or report) cleanly instead of staying inside the node.
        graph.end_capture_to_conditional_node()


def if_else_node(pred, true_fn, false_fn, operands):
    """Records one ``torch.cond`` into the capturing graph; returns the
    tensors that hold its result after each replay."""
    _require_device_predicate(pred)
    result = _record_as_node(pred, lambda: true_fn(*operands))

    def false_branch_into_result():
        produced = false_fn(*operands)
        for target, value in zip(pytree.tree_leaves(result), pytree.tree_leaves(produced)):
            target.copy_(value)

    # The negation is captured before the node opens, in the enclosing graph.
    _record_as_node(torch.logical_not(pred), false_branch_into_result)
    return result


class _CondHandlingMode(TorchDispatchMode):
    """Passes every operator through, except ``torch.cond``, given to ``_on_cond``."""

    # torch only hands higher-order operators such as cond to modes that ask.
    supports_higher_order_operators = True

    @classmethod
    def ignore_compile_internals(cls):
        # Inside torch.compile the cond is traced, not run: nothing to capture.
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.higher_order.cond:
            return self._on_cond(args, kwargs or {})
        return func(*args, **(kwargs or {}))

    def _record_cond(self, args):
        # Dispatch leaves this mode while calling into it: re-entered so that
        # conds inside the branches come back here and nest.
        with self:
            return if_else_node(*args)

    def _on_cond(self, args, kwargs):
        raise NotImplementedError


class NPUGraphCaptureControlFlowOpDispatchMode(_CondHandlingMode):
    """During a capture: each torch.cond becomes a pair of conditional nodes."""

    def _on_cond(self, args, kwargs):
        return self._record_cond(args)


class ControlFlowOpWarmupDispatchMode(_CondHandlingMode):
    """During the warm-up before a capture: each torch.cond is recorded once
    into a throw-away graph (to warm both branches up), then run eagerly."""

    def __init__(self):
        super().__init__()
        self.capture_stream = torch.npu.Stream()

    def _on_cond(self, args, kwargs):
        if torch.npu.is_current_stream_capturing():
            # A cond inside a branch being recorded below: it nests.
            return self._record_cond(args)
        scratch = torch.npu.NPUGraph()
        with torch.npu.graph(scratch, stream=self.capture_stream, capture_error_mode="relaxed"):
            self._record_cond(args)
        return torch.ops.higher_order.cond(*args, **kwargs)
