"""Silent data corruption (SDC) detection: the state real torch_npu keeps
for its three generations of checks, and what vNPU does with each.

- 1.0, ``_silent_fault_detector``: backward hooks (on layer-norm inputs and
  embedding weights, or placed by ``torch_npu.utils.register_asd_hook``)
  that run the chip's ``_npu_silent_check`` kernel on each gradient. Real
  torch_npu uses them only when CANN lacks aclnnSilentCheck; vNPU reports a
  CANN that has it (``_C._get_silent_check_version()`` is 2), so they are
  never armed. A hook that runs anyway (code that pretends the version is
  1) raises "not supported": the kernel's statistics are the chip's.
- 2.0, ``silent_check`` (``NPU_ASD_ENABLE=1..3``): the checks run inside the
  chip's operators (aclnnSilentCheckV2).
- 3.0, ``matmul_check`` (``NPU_ASD_CONFIG=enable:true,...``): gradient
  statistics of matmul layers, compared on a host thread, with checksums.

vNPU performs neither 2.0 nor 3.0: asking for them warns once at import
(``torch_npu/utils/_step.py``) and training runs unchecked. Their settings
are kept and validated as real torch_npu does, so a configuration that
real torch_npu refuses is refused here too.
"""

import functools

import torch

from torch_npu.utils._error_code import pta_error, ErrCode

__all__ = []

_KERNEL_IS_THE_CHIPS = (
    "torch_npu._npu_silent_check (silent check 1.0) is not supported on vNPU: its statistics are the Ascend "
    "chip's kernel's. vNPU reports silent check version 2, for which torch_npu never arms the 1.0 hooks.")


class _SilentFaultDetector:
    """Silent check 1.0: per-weight statistics of gradients (see above).

    fp16 gradients are scaled by the training's loss scale, so until the
    script has said what that scale is they are let through unchecked, as
    real torch_npu does.
    """

    def __init__(self):
        self.loss_scale = 1.0
        self.set_loss_scale_flag = False  # whether loss_scale came from the script
        self.idx = None  # id() of the weight whose gradient was checked last

    def set_asd_loss_scale(self, loss_scale=1.0):
        if loss_scale == 0:
            message = "loss scale cannot be 0."
            raise ValueError(message + pta_error(ErrCode.VALUE))
        self.loss_scale, self.set_loss_scale_flag = loss_scale, True

    def silent_fault_check(self, grad):
        scale_unknown = not self.set_loss_scale_flag
        if scale_unknown and grad.dtype == torch.float16:
            return
        raise RuntimeError(_KERNEL_IS_THE_CHIPS + pta_error(ErrCode.NOT_SUPPORT))

    def _check_gradient_of(self, weight, grad):
        self.idx = id(weight)
        self.silent_fault_check(grad)

    def silent_fault_check_hook(self, weight):
        """The tensor hook that checks a gradient on behalf of ``weight``."""
        return functools.partial(self._check_gradient_of, weight)


class _Settings:
    """Named settings with defaults, read and written as attributes or
    through real torch_npu's accessors (``get_cooldown()``, ``set_cooldown(7)``)."""

    def __init__(self, **defaults):
        vars(self).update(defaults)

    def __getattr__(self, name):
        # Reached only for names that are not attributes, i.e. the accessors.
        verb, _, setting = name.partition("_")
        if setting in vars(self):
            if verb == "get":
                return functools.partial(getattr, self, setting)
            if verb == "set":
                return functools.partial(setattr, self, setting)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


class _SilentCheckState(_Settings):
    """Silent check 2.0: only its switch, NPU_ASD_ENABLE's level (never on in vNPU)."""

    def __init__(self):
        super().__init__(check_enable=0)


class _MatmulSilentCheck(_Settings):
    """Silent check 3.0's settings (NPU_ASD_CONFIG), with real torch_npu's
    defaults: cooldowns and windows in minutes, thresholds as multiples of
    the running average of a gradient's squared max-norm."""

    def __init__(self):
        super().__init__(
            matmul_hook_enable=0, with_checksum=False, grad_sample_interval=3,
            upper_thresh1=1000000, upper_thresh2=100,
            cooldown=5, checksum_cooldown=180, strikes_num=3, strikes_window=480)


_silent_fault_detector = _SilentFaultDetector()
silent_check = _SilentCheckState()
matmul_check = _MatmulSilentCheck()
