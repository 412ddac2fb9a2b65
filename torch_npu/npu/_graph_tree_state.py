"""The step marker of NPU graphs, kept apart from the graph trees.

``torch.compiler.npugraph_mark_step_begin()`` is public and callable before
any compilation, so it must not import the compiler: it only moves this
counter. The graph trees (torch_npu/npu/_graph_tree.py) read it when they
run. A user's step is counted downwards from 0, so a negative value is a
step the user marked, never one of Dynamo's generations (which count up).
"""

__all__ = []


class MarkStepBox:
    mark_step_counter = 0


def mark_step_begin() -> None:
    """Marks that a new inference or training iteration begins."""
    MarkStepBox.mark_step_counter -= 1


def npugraph_mark_step_begin():
    """``torch.compiler.npugraph_mark_step_begin()``, real torch_npu's
    counterpart of ``torch.compiler.cudagraph_mark_step_begin()``: tells the
    NPU graph trees (torch_npu/npu/_graph_tree.py) that a new iteration
    begins, so that the next compiled call may replay over the outputs of the
    previous one even while a backward is pending for them (outputs still
    held then move out of the trees' pool with their values)."""
    mark_step_begin()
