"""torchair.register_fx_node_ge_converter: the registry of GE converters
(torchair/ge/__init__.py explains why vNPU keeps them without running them)."""

import torch

_converters = {}


def register_fx_node_ge_converter(aten_op):
    """Registers the decorated function as the GE converter of `aten_op`
    (an OpOverload or OpOverloadPacket, e.g. ``torch.ops.mylib.op.default``)
    and returns it unchanged."""
    if not isinstance(aten_op, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        raise TypeError(f"register_fx_node_ge_converter expects an operator such as torch.ops.<ns>.<op>.default, "
                        f"but got {aten_op!r} ({type(aten_op).__name__})")

    def register(converter):
        if not callable(converter):
            raise TypeError(f"the GE converter of {aten_op} must be callable, but got {converter!r}")
        _converters[aten_op] = converter
        return converter

    return register


def registered_ge_converters():
    """{operator: converter} of every registered GE converter (vNPU only)."""
    return dict(_converters)
