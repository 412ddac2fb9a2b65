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

import torch

from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = []


class _SilentFaultDetector:
    """Silent check 1.0: per-weight statistics of gradients (see above)."""

    def __init__(self):
        self.loss_scale = 1.0
        self.set_loss_scale_flag = False
        self.idx = None

    def set_asd_loss_scale(self, loss_scale=1.0):
        if loss_scale == 0:
            raise ValueError("loss scale cannot be 0." + pta_error(ErrCode.VALUE))
        self.set_loss_scale_flag = True
        self.loss_scale = loss_scale

    def silent_fault_check(self, grad):
        if grad.dtype == torch.float16 and not self.set_loss_scale_flag:
            return  # as real torch_npu: fp16 gradients are checked only once the loss scale is known
        raise RuntimeError("torch_npu._npu_silent_check (silent check 1.0) is not supported on vNPU: its "
                           "statistics are the Ascend chip's kernel's. vNPU reports silent check version 2, "
                           "for which torch_npu never arms the 1.0 hooks." + pta_error(ErrCode.NOT_SUPPORT))

    def silent_fault_check_hook(self, weight):
        def hook(grad):
            self.idx = id(weight)
            self.silent_fault_check(grad)

        return hook


_silent_fault_detector = _SilentFaultDetector()


class _SilentCheckState:
    """Silent check 2.0's switch (NPU_ASD_ENABLE's level); never on in vNPU."""

    def __init__(self):
        self.check_enable = 0

    def set_check_enable(self, enable):
        self.check_enable = enable

    def get_check_enable(self):
        return self.check_enable


silent_check = _SilentCheckState()


# Silent check 3.0's settings (NPU_ASD_CONFIG) with real torch_npu's
# defaults: cooldowns and windows in minutes, thresholds as multiples of the
# running average of a gradient's squared max-norm.
_MATMUL_CHECK_DEFAULTS = {
    "matmul_hook_enable": 0,
    "with_checksum": False,
    "cooldown": 5,
    "strikes_num": 3,
    "strikes_window": 480,
    "checksum_cooldown": 180,
    "upper_thresh1": 1000000,
    "upper_thresh2": 100,
    "grad_sample_interval": 3,
}


class _MatmulSilentCheck:
    """Silent check 3.0's settings, as attributes, each also read and written
    through real torch_npu's accessors (``get_cooldown()``, ``set_cooldown(7)``)."""

    def __init__(self):
        vars(self).update(_MATMUL_CHECK_DEFAULTS)

    def __getattr__(self, name):  # only for names that are not attributes: the accessors
        verb, _, setting = name.partition("_")
        if setting in _MATMUL_CHECK_DEFAULTS and verb == "get":
            return lambda: getattr(self, setting)
        if setting in _MATMUL_CHECK_DEFAULTS and verb == "set":
            return lambda value: setattr(self, setting, value)
        raise AttributeError(f"'_MatmulSilentCheck' object has no attribute '{name}'")


matmul_check = _MatmulSilentCheck()
