"""torchair.experimental.inference: put a model's weights in the NPU's
internal formats before inference, as real torchair does.

``use_internal_format_weight(model)`` casts, module by module, the weights
of ``nn.Linear`` (and torch_npu's quantised linears on the chips that want
it) to FRACTAL_NZ and of float16, ungrouped ``nn.Conv2d`` to FRACTAL_Z, with
``torch_npu.npu_format_cast``. vNPU keeps each tensor's format (its values
and shape are unchanged, ``torch_npu.get_npu_format`` reports it), so code
that checks or relies on the format sees what it sees on the chip.
``npu_format_cast_via_cpu`` is the same cast (real torchair stages it
through host memory to save device memory; vNPU's device memory is host
memory).
"""

import torch

__all__ = ["use_internal_format_weight", "npu_format_cast_via_cpu"]

_FRACTAL_Z = 4
_FRACTAL_NZ = 29


def _npu_weight(weight, fmt_name):
    if weight.is_cpu:
        raise RuntimeError(f"Cpu weight is not supported.The format cast to {fmt_name} only supports npu tensor."
                           "You should call model to npu, before calling this API.")
    return weight


def _cast_module(module, torch_npu):
    contrib = torch_npu.contrib.module
    chip = torch_npu.npu.get_device_name()
    if isinstance(module, torch.nn.Conv2d) and module.weight is not None:
        weight = _npu_weight(module.weight.data, "FRACTAL_Z")
        if module.groups == 1 and weight.dtype == torch.float16:
            module.weight.data = torch_npu.npu_format_cast(weight, _FRACTAL_Z)
    if isinstance(module, torch.nn.Linear):
        module.weight.data = torch_npu.npu_format_cast(_npu_weight(module.weight.data, "FRACTAL_NZ"), _FRACTAL_NZ)
    if isinstance(module, contrib.LinearA8W8Quant):
        module.scale.data = torch_npu.npu_trans_quant_param(module.scale, module.offset)
        if "Ascend310P" in chip:
            module.weight.data = torch_npu.npu_format_cast(module.weight.data, _FRACTAL_NZ)
    if isinstance(module, contrib.LinearQuant):
        module.weight.data = torch_npu.npu_format_cast(module.weight.data, _FRACTAL_NZ)
    if isinstance(module, contrib.LinearWeightQuant):
        if module.quant_scale is not None:
            offset = module.quant_offset.data if module.quant_offset is not None else None
            module.quant_scale.data = torch_npu.npu_trans_quant_param(module.quant_scale.data, offset)
        if "Ascend310P" in chip or "Ascend910B" in chip:
            module.weight.data = torch_npu.npu_format_cast(module.weight.data, _FRACTAL_NZ)
    if isinstance(module, contrib.QuantConv2d) and module.weight is not None:
        weight = _npu_weight(module.weight.data, "FRACTAL_Z")
        if module.groups == 1 and weight.dtype == torch.int8:
            module.weight.data = torch_npu.npu_format_cast(weight, _FRACTAL_Z)
            if module.scale.dtype == torch.float32:
                module.scale.data = torch_npu.npu_trans_quant_param(module.scale, module.offset)


def use_internal_format_weight(model: torch.nn.Module):
    """Casts the weights of ``model`` and its submodules to the NPU's internal formats, in place."""
    import torch_npu
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"use_internal_format_weight expects a torch.nn.Module, got {type(model).__name__}")
    for module in model.modules():
        _cast_module(module, torch_npu)


def npu_format_cast_via_cpu(self: torch.Tensor, acl_format: int, customize_dtype=None, input_dtype=None):
    """``torch_npu.npu_format_cast(self, acl_format)`` (see the module's docstring)."""
    import torch_npu
    return torch_npu.npu_format_cast(self, acl_format, customize_dtype=customize_dtype, input_dtype=input_dtype)
