"""``torch.cond`` inside NPU graphs, as conditional nodes (CUDA graphs' if nodes).

Under ``NPUGraphCaptureControlFlowOpDispatchMode`` a ``torch.cond`` reached
while an NPU graph captures records both branches, each as a conditional
node (``NPUGraph.begin_capture_to_if_node`` / ``end_capture_to_conditional_node``,
vnpu::Graph::begin_conditional): the true branch under ``pred``, the false one
under ``logical_not(pred)``, whose outputs are copied into the true branch's
so that the work after the cond reads one set of buffers. Each replay reads
``pred`` on the device and runs one branch: the graph follows the predicate's
value at replay, not at capture. Conditionals nest.

``ControlFlowOpWarmupDispatchMode`` is for the eager warm-up before a capture:
both branches are captured once into a throw-away graph (so that whatever
they allocate or initialise lazily is done), then the cond runs eagerly.

The mechanism is torch's for CUDA (torch/_higher_order_ops/cudagraph_conditional_nodes.py),
on npu graphs and streams.
"""

import contextlib

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["NPUGraphCaptureControlFlowOpDispatchMode", "ControlFlowOpWarmupDispatchMode"]


class NPUGraphCaptureControlFlowOpDispatchMode(TorchDispatchMode):
    """Captures each torch.cond as conditional nodes of the capturing NPU graph."""

    @classmethod
    def ignore_compile_internals(cls):
        return True

    def __init__(self):
        self.supports_higher_order_operators = True
        super().__init__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.higher_order.cond:
            with self:  # again, for conds inside the branches
                return if_else_node(*args)
        return func(*args, **(kwargs or {}))


class ControlFlowOpWarmupDispatchMode(TorchDispatchMode):
    """Warms up both branches of each torch.cond before a capture (see the module docstring)."""

    @classmethod
    def ignore_compile_internals(cls):
        return True

    def __init__(self):
        super().__init__()
        self.supports_higher_order_operators = True
        self.capture_stream = torch.npu.Stream()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not torch.ops.higher_order.cond:
            return func(*args, **kwargs)
        if torch.npu.is_current_stream_capturing():  # a cond inside a captured branch
            with self:
                return if_else_node(*args)
        with torch.npu.graph(torch.npu.NPUGraph(), stream=self.capture_stream, capture_error_mode="relaxed"), self:
            if_else_node(*args)
        return func(*args, **kwargs)


@contextlib.contextmanager
def _if_body(pred):
    graph = torch.npu.NPUGraph.get_currently_capturing_graph()
    graph.begin_capture_to_if_node(pred)
    try:
        yield
    finally:
        graph.end_capture_to_conditional_node()


def if_else_node(pred, true_fn, false_fn, operands):
    """Records ``true_fn(*operands)`` under pred and ``false_fn(*operands)`` under
    not pred, the latter's outputs copied into the former's; returns those."""
    if not isinstance(pred, torch.Tensor) or pred.device.type != "npu":
        raise ValueError("Conditions must be on an npu device to use conditional nodes in npu graphs")
    with _if_body(pred):
        outputs = true_fn(*operands)
    with _if_body(torch.logical_not(pred)):
        else_outputs = false_fn(*operands)
        for out, other in zip(pytree.tree_iter(outputs), pytree.tree_iter(else_outputs)):
            out.copy_(other)
    return outputs
