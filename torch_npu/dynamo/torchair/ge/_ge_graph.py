"""GE's tensor types and operator builders, as converters name them
(torchair/ge/__init__.py explains what vNPU does with them)."""

from torch_npu.dynamo.torchair.ge.attr import _Attr


class DataType:
    """GE's data types (ge::DataType), with GE's values."""
    DT_FLOAT = 0
    DT_FLOAT16 = 1
    DT_INT8 = 2
    DT_INT32 = 3
    DT_UINT8 = 4
    DT_INT16 = 6
    DT_UINT16 = 7
    DT_UINT32 = 8
    DT_INT64 = 9
    DT_UINT64 = 10
    DT_DOUBLE = 11
    DT_BOOL = 12
    DT_STRING = 13
    DT_DUAL_SUB_INT8 = 14
    DT_DUAL_SUB_UINT8 = 15
    DT_COMPLEX64 = 16
    DT_COMPLEX128 = 17
    DT_QINT8 = 18
    DT_QINT16 = 19
    DT_QINT32 = 20
    DT_QUINT8 = 21
    DT_QUINT16 = 22
    DT_RESOURCE = 23
    DT_STRING_REF = 24
    DT_DUAL = 25
    DT_VARIANT = 26
    DT_BF16 = 27
    DT_UNDEFINED = 28
    DT_INT4 = 29
    DT_UINT1 = 30
    DT_INT2 = 31
    DT_UINT2 = 32
    DT_COMPLEX32 = 33
    DT_HIFLOAT8 = 34
    DT_FLOAT8_E5M2 = 35
    DT_FLOAT8_E4M3FN = 36
    DT_FLOAT8_E8M0 = 37
    DT_FLOAT6_E3M2 = 38
    DT_FLOAT6_E2M3 = 39
    DT_FLOAT4_E2M1 = 40
    DT_FLOAT4_E1M2 = 41


class Format:
    """GE's tensor formats (ge::Format), with GE's values."""
    FORMAT_NCHW = 0
    FORMAT_NHWC = 1
    FORMAT_ND = 2
    FORMAT_NC1HWC0 = 3
    FORMAT_FRACTAL_Z = 4
    FORMAT_NC1HWC0_C04 = 12
    FORMAT_HWCN = 16
    FORMAT_NDHWC = 27
    FORMAT_FRACTAL_NZ = 29
    FORMAT_NCDHW = 30
    FORMAT_NDC1HWC0 = 32
    FORMAT_FRACTAL_Z_3D = 33
    FORMAT_NC = 35
    FORMAT_NCL = 47


def _no_graph(what):
    return RuntimeError(
        f"{what} is not supported on vNPU: it builds a GE (Graph Engine) graph, and vNPU has no graph engine. "
        "vNPU's torchair backend (torchair.get_npu_backend()) compiles with Inductor and calls custom ops as "
        "opaque npu kernels, so GE converters are registered but never run; call the op eagerly or under "
        "torch.compile instead.")


class Tensor:
    """An output of a GE operator in a graph being built. Only GE operator
    builders make them, and vNPU has no graph to build."""

    def __init__(self, *args, **kwargs):
        raise _no_graph("torchair.ge.Tensor")


class TensorSpec:
    """The meta information (dtype, shape) a converter gets for an FX node's
    output (``meta_outputs``). Only torchair's GE lowering makes them."""

    def __init__(self, *args, **kwargs):
        raise _no_graph("torchair.ge.TensorSpec")


def _check_custom_op(op_type, inputs, outputs, attrs):
    if not isinstance(op_type, str) or not op_type:
        raise AssertionError(f"Invalid op_type {op_type!r}: expect a non-empty str")
    if inputs is not None and not isinstance(inputs, dict):
        raise AssertionError(
            f"Invalid input type:{type(inputs).__name__} vs expect one of [None, dict] for custom op '{op_type}'.")
    for name, value in (inputs or {}).items():
        if value is not None and not isinstance(value, (Tensor, list, tuple)):
            raise AssertionError(f"Invalid input '{name}' type:{type(value).__name__} vs expect one of "
                                 f"[None, ge.Tensor, list[ge.Tensor]] for custom op '{op_type}'.")
    for name, value in (attrs or {}).items():
        if not isinstance(value, _Attr):
            raise AssertionError(f"Invalid attr '{name}' type:{type(value).__name__} vs expect a ge.attr.* value "
                                 f"for custom op '{op_type}'.")
    if outputs is not None and not isinstance(outputs, (list, tuple)):
        raise AssertionError(
            f"Invalid output type:{type(outputs).__name__} vs expect one of [list, tuple] for custom op '{op_type}'.")
    for output in outputs or ():
        if not (isinstance(output, str) or (isinstance(output, (list, tuple)) and len(output) == 2
                                            and isinstance(output[0], str) and isinstance(output[1], int))):
            raise AssertionError(f"Invalid output {output!r} vs expect one of [str, tuple[str, int]] for custom op "
                                 f"'{op_type}'.")


def custom_op(op_type, *, inputs, outputs, attrs=None, node_name=None):
    """Adds GE operator `op_type` to the graph being built: checks the
    arguments as torchair does, then raises (vNPU has no GE graph)."""
    _check_custom_op(op_type, inputs, outputs, attrs)
    raise _no_graph(f"torchair.ge.custom_op('{op_type}')")


def Const(value, dtype=None, node_name=None, readable=True):
    """A GE constant (raises: vNPU has no GE graph)."""
    raise _no_graph("torchair.ge.Const")


def Cast(x, *, dst_type, dependencies=(), node_name=None):
    """A GE Cast operator (raises: vNPU has no GE graph)."""
    raise _no_graph("torchair.ge.Cast")


def Clone(x, *, dependencies=(), node_name=None):
    """A GE Identity (copy) operator (raises: vNPU has no GE graph)."""
    raise _no_graph("torchair.ge.Clone")
