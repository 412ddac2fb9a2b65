"""ONNX export of models that call torch_npu's fused operators.

Importing it (`import torch_npu.onnx`, as with real torch_npu) installs both
parts: the operators that export as the standard operators they compose
(wrapper_ops_combined) and the Ascend custom nodes the TorchScript exporter
writes for the others (wrapper_onnx_ops). docs/onnx.md.
"""

from torch_npu.onnx import wrapper_onnx_ops, wrapper_ops_combined

__all__ = []

for _install in (wrapper_onnx_ops._register_custom_node_symbolics, wrapper_ops_combined._install_export_forms):
    _install()
