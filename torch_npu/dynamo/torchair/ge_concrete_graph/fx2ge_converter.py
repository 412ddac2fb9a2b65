"""torchair's v1 path to register_fx_node_ge_converter, and declare_supported."""

from torch_npu.dynamo.torchair._ge_converters import declare_supported, register_fx_node_ge_converter

__all__ = ["declare_supported", "register_fx_node_ge_converter"]
