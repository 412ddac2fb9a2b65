"""torch_npu's fused operators (``torch.ops.npu.*``), re-exported by torch_npu.

One module per family; importing each defines its operators. See
docs/fused_ops.md for what each computes and where vNPU differs from the
Ascend kernels.
"""

from typing import Optional, Tuple, Union

import importlib
import inspect

import torch

from torch_npu.op_plugin import _library
from torch_npu.op_plugin._library import EXPORTED, EXPORTED_ATB
from torch_npu.op_plugin._out_list import with_out_list

# Every family, in the order torch_npu defines their operators.
FAMILIES = (
    "activation", "attention", "moe", "norm", "optimizer", "rotary", "boxes", "dense", "dtype_cast", "tensor_ops",
    "float_status", "multi_head_attention", "nms", "quant", "rnn", "rotated_boxes", "bert_attention",
    "dynamic_quant", "kv_cache", "sampling", "scatter", "infer_attention", "infer_ops", "moe_routing", "mx_quant",
    "activation_quant", "backward", "ffn", "fusion_attention_v3", "infer_cache", "mc2", "hans", "moe_permute",
    "norm_quant", "quant_matmul", "sparse_attention", "cross_entropy", "atb._atb_ops",
)


def declared_operators(manifest):
    """(namespace, schema, family, function, differentiable) of each operator ``manifest`` declares."""
    for line in manifest.DECLARED.splitlines():
        namespace, schema, family, function, differentiable = line.split("\t")
        yield namespace, schema, family, function, differentiable == "1"


def _define_operators():
    """Declares the manifest's operators and imports the families that must be
    imported now (Note [Operators declared before their family] in _library.py);
    every family, where there is no manifest."""
    try:
        from torch_npu.op_plugin import _manifest
    except ImportError:  # scripts/gen_op_manifest.py reads the families' own definitions
        for family in FAMILIES:
            importlib.import_module(f"{__name__}.{family}")
        return
    EXPORTED.extend(_manifest.EXPORTED)
    EXPORTED_ATB.extend(_manifest.EXPORTED_ATB)
    for namespace, schema, family, function, differentiable in declared_operators(_manifest):
        _library.declare(namespace, schema, family, function, differentiable)
    for line in _manifest.FUNCTIONALIZED.splitlines():
        _library.declare_functionalization(*line.split("\t"))
    for family in _manifest.EAGER_FAMILIES:
        importlib.import_module(f"{__name__}.{family}")


_define_operators()
# Nothing uses npu_prefetch's (empty) result (ffn.py): keep graphs from
# dropping it, as op-plugin does.
torch.fx.node.has_side_effect(torch.ops.npu.npu_prefetch.default)


_PACKAGES = {family.split(".", 1)[0] for family in FAMILIES}


def __getattr__(name):
    # torch_npu.op_plugin.norm before anything imported it (most families are imported at first use)
    if name in _PACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def npu_grouped_matmul(x, weight, *, bias=None, group_list=None, split_item=0, group_type=None, group_list_type=0,
                       act_type=0, output_dtype=None, **quantised):
    """torch_npu.npu_grouped_matmul: group_list a tensor, or a list of ints
    (op-plugin's .List overload, whose sizes are known while tracing)."""
    op = torch.ops.npu.npu_grouped_matmul
    if group_list is not None and not isinstance(group_list, torch.Tensor):
        op, group_list = op.List, [int(v) for v in group_list]
    return op(x, weight, bias=bias, group_list=group_list, split_item=split_item, group_type=group_type,
              group_list_type=group_list_type, act_type=act_type, output_dtype=output_dtype, **quantised)


def npu_apply_adam_w(beta1_power, beta2_power, lr, weight_decay, beta1, beta2, eps, grad, max_grad_norm, amsgrad,
                     maximize, *, out):
    """torch_npu.npu_apply_adam_w(..., out=(var, m, v)): updates the three in place."""
    if not (isinstance(out, (tuple, list)) and len(out) == 3):
        raise TypeError("npu_apply_adam_w: out should be a tuple (var, m, v) of three tensors.")
    var, m, v = out
    return torch.ops.npu.npu_apply_adam_w.out(beta1_power, beta2_power, lr, weight_decay, beta1, beta2, eps, grad,
                                              max_grad_norm, amsgrad, maximize, var=var, m=m, v=v)


def npu_bert_apply_adam(lr: Union[float, int], beta1: Union[float, int], beta2: Union[float, int],
                        epsilon: Union[float, int], grad: torch.Tensor, max_grad_norm: Union[float, int],
                        global_grad_norm: Union[float, int], weight_decay: Union[float, int],
                        step_size: Optional[Union[float, int]] = None, adam_mode: int = 0, *,
                        out: Tuple[torch.Tensor, torch.Tensor, torch.Tensor]):
    """torch_npu.npu_bert_apply_adam(..., out=(var, m, v)): updates the three in
    place. Annotated so that torch.jit.script compiles it (real torch_npu's
    tests script and trace it)."""
    var, m, v = out
    return torch.ops.npu.npu_bert_apply_adam(lr, beta1, beta2, epsilon, grad, max_grad_norm, global_grad_norm,
                                             weight_decay, step_size, adam_mode, var=var, m=m, v=v)


def _operator_doc(namespace, name):
    """The docstring of torch_npu.<name>: the operator's schemas (one per
    overload), then what vNPU's implementation says of itself."""
    packet = getattr(getattr(torch.ops, namespace), name)
    schemas = "\n".join(f"    {getattr(packet, overload)._schema}" for overload in packet.overloads())
    doc = f"torch_npu.{name}: the operator torch.ops.{namespace}.{name}.\n\nSchemas:\n{schemas}\n"
    implementation = _library.implementation_doc(namespace, name)
    if implementation:
        doc += "\n" + inspect.cleandoc(implementation) + "\n"
    return doc


def documented(namespace, name):
    """torch.ops.<namespace>.<name> as torch_npu exports it, with its docstring."""
    exported = with_out_list(getattr(getattr(torch.ops, namespace), name))
    if exported.__doc__ is None:
        exported.__doc__ = _operator_doc(namespace, name)
    return exported


_PYTHON_EXPORTS = {
    "npu_grouped_matmul": lambda: npu_grouped_matmul,
    "npu_apply_adam_w": lambda: npu_apply_adam_w,
    "npu_bert_apply_adam": lambda: npu_bert_apply_adam,
    "npu_hans_encode": lambda: importlib.import_module(f"{__name__}.hans").npu_hans_encode,
    "npu_hans_decode": lambda: importlib.import_module(f"{__name__}.hans").npu_hans_decode,
}


def export_names():
    """The name of every fused op torch_npu re-exports, in definition order."""
    return list(dict.fromkeys([*EXPORTED, *EXPORTED_ATB, *_PYTHON_EXPORTS]))


def export(name):
    """The callable torch_npu.<name> is, documented (help(torch_npu.npu_rms_norm)
    shows its schemas). torch_npu resolves these at first use (its module
    __getattr__): making the packets and their docstrings for every operator
    at import cost a tenth of the import (issue 28)."""
    if name in _PYTHON_EXPORTS:
        return _PYTHON_EXPORTS[name]()
    return documented("atb" if name in EXPORTED_ATB else "npu", name)


__all__ = ["npu_grouped_matmul", "npu_apply_adam_w", "npu_bert_apply_adam", "documented", "export_names", "export",
           "declared_operators"]
