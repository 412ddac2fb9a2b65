"""torch_npu's integer dtype constants (torch_npu.float32, torch_npu.hifloat8,
torch_npu.float4_e2m1fn_x2, ...): each is the ACL data type number plus 256,
so that an ``int dst_type`` argument of an npu operator tells them apart from
torch's ScalarType numbers (which are below 256). Real torch_npu binds them
as ``torch_npu._C._cd.DType`` and copies them onto ``torch_npu``; so does this
module. Operators that take one say which they support.
"""
import types

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

DType = type("DType", (), {name: ACL_OFFSET + acl for name, acl in _ACL_TYPES})
NAMES = {ACL_OFFSET + acl: f"torch_npu.{name}" for name, acl in _ACL_TYPES}


def install(torch_npu_module, c_module):
    """torch_npu._C._cd.DType and the torch_npu.<name> constants."""
    c_module._cd = types.SimpleNamespace(DType=DType)
    for name, _ in _ACL_TYPES:
        setattr(torch_npu_module, name, getattr(DType, name))
