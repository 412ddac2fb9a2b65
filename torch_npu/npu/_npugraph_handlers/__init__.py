"""Operator handlers of NPUGraph's automatic capture and update
(``torch.npu.graph(g, auto_dispatch_capture=True)``, ``g.update(...)``).

While such a capture runs, each call of an operator that has a handler is
captured in a task group of its own behind an ExternalEvent wait, and
recorded; ``g.update(cpu_update_input)`` then re-records every recorded call
with its host arguments replaced (sequence lengths, usually) on the update
stream, and records the event after it, so the next replay runs the new
work (torch_npu/npu/graphs.py, _GraphDispatchMode). A handler says how one
operator is captured and which arguments an update may replace.

Built in: the fused infer attention (v1 and v2, functional and .out), paged
attention and MLA. Register more with ``register_npu_graph_handler``.
"""

__all__ = ["NpuGraphOpHandler", "register_npu_graph_handler"]

from torch_npu.npu._npugraph_handlers.npugraph_handler import NpuGraphOpHandler, register_npu_graph_handler
# Imported for its side effect: it registers the built-in handlers.
from torch_npu.npu._npugraph_handlers import builtin  # noqa: F401
