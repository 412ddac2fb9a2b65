"""Operators that export to ONNX as the standard operators they compose.

Real torch_npu's `torch_npu.onnx` replaces these `torch_npu.npu_*` functions
with ones that, while `torch.onnx.export` runs, compute through the standard
PyTorch operators the Ascend kernel stands for (`npu_linear` as `linear`,
`npu_bmmV2` as `matmul`, ...), so the exported model holds standard ONNX
operators and runs anywhere.

vNPU's `npu::` operators are compositions of ATen operators already
(torch_npu/op_plugin/_library.py), so the export form of each is its own
definition: `_decomposed` calls the Python function that defines the
operator, and the tracer (TorchScript's or torch.export's) records the ATen
operators inside it instead of one `npu::` call. Outside an export the
replacement is the operator itself, autograd and all.
"""

import torch

import torch_npu
from torch_npu.op_plugin._library import composition

__all__ = []

# Real torch_npu's list: the operators whose export is their standard form.
COMBINED_OPS = (
    "npu_linear", "npu_transpose", "npu_broadcast", "npu_conv_transpose2d", "npu_conv2d", "npu_conv3d",
    "npu_stride_copy", "npu_sort_v2", "npu_layer_norm_eval", "npu_reshape", "npu_pad", "npu_convolution",
    "npu_convolution_transpose", "npu_confusion_transpose", "npu_max", "npu_bmmV2", "npu_dtype_cast",
    "npu_silu", "npu_min", "npu_fused_attention_layernorm_qkv_fwd",
)


def _accepts(schema, args, kwargs):
    """Whether the call's string and number arguments fit `schema`'s types
    (enough to tell apart the overloads of these operators: npu_max.dim and
    npu_max.names_dim)."""
    named = dict(zip((a.name for a in schema.arguments), args))
    named.update(kwargs)
    for argument in schema.arguments:
        if argument.name in named and isinstance(named[argument.name], (str, int)):
            wants_string = argument.type.kind() == "StringType"
            if wants_string != isinstance(named[argument.name], str):
                return False
    return True


def _decomposed(packet):
    """`packet` (a torch.ops.npu overload packet) called as its composition:
    the Python function op_plugin defines the operator with (composition()),
    whose ATen operators an exporter's tracer records one by one."""
    overloads = [getattr(packet, name) for name in packet.overloads()]

    def call(*args, **kwargs):
        for overload in overloads:
            if _accepts(overload._schema, args, kwargs):
                return composition(f"npu::{packet.__name__}.{overload._overloadname}")(*args, **kwargs)
        return packet(*args, **kwargs)  # the operator's own error for arguments no overload takes
    return call


class _ExportAware:
    """`torch_npu.<name>` once torch_npu.onnx is imported: the operator, except
    during an ONNX export, when it is the operator's composition. Attributes
    are the operator's (`torch_npu.npu_max.dim` still names the overload)."""

    def __init__(self, name, packet):
        self.__name__ = self.__qualname__ = name
        self.__module__ = packet.__module__  # it stands for the operator (torch._ops.npu), as for the public-API rule
        self.__doc__ = packet.__doc__
        self.__wrapped__ = packet
        self._decomposed = _decomposed(packet)

    def __call__(self, *args, **kwargs):
        if torch.onnx.is_in_onnx_export():
            return self._decomposed(*args, **kwargs)
        return self.__wrapped__(*args, **kwargs)

    def __getattr__(self, attr):
        return getattr(self.__wrapped__, attr)

    def __repr__(self):
        return f"<torch_npu.{self.__name__}: {self.__wrapped__!r}, exported to ONNX as its composition>"


def _install_export_forms():
    """Replaces torch_npu.<name> for each of COMBINED_OPS with its export-aware form (once)."""
    for name in COMBINED_OPS:
        current = getattr(torch_npu, name)
        if getattr(current, "__wrapped__", None) is not None:
            continue  # installed already
        setattr(torch_npu, name, _ExportAware(name, getattr(torch.ops.npu, name)))
