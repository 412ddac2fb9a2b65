"""torch.npu.enable_deterministic_with_backward / disable_deterministic_with_backward.

Each passes a tensor through unchanged and switches
torch.use_deterministic_algorithms in the forward pass, and back in the
backward pass when autograd reaches the same point: wrapping a block's input
with enable_... and its output with disable_... makes the block deterministic
in both directions (autograd runs the block's backward between the two
switches, in reverse order). As in real torch_npu the switch is global
(torch.use_deterministic_algorithms), and the functions cannot be traced
into a torch.compile graph.
"""

import torch
from torch._dynamo.decorators import forbid_in_graph


class _DeterministicBegin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor):
        torch.use_deterministic_algorithms(True)
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        torch.use_deterministic_algorithms(False)  # the block's backward is done
        return grad


class _DeterministicEnd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor):
        torch.use_deterministic_algorithms(False)
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        torch.use_deterministic_algorithms(True)  # the block's backward starts
        return grad


@forbid_in_graph
def enable_deterministic_with_backward(tensor):
    """Turns deterministic algorithms on now, and off again when the backward pass gets back here."""
    return _DeterministicBegin.apply(tensor)


@forbid_in_graph
def disable_deterministic_with_backward(tensor):
    """Turns deterministic algorithms off now, and on when the backward pass reaches this point."""
    return _DeterministicEnd.apply(tensor)
