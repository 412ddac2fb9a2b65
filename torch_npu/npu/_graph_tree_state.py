"""The step marker of NPU graphs, kept apart from the graph trees.

``torch.compiler.npugraph_mark_step_begin()`` is public and may be called
before anything is compiled, so it must not import the compiler: all it does
is move the counter below, which the graph trees (torch_npu/npu/_graph_tree.py)
read when they run. A user's steps count down from 0 while Dynamo's
generations count up, so a negative value always means a step the user
marked.
"""

__all__ = []


def npugraph_mark_step_begin():
    """``torch.compiler.npugraph_mark_step_begin()``: real torch_npu's
    counterpart of ``torch.compiler.cudagraph_mark_step_begin()``. It tells
    the NPU graph trees that a new inference or training iteration begins, so
    that the next compiled call may replay over the previous call's outputs
    even while a backward is still pending for them (outputs held then leave
    the trees' pool, keeping their values)."""
    MarkStepBox.mark_step_counter = MarkStepBox.mark_step_counter - 1


# The graph trees' own name for the marker, as in torch's cudagraph_trees.
mark_step_begin = npugraph_mark_step_begin


class MarkStepBox:
    """Holds the step counter: 0 until the user marks a step (and again once
    the trees are reset), else minus the number of steps marked."""

    mark_step_counter = 0
