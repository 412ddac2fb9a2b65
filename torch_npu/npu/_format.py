"""torch_npu.Format: the storage formats an npu tensor can have (CANN's
aclFormat numbering), and torch_npu.get_npu_format returning them.

vNPU stores every tensor in its logical layout; the format is the label
npu_format_cast gives it, so the enum matters for the code that compares or
prints formats (``torch_npu.get_npu_format(w) ==
torch_npu.Format.FRACTAL_NZ``).
"""

from enum import IntEnum

import torch


class Format(IntEnum):
    """An npu tensor's storage format; the values are CANN's aclFormat."""
    UNDEFINED = -1
    NCHW = 0
    NHWC = 1
    ND = 2
    NC1HWC0 = 3
    FRACTAL_Z = 4
    NC1HWC0_C04 = 12
    HWCN = 16
    NDHWC = 27
    FRACTAL_NZ = 29
    NCDHW = 30
    NDC1HWC0 = 32
    FRACTAL_Z_3D = 33
    NC = 35
    NCL = 47
    FRACTAL_NZ_C0_16 = 50
    FRACTAL_NZ_C0_32 = 51
    FRACTAL_NZ_C0_2 = 52
    FRACTAL_NZ_C0_4 = 53
    FRACTAL_NZ_C0_8 = 54

    def __str__(self):
        return self.name


def get_npu_format(tensor):
    """The storage format of ``tensor`` as a torch_npu.Format (an int)."""
    value = torch.ops.npu.get_npu_format(tensor)
    try:
        return Format(value)
    except ValueError:  # a format the enum does not name: the number itself
        return value


_tensor_deepcopy = torch.Tensor.__deepcopy__


def _deepcopy_keeping_the_format(self, memo):
    """torch.Tensor.__deepcopy__, then the copy gets the original's format
    label. On real torch_npu the format lives in the storage, which the copy
    duplicates; vNPU labels tensors, which torch's deepcopy (a new tensor
    set_ to the copied storage) does not carry over."""
    copied = _tensor_deepcopy(self, memo)
    if self.device.type == "npu" and isinstance(copied, torch.Tensor) and copied.device.type == "npu":
        label = torch.ops.npu.get_npu_format(self)
        if label != torch.ops.npu.get_npu_format(copied):
            torch.ops.npu.npu_format_cast_.acl_format(copied, label)
    return copied


def _keep_the_format_in_deepcopies():
    if torch.Tensor.__deepcopy__ is _tensor_deepcopy:
        torch.Tensor.__deepcopy__ = _deepcopy_keeping_the_format


_keep_the_format_in_deepcopies()
