"""ONNX export of models that call torch_npu's fused operators.

Importing it (`import torch_npu.onnx`, as with real torch_npu) installs both
parts: the operators that export as the standard operators they compose
(wrapper_ops_combined) and the Ascend custom nodes the TorchScript exporter
writes for the others (wrapper_onnx_ops). docs/onnx.md.
"""

from .wrapper_onnx_ops import _add_onnx_ops
from .wrapper_ops_combined import _add_ops_combined_for_onnx

__all__ = []

_add_onnx_ops()
_add_ops_combined_for_onnx()
