"""torchair's v1 path to register_fx_node_ge_converter."""

from torch_npu.dynamo.torchair._ge_converters import register_fx_node_ge_converter

__all__ = ["register_fx_node_ge_converter"]
