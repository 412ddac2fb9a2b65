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


def _set_level_in_c(level):
    import torch_npu._C
    torch_npu._C._npu_set_deterministic_level(level)


def set_deterministic_level(level):
    """torch_npu's determinism levels: 0 off, 1 deterministic algorithms
    (``torch.use_deterministic_algorithms(True)``), 2 on top of that results
    independent of the machine (CANN's "strong consistency"), 3 results
    independent of the batch size.

    As real torch_npu: level 0 turns torch's deterministic algorithms off and
    levels 1-3 on, warning when that changes torch's setting, and every call
    warns not to call ``torch.use_deterministic_algorithms`` afterwards (the
    level in effect follows it: ``_get_deterministic_level``). On vNPU level
    2 runs each eager kernel with one intra-op thread, so its bits do not
    depend on the machine's core count (Note [Deterministic level 2],
    csrc/launch/intra_op_thread_count.h; compiled kernels keep the thread
    count Inductor generated them with); level 3 raises: no kernel here
    promises results independent of the batch size.
    """
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 3:
        raise ValueError("'torch_npu.npu.set_deterministic_level' supports configuring 0/1/2/3.")
    enabled = torch.are_deterministic_algorithms_enabled()
    wanted = level >= 1
    changed = False
    try:
        if wanted != enabled:
            warnings.warn("The current configuration value of 'torch_npu.npu.set_deterministic_level' conflicts "
                          "with 'torch.use_deterministic_algorithms'. 'torch.use_deterministic_algorithms' has "
                          f"been configured to '{wanted}'.")
            torch.use_deterministic_algorithms(wanted)
            changed = True
        _set_level_in_c(level)
    except Exception:
        if changed:
            torch.use_deterministic_algorithms(enabled)
        raise
    warnings.warn("After using 'torch_npu.npu.set_deterministic_level', please do not use "
                  "'torch.use_deterministic_algorithms' anymore, as it may cause unknown errors.")


def _sync_deterministic_level(level):
    """The level in effect given torch's deterministic-algorithms switch,
    which may have been turned since: 1 if it is on with level 0, 0 if it is
    off with a level above 0 (kept as the new level, as real torch_npu)."""
    enabled = torch.are_deterministic_algorithms_enabled()
    if level == 0 and enabled:
        level = 1
    elif level >= 1 and not enabled:
        level = 0
    else:
        return level
    _set_level_in_c(level)
    return level


def _get_deterministic_level():
    import torch_npu._C
    return _sync_deterministic_level(torch_npu._C._npu_get_deterministic_level())
