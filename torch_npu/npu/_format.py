"""torch_npu.Format: the storage formats an npu tensor can have (CANN's
aclFormat numbering), and torch_npu.get_npu_format returning them.

vNPU stores every tensor in its logical layout; the format is the label
npu_format_cast gives it, so the enum matters for the code that compares or
prints formats (``torch_npu.get_npu_format(w) == torch_npu.Format.FRACTAL_NZ``).

Real torch_npu keeps the format in the storage, so a deep copy, which
duplicates the storage, keeps it. vNPU's label is on the tensor, and torch's
``Tensor.__deepcopy__`` (a new tensor set to the copied storage) would drop
it; importing this module makes deep copies carry the label over.
"""

from enum import IntEnum

import torch


def _label_of(tensor):
    return torch.ops.npu.get_npu_format(tensor)


class Format(IntEnum):
    """An npu tensor's storage format; the values are CANN's aclFormat numbers."""
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

    def __str__(self):  # printed by name ("FRACTAL_NZ"), not by number as a plain IntEnum is
        return self.name


def get_npu_format(tensor):
    """The storage format of ``tensor``: a Format, or the bare number for a
    format the enum does not name."""
    label = _label_of(tensor)
    return Format(label) if label in Format._value2member_map_ else label


def _is_npu(value):
    return isinstance(value, torch.Tensor) and value.device.type == "npu"


def _copy_label(source, copy):
    label = _label_of(source)
    if _label_of(copy) != label:
        torch.ops.npu.npu_format_cast_.acl_format(copy, label)


def _with_format_label(plain_deepcopy):
    def __deepcopy__(self, memo):
        copied = plain_deepcopy(self, memo)
        if _is_npu(self) and _is_npu(copied):
            _copy_label(self, copied)
        return copied

    __deepcopy__.plain = plain_deepcopy
    return __deepcopy__


# A reload of this module must not wrap the wrapper.
if not hasattr(torch.Tensor.__deepcopy__, "plain"):
    torch.Tensor.__deepcopy__ = _with_format_label(torch.Tensor.__deepcopy__)
