"""torch.npu.enable_deterministic_with_backward / disable_deterministic_with_backward,
and torch.npu.set_deterministic_level (at the end).

Each passes a tensor through unchanged and switches
torch.use_deterministic_algorithms in the forward pass, and back in the
backward pass when autograd reaches the same point: wrapping a block's input
with enable_... and its output with disable_... makes the block deterministic
in both directions (autograd runs the block's backward between the two
switches, in reverse order). As in real torch_npu the switch is global
(torch.use_deterministic_algorithms), and the functions cannot be traced
into a torch.compile graph.
"""

import warnings

import torch


def _forbid_in_graph(fn):
    # What torch._dynamo.decorators.forbid_in_graph does (dynamo's trace rules
    # read this attribute), without importing torch._dynamo: that import
    # costs over 2 s, and torch_npu is imported by every process that
    # imports torch.
    fn._dynamo_forbidden = True
    return fn


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


@_forbid_in_graph
def enable_deterministic_with_backward(tensor):
    """Turns deterministic algorithms on now, and off again when the backward pass gets back here."""
    return _DeterministicBegin.apply(tensor)


@_forbid_in_graph
def disable_deterministic_with_backward(tensor):
    """Turns deterministic algorithms off now, and on when the backward pass reaches this point."""
    return _DeterministicEnd.apply(tensor)


_MAX_LEVEL = 3


def set_deterministic_level(level):
    """torch_npu's determinism levels: 0 off, 1 deterministic algorithms
    (torch.use_deterministic_algorithms(True)), 2 and 3 stricter guarantees
    of the CANN kernels (3: results independent of the batch size).

    Levels 0 and 1 switch torch.use_deterministic_algorithms, warning as real
    torch_npu does when that changes its setting. vNPU's kernels are ATen's
    CPU kernels and MKL's GEMMs, whose blocking follows the shapes and the
    thread count, so it cannot promise levels 2 and 3: those raise.
    """
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= _MAX_LEVEL:
        raise ValueError("'torch_npu.npu.set_deterministic_level' supports configuring 0/1/2/3.")
    if level >= 2:
        raise RuntimeError(f"torch.npu.set_deterministic_level({level}) is not supported on vNPU: levels 2 and 3 "
                           "promise kernel guarantees beyond torch's deterministic algorithms (3: the same result "
                           "whatever the batch size), and vNPU's CPU kernels (MKL GEMMs blocked by shape and thread "
                           "count) do not make them. Use level 1.")
    wanted = level == 1
    if torch.are_deterministic_algorithms_enabled() != wanted:
        warnings.warn("The current configuration value of 'torch_npu.npu.set_deterministic_level' conflicts with "
                      "'torch.use_deterministic_algorithms'. 'torch.use_deterministic_algorithms' has been "
                      f"configured to '{wanted}'.")
        torch.use_deterministic_algorithms(wanted)
