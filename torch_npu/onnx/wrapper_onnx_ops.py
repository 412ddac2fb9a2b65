"""Ascend custom ONNX nodes for the fused `npu::` operators.

With `torch_npu.onnx` imported, the TorchScript exporter
(`torch.onnx.export(..., dynamo=False)`) writes each operator below as one node
of the `npu` domain (`npu::NPURoiAlign`, `npu::NPURmsNorm`, ...), the nodes
Ascend's model converter (ATC) maps to its kernels, as real torch_npu's
`torch_npu.onnx` does.

Real torch_npu reaches this by replacing each `torch_npu.npu_*` function with
an autograd.Function whose `symbolic` writes the node. vNPU registers the
same symbolic for the operator itself (`torch.onnx.register_custom_op_symbolic`),
so `torch_npu.npu_*` stays the operator (autograd keeps working after the
import) and a call through `torch.ops.npu` exports too. One symbolic serves
every operator: the node's inputs are the operator's tensor arguments in
schema order (a tensor argument given as None stays an omitted optional
input), its attributes the other arguments given (suffix `_i`, `_f`, `_s` by
type; ints, bools and dtypes are `_i`), its outputs the operator's returns.
The table holds only the node's type and the attribute names that differ
from the schema's argument names.

The dynamo exporter (`torch.onnx.export`'s default) traces through vNPU's
operators, which are compositions of ATen operators, and writes standard ONNX
operators instead: a model that runs in ONNX Runtime.
"""

import torch

__all__ = []

# The opset the symbolics are registered from (real torch_npu exports with 11).
_OPSET = 9

# operator -> (node type in the npu domain, {argument name: attribute name}).
CUSTOM_NODES = {
    "npu_one_hot": ("NPUOneHot", {}),
    "npu_slice": ("NPUSlice", {"offsets": "offsetss", "size": "sizes"}),
    "npu_roi_align": ("NPURoiAlign", {}),
    "npu_group_norm_silu": ("NPUGroupNormSilu", {}),
    "npu_iou": ("NPUIou", {}),
    "npu_ptiou": ("NPUIou", {}),
    "npu_batch_nms": ("NPUBatchNms", {}),
    "fast_gelu": ("NPUFastGelu", {}),
    "npu_fast_gelu": ("NPUFastGelu", {}),
    "npu_geglu": ("NPUGeGlu", {}),
    "npu_fused_attention_score": ("NPUFusedAttentionScore", {}),
    "npu_fused_attention_score_fwd": ("NPUFusedAttentionScoreFwd", {}),
    "npu_ciou": ("NPUCiou", {}),
    "npu_diou": ("NPUDiou", {}),
    "npu_giou": ("NPUGiou", {}),
    "npu_multi_head_attention": ("NPUMultiHeadAttention", {}),
    "npu_deep_norm": ("NPUDeepNorm", {}),
    "npu_rms_norm": ("NPURmsNorm", {}),
    "npu_add_rms_norm": ("NPURmsNorm", {}),
    "npu_deformable_conv2d": ("NPUDeformableConv2d", {"kernel_size": "kernel_sizes", "stride": "strides",
                                                       "padding": "paddings", "dilation": "dilations"}),
    "npu_format_cast": ("NPUFormatCast", {}),
    "npu_softmax_cross_entropy_with_logits": ("NPUSoftmaxCrossEntropyWithLogits", {}),
    "npu_ps_roi_pooling": ("NPUPsRoiPooling", {}),
    "npu_grid_assign_positive": ("NPUGridAssignPositive", {}),
    "npu_ifmr": ("NPUIfmr", {}),
    "npu_sign_bits_unpack": ("NPUSignBitsUnpack", {}),
    "npu_sign_bits_pack": ("NPUSignBitsPack", {}),
    "npu_normalize_batch": ("NPUNormalizeBatch", {}),
    "npu_nms_v4": ("NPUNmsV4", {}),
    "npu_nms_with_mask": ("NPUNmsWithMask", {}),
    "npu_bounding_box_decode": ("NPUBoundingBoxDecode", {"max_shape": "max_shapes"}),
    "npu_bounding_box_encode": ("NPUBoundingBoxEncode", {}),
    "npu_rotated_iou": ("NPURotatedIou", {}),
    "npu_rotated_overlaps": ("NPURotatedOverlaps", {}),
    "npu_rotated_box_decode": ("NPURotatedBoxDecode", {}),
    "npu_rotated_box_encode": ("NPURotatedBoxEncode", {}),
    "npu_yolo_boxes_encode": ("NPUYoloBoxesEncode", {}),
    "npu_masked_fill_range": ("NPUMaskedFillRange", {}),
    "npu_anchor_response_flags": ("NPUAnchorResponseFlags", {"featmap_size": "featmap_sizes", "stride": "strides"}),
    "npu_indexing": ("NPUIndexing", {"begin": "begins", "end": "ends"}),
    "npu_stride_add": ("NPUStrideAdd", {}),
    "npu_scatter": ("NPUScatter", {}),
    "npu_scatter_nd_update": ("NPUScatterNdUpdate", {}),
    "npu_lstm": ("NPULstm", {"seq_mask": "seqMask", "flag_seq": "flagSeq"}),
    "npu_lstm_cell": ("NPULstmCell", {}),
    "npu_gru": ("NPUGru", {}),
    "npu_dropout_with_add_softmax": ("NPUDropoutWithAddSoftmax", {}),
    "npu_scaled_masked_softmax": ("NPUScaledMaskedSoftmax", {}),
    "npu_mish": ("NPUMish", {}),
    "npu_rotary_mul": ("NPURotaryMul", {}),
    "npu_prompt_flash_attention": ("NPUPromptFlashAttention", {}),
    "npu_incre_flash_attention": ("NPUIncreFlashAttention", {}),
    "npu_masked_softmax_with_rel_pos_bias": ("NPUMaskedSoftmaxWithRelPosBias", {}),
    "npu_mm_all_reduce_base": ("NPUMmAllReduceBase", {}),
    "npu_dynamic_quant": ("NPUDynamicQuant", {}),
    "npu_dynamic_quant_asymmetric": ("NPUDynamicQuantV2", {}),
    "npu_weight_quant_batchmatmul": ("NPUWeightQuantBatchMatmulV2", {}),
    "npu_anti_quant": ("NPUAntiQuant", {}),
    "npu_quantize": ("NPUQuantize", {}),
    "npu_group_quant": ("NPUGroupQuant", {"dst_dtype": "dst_type"}),
    "npu_moe_compute_expert_tokens": ("NPUMoeComputeExpertTokens", {"num_expert": "num_experts"}),
    "npu_moe_finalize_routing": ("NPUMoeFinalizeRouting", {}),
    "npu_gelu": ("NPUGeluV2", {}),
}


