"""vNPU: the torch_npu API on a virtual Ascend NPU.

An independent emulator of Huawei's torch_npu for machines without Ascend
hardware: ``import torch_npu`` registers the ``npu`` device with PyTorch,
and its kernels run asynchronously on the host CPU. Not Huawei's package.
"""

def _autoload():
    """Entry point of the ``torch.backends`` group: ``import torch`` calls it
    (unless TORCH_DEVICE_BACKEND_AUTOLOAD=0). Importing this package does the
    work; the function is defined before ``import torch`` so that
    ``import torch_npu`` as the first import (which imports torch, which
    autoloads torch_npu again) finds it on the partially imported module."""


import torch  # noqa: E402

__version__ = "2.13.0+vnpu1"

from torch_npu import _C  # noqa: E402  (the C++ adaptor; registers kernels on load)
from torch_npu import _registration  # noqa: E402

_registration.register()

import torch_npu.npu  # noqa: E402
from torch_npu import _shutdown  # noqa: E402,F401
from torch_npu.npu import (  # noqa: E402,F401
    get_soc_version,
)

# Custom ops live in torch.ops.npu and are re-exported here, as in torch_npu.
npu_format_cast = torch.ops.npu.npu_format_cast
npu_format_cast_ = torch.ops.npu.npu_format_cast_
get_npu_format = torch.ops.npu.get_npu_format

__all__ = ["npu", "get_soc_version", "npu_format_cast", "npu_format_cast_", "get_npu_format"]

