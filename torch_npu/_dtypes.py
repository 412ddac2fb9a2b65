"""torch_npu's integer dtype constants (torch_npu.float32, torch_npu.hifloat8,
torch_npu.float4_e2m1fn_x2, ...): each is the ACL data type number plus 256,
so that an ``int dst_type`` argument of an npu operator tells them apart from
torch's ScalarType numbers (which are below 256). Real torch_npu binds them
as ``torch_npu._C._cd.DType`` and copies them onto ``torch_npu``; so does this
module. Operators that take one say which they support.
"""
import types

import torch

# Added to an ACL data type number to make a torch_npu dtype constant.
ACL_OFFSET = 256

# (name, ACL data type number), in CANN's aclDataType order.
_ACL_TYPES = (
    ("float32", 0), ("float16", 1), ("int8", 2), ("int32", 3), ("uint8", 4), ("int16", 6), ("uint16", 7),
    ("uint32", 8), ("int64", 9), ("uint64", 10), ("float64", 11), ("bool", 12), ("string", 13),
    ("complex64", 16), ("complex128", 17), ("bfloat16", 27), ("int4", 29), ("uint1", 30), ("complex32", 33),
    ("hifloat8", 34), ("float8_e5m2", 35), ("float8_e4m3fn", 36), ("float8_e8m0fnu", 37), ("float6_e3m2", 38),
    ("float6_e2m3", 39), ("float4_e2m1fn_x2", 40), ("float4_e1m2fn_x2", 41),
)

# torch's ScalarType numbers (c10/core/ScalarType.h): what a torch.dtype becomes
# when it is passed to an ``int`` argument.
SCALAR_TYPES = {
    0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
    6: torch.float32, 7: torch.float64, 9: torch.complex64, 10: torch.complex128, 11: torch.bool,
    15: torch.bfloat16, 23: torch.float8_e5m2, 24: torch.float8_e4m3fn, 25: torch.float8_e5m2fnuz,
    26: torch.float8_e4m3fnuz, 27: torch.uint16, 28: torch.uint32, 29: torch.uint64, 44: torch.float8_e8m0fnu,
}

# The constants whose data type vNPU computes in with a torch dtype of the same
# name. The others (int4, the packed float4 / float6 formats, HiFloat8 ...)
# have no torch dtype here: HiFloat8 lives in uint8 bytes (torch_npu/_hifloat8.py)
# and each operator says which of the rest it supports.
TORCH_DTYPES = {name: getattr(torch, name) for name in (
    "float32", "float16", "int8", "int32", "uint8", "int16", "uint16", "uint32", "int64", "uint64", "float64",
    "bool", "complex64", "complex128", "bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu")}

DType = type("DType", (), {name: ACL_OFFSET + acl for name, acl in _ACL_TYPES})
NAMES = {ACL_OFFSET + acl: f"torch_npu.{name}" for name, acl in _ACL_TYPES}


def install(torch_npu_module, c_module):
    """torch_npu._C._cd.DType and the torch_npu.<name> constants."""
    c_module._cd = types.SimpleNamespace(DType=DType)
    for name, _ in _ACL_TYPES:
        setattr(torch_npu_module, name, getattr(DType, name))


def name_of(code):
    """Short name of an ``int`` dtype argument: "float16", "hifloat8", ... (None stays None).

    The argument is a torch ScalarType number, a torch_npu constant (ACL number
    + 256) or a torch.dtype; a number that is neither reads "ScalarType N" /
    its number, so that messages can show it.
    """
    if code is None:
        return None
    if isinstance(code, torch.dtype):
        return str(code).replace("torch.", "")
    code = int(code)
    if code >= ACL_OFFSET:
        return NAMES.get(code, str(code)).replace("torch_npu.", "")
    dtype = SCALAR_TYPES.get(code)
    return f"ScalarType {code}" if dtype is None else str(dtype).replace("torch.", "")