def _given_type(jit_type):
    """The type of an argument's value when one is given (T of an `Optional[T]`)."""
    return jit_type.getElementType() if isinstance(jit_type, torch.OptionalType) else jit_type


def _attribute(helper, value, argument, node_type):
    """(suffix, value) of a non-tensor argument, or None when it was not given."""
    jit_type = _given_type(argument.type)
    kind = jit_type.kind()
    if kind == "ListType":
        element = jit_type.getElementType().kind()
        descriptor, suffix = ("fs", "f") if element == "FloatType" else ("is", "i")
    else:
        descriptor, suffix = {"FloatType": ("f", "f"), "StringType": ("s", "s"), "BoolType": ("b", "i"),
                              "NumberType": ("t", None)}.get(kind, ("i", "i"))
    parsed = helper._parse_arg(value, descriptor, argument.name, f"npu::{node_type}")
    if parsed is None:
        return None
    if descriptor == "b":
        parsed = int(parsed)
    if suffix is None:  # a Scalar: int or float by its value
        scalar = parsed.item() if isinstance(parsed, torch.Tensor) else parsed
        return ("f", float(scalar)) if isinstance(scalar, float) else ("i", int(scalar))
    return suffix, parsed


def _custom_node_symbolic(schema, node_type, renames):
    returns = len(schema.returns)

    def symbolic(g, *args):
        from torch.onnx import symbolic_helper as helper  # the exporter's, loaded with it
        inputs, attributes = [], {}
        for argument, value in zip(schema.arguments, args):
            if isinstance(_given_type(argument.type), torch.TensorType):
                inputs.append(value)
                continue
            attribute = _attribute(helper, value, argument, node_type)
            if attribute is not None:
                suffix, parsed = attribute
                attributes[f"{renames.get(argument.name, argument.name)}_{suffix}"] = parsed
        if returns > 1:
            attributes["outputs"] = returns
        return g.op(f"npu::{node_type}", *inputs, **attributes)
    return symbolic


def _register_custom_node_symbolics():
    """Registers the symbolic of every operator in CUSTOM_NODES that vNPU defines (idempotent)."""
    register = torch.onnx.register_custom_op_symbolic
    for name, (node_type, renames) in CUSTOM_NODES.items():
        packet = getattr(torch.ops.npu, name, None)
        if packet is None:
            continue  # an operator vNPU does not define
        # The symbolic is looked up by operator name, whatever the overload;
        # the first overload's schema describes the arguments.
        schema = getattr(packet, packet.overloads()[0])._schema
        register(f"npu::{name}", _custom_node_symbolic(schema, node_type, renames), _OPSET)
