"""torchair's v1 GE graph module: the tensor types, and the helpers
converters call while building a GE graph. vNPU builds no GE graph: the
helpers that would touch one raise "not supported on vNPU"."""

from torch_npu.dynamo.torchair.ge._ge_graph import (Cast, Const, DataType, Format, Tensor, TensorSpec, _no_graph,
                                                      custom_op)

__all__ = ["Cast", "Const", "DataType", "Format", "Tensor", "TensorSpec", "compat_as_bytes", "custom_op",
           "get_default_ge_graph", "get_invalid_desc", "next_unique_name"]


def compat_as_bytes(value, encoding="utf-8"):
    """`value` as bytes (str is encoded), as torchair's helper of that name."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {value!r}")


def get_default_ge_graph():
    """The GE graph being built (raises: vNPU has no GE graph)."""
    raise _no_graph("torchair.ge_concrete_graph.ge_graph.get_default_ge_graph")


def next_unique_name(name, op):
    """A unique node name in the GE graph being built (raises: vNPU has no GE graph)."""
    raise _no_graph("torchair.ge_concrete_graph.ge_graph.next_unique_name")


def get_invalid_desc():
    """The descriptor of an absent optional input (raises: vNPU has no GE graph)."""
    raise _no_graph("torchair.ge_concrete_graph.ge_graph.get_invalid_desc")
