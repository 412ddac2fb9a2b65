"""The float-status operators: npu_alloc_float_status, npu_get_float_status,
npu_clear_float_status, and AMP's unscale in saturation mode.

On Ascend these read and reset a status register that the AI Core's
arithmetic units set when a result overflows in saturation mode (the 910A
and 310P always; a 910B-class chip with INF_NAN_MODE_FORCE_DISABLE=1). vNPU
keeps that flag in stage 2 (Note [Saturation mode's float status] in
csrc/launch/float_status.h): in saturation mode every computing kernel whose
floating output holds an inf or a nan raises it, in stream order. In inf/nan
mode (the 910B default) nothing raises it and the status reads zero, as on
the chip.

As op-plugin's kernels:
- npu_alloc_float_status(self): a zeroed float32 buffer of 8 on self's device;
- npu_get_float_status(self, mode=0): on the 910B and later a new int32
  tensor of 8 (NPUGetFloatStatusV2), on older chips the status written into
  self, which is returned; element 0 is nonzero after an overflow. mode=1
  (the debug status) reads the same flag as a new int32 tensor;
- npu_clear_float_status(self, mode=0): resets the flag, returns a zeroed
  buffer shaped as self's 8 elements.
- torch._amp_foreach_non_finite_check_and_unscale_ in saturation mode
  consults the flag, as op-plugin does there, instead of the gradients: when
  it is set, found_inf becomes 1, the flag is cleared and the gradients are
  left as they are; otherwise they are multiplied by inv_scale.
"""

import torch

from torch_npu import _C
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define

_STATUS_SIZE = 8  # words of the status buffer on Ascend
_ORIGINAL_MODE, _DEBUG_MODE = 0, 1
_ASCEND910B1 = 220  # torch_npu.npu.get_soc_version() of the first chip with NPUGetFloatStatusV2


def _check_mode(mode):
    check(mode in (_ORIGINAL_MODE, _DEBUG_MODE),
          f"mode only supported for ORIGINAL_MODE(0) DEBUG_MODE(1), but got mode:{mode}")


def npu_alloc_float_status(self):
    """A zeroed float32 status buffer of 8 on self's device."""
    return torch.zeros(_STATUS_SIZE, dtype=torch.float32, device=self.device)


def npu_get_float_status(self, mode=0):
    """The device's float status: element 0 is nonzero once a kernel overflowed in saturation mode."""
    _check_mode(mode)
    if self.device.type != "npu":  # the host keeps no status
        return torch.zeros(_STATUS_SIZE, dtype=torch.int32, device=self.device)
    if mode == _DEBUG_MODE or _C._npu_get_soc_version() >= _ASCEND910B1:
        out = torch.empty(_STATUS_SIZE, dtype=torch.int32, device=self.device)
        _C._npu_read_float_status(out, False)
        return out
    _C._npu_read_float_status(self, False)
    return self


def npu_clear_float_status(self, mode=0):
    """Resets the device's float status; returns a zeroed buffer."""
    _check_mode(mode)
    out = torch.zeros(_STATUS_SIZE, dtype=self.dtype, device=self.device)
    if self.device.type == "npu":
        scratch = torch.empty(_STATUS_SIZE, dtype=torch.int32, device=self.device)
        _C._npu_read_float_status(scratch, True)
    return out


define("npu_alloc_float_status(Tensor self) -> Tensor", npu_alloc_float_status)
define("npu_get_float_status(Tensor self, int mode=0) -> Tensor", npu_get_float_status, differentiable=False)
define("npu_clear_float_status(Tensor self, int mode=0) -> Tensor", npu_clear_float_status, differentiable=False)


def _unscale_checked_by_status(scaled_grads, found_inf, inv_scale):
    """op-plugin's saturation-mode path of _amp_foreach_non_finite_check_and_unscale_."""
    check(inv_scale.device.type == "npu", "inv_scale must be NPU-Tensor")
    check(inv_scale.numel() == 1, "inv_scale must be a 1-element tensor")
    check(found_inf.numel() == 1, "found_inf must be a 1-element tensor")
    check(inv_scale.dtype == torch.float32, "inv_scale must be a float tensor")
    check(found_inf.dtype == torch.float32, "found_inf must be a float tensor")
    if not scaled_grads:
        return
    first = scaled_grads[0]
    for t in scaled_grads:
        check(t.device.type == "npu", "one of scaled_grads was not a NPU tensor.")
        check(t.device == first.device, "scaled_grads must be on the same device.")
        check(t.dtype == first.dtype, "scaled_grads must have the same dtype.")
        check(t.layout == torch.strided, "one of scaled_grads was not a strided tensor.")
    status = torch.empty(_STATUS_SIZE, dtype=torch.int32, device=found_inf.device)
    _C._npu_read_float_status(status, True)  # read and reset, in stream order
    overflow = status[:1] != 0
    # Kept on the device (no host sync): found_inf = 1 on overflow, else the
    # gradients are unscaled (multiplied by 1 when there was an overflow).
    found_inf.copy_(torch.where(overflow, torch.ones_like(found_inf), found_inf).view_as(found_inf))
    factor = torch.where(overflow, torch.ones_like(inv_scale), inv_scale).reshape(())
    torch._foreach_mul_(list(scaled_grads), factor)


def _amp_unscale(scaled_grads, found_inf, inv_scale):
    # Registered for AutogradPrivateUse1, above the npu kernel: in inf/nan mode
    # the gradients are scanned by that kernel, as on CUDA.
    if not _C._npu_is_support_inf_nan():
        return _unscale_checked_by_status(scaled_grads, found_inf, inv_scale)
    with torch._C._AutoDispatchBelowAutograd():
        return torch.ops.aten._amp_foreach_non_finite_check_and_unscale_(scaled_grads, found_inf, inv_scale)


_ATEN = torch.library.Library("aten", "IMPL")
_ATEN.impl("_amp_foreach_non_finite_check_and_unscale_", _amp_unscale, "AutogradPrivateUse1")

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
