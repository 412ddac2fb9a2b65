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


_declared_supported = {}


def declare_supported(supported_cases):
    """Records the input cases (torchair's ``Support(...)`` descriptions) a GE
    converter declares it handles, as torchair's converter tests read them;
    applied above ``register_fx_node_ge_converter``. vNPU runs no converter, so
    the cases are kept for inspection only."""
    if not isinstance(supported_cases, (list, tuple)):
        raise TypeError(f"declare_supported expects a list of supported cases, but got "
                        f"{type(supported_cases).__name__}")

    def add_cases(converter):
        operators = [op for op, registered in _converters.items() if registered is converter]
        if not operators:
            raise AssertionError("declare_supported must decorate a converter registered with "
                                 "register_fx_node_ge_converter (put it above that decorator)")
        converter.supported_cases = list(supported_cases)
        for op in operators:
            _declared_supported[op] = converter
        return converter

    return add_cases


def declared_supported_converters():
    """{operator: converter} of the converters that declared their supported cases (vNPU only)."""
    return dict(_declared_supported)


def registered_ge_converters():
    """{operator: converter} of every registered GE converter (vNPU only)."""
    return dict(_converters)
