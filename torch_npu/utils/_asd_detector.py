"""register_asd_hook / set_asd_loss_scale: the user's entry points to silent
check 1.0 (torch_npu/asd/asd.py).

Both are for CANN versions without the in-operator check. Once
``_C._get_silent_check_version()`` is above 1, as it is on vNPU, real
torch_npu makes them do nothing, and so do we: no hook, and no validation
of the loss scale either.
"""

import functools

import torch_npu
from torch_npu.asd import asd as _silent_checks


def _silent_check_1_only(entry_point):
    @functools.wraps(entry_point)
    def when_version_1(*args, **kwargs):
        # Asked on every call: tests (and real torch_npu's) replace the query.
        if torch_npu._C._get_silent_check_version() <= 1:
            entry_point(*args, **kwargs)
    return when_version_1


@_silent_check_1_only
def set_asd_loss_scale(loss_scale=1.0):
    """The loss scale that fp16 gradients are divided by before the 1.0 check."""
    _silent_checks._silent_fault_detector.set_asd_loss_scale(loss_scale)


@_silent_check_1_only
def register_asd_hook(x, weight):
    """Places the 1.0 check on the gradient of ``x``, keyed by ``weight``."""
    # A tensor outside autograd has no gradient to check; one with backward
    # hooks of its own already is left to them.
    if x is None or not x.requires_grad or x._backward_hooks is not None:
        return
    check = _silent_checks._silent_fault_detector.silent_fault_check_hook(weight)
    x.register_hook(check)
