"""register_asd_hook / set_asd_loss_scale: silent check 1.0's entry points
(torch_npu/asd/asd.py). Real torch_npu makes both do nothing when the
silent check version is above 1, as it is on vNPU: the later checks do not
use these hooks."""

import torch_npu
from torch_npu.asd.asd import _silent_fault_detector


def set_asd_loss_scale(loss_scale=1.0):
    """The loss scale that fp16 gradients are divided by before the 1.0 check."""
    if torch_npu._C._get_silent_check_version() > 1:
        return
    _silent_fault_detector.set_asd_loss_scale(loss_scale)


def register_asd_hook(x, weight):
    """Places the 1.0 check on the gradient of ``x`` (a tensor that requires
    grad and has no backward hooks yet), keyed by ``weight``."""
    if torch_npu._C._get_silent_check_version() > 1:
        return
    if x is not None and x.requires_grad and x._backward_hooks is None:
        x.register_hook(_silent_fault_detector.silent_fault_check_hook(weight))
