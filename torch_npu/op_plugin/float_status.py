"""The float-status operators: npu_alloc_float_status, npu_get_float_status,
npu_clear_float_status.

On Ascend these read and reset a hardware register: the AI Core sets an
overflow bit when an arithmetic unit produces inf / nan (saturation mode),
and amp's loss scaler polls it instead of scanning every gradient.

vNPU has no such register. Kernels are ATen CPU kernels run by the stream
workers, and none of them reports whether it produced an inf or a nan; the
only way to know would be to scan every output of every kernel, which the
runtime does not do. So these operators report what vNPU can state, which
is "no status was recorded": npu_alloc_float_status and
npu_get_float_status return zeros (float32, 8 elements, as on the chip),
and npu_clear_float_status clears nothing. Code that needs to detect
overflow on vNPU must look at the tensors (torch.isfinite, or
torch._amp_foreach_non_finite_check_and_unscale_, which GradScaler uses and
which does scan them). Real torch_npu's test_float_status.py, which expects
a nonzero status after an fp16 overflow, fails here by design.
"""

import torch

from torch_npu.op_plugin._library import define

_STATUS_SIZE = 8  # float32 words of the status buffer on Ascend


def npu_alloc_float_status(self):
    """A zeroed status buffer on self's device."""
    return torch.zeros(_STATUS_SIZE, dtype=torch.float32, device=self.device)


def npu_get_float_status(self, mode=0):
    """The recorded status: always zeros on vNPU (see the module docstring)."""
    return torch.zeros(_STATUS_SIZE, dtype=torch.float32, device=self.device)


def npu_clear_float_status(self, mode=0):
    """Clears the status (there is none on vNPU); returns a zeroed buffer."""
    return torch.zeros(_STATUS_SIZE, dtype=torch.float32, device=self.device)


define("npu_alloc_float_status(Tensor self) -> Tensor", npu_alloc_float_status)
define("npu_get_float_status(Tensor self, int mode=0) -> Tensor", npu_get_float_status)
define("npu_clear_float_status(Tensor self, int mode=0) -> Tensor", npu_clear_float_status)
