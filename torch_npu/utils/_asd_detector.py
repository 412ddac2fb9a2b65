"""register_asd_hook / set_asd_loss_scale: the user's entry points to silent
check 1.0 (torch_npu/asd/asd.py).

Both are for CANN versions without the in-operator check. Once
``_C._get_silent_check_version()`` is above 1, as it is on vNPU, real
torch_npu makes them do nothing, and so do we: no hook, and no validation
of the loss scale either.
"""

import torch_npu
from torch_npu.asd import asd as _asd


def register_asd_hook(x, weight):
    """Places the 1.0 check on the gradient of ``x``, on behalf of ``weight``."""
    if _needs_check_1() and _gradient_unwatched(x):
        x.register_hook(_asd._silent_fault_detector.silent_fault_check_hook(weight))


def set_asd_loss_scale(loss_scale=1.0):
    """Sets the loss scale that fp16 gradients are divided by before the 1.0 check."""
    if _needs_check_1():
        _asd._silent_fault_detector.set_asd_loss_scale(loss_scale)


def _needs_check_1():
    # Asked at every call: tests (real torch_npu's among them) replace the query.
    return torch_npu._C._get_silent_check_version() < 2


def _gradient_unwatched(x):
    # A tensor outside autograd has no gradient; one with backward hooks of
    # its own is left to them.
    return x is not None and x.requires_grad and x._backward_hooks is None
