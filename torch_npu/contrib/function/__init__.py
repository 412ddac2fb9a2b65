"""torch_npu.contrib.function: functional helpers real torch_npu ships.

One concept per file; each is a plain-PyTorch formula (see docs/contrib.md).
"""

from .iou import npu_iou, npu_ptiou, npu_giou, npu_diou, npu_ciou
from .nms import npu_multiclass_nms, npu_batched_multiclass_nms
from .anchor_generator import npu_single_level_responsible_flags
from .bbox_coder import (npu_bbox_coder_encode_yolo, npu_bbox_coder_encode_xyxy2xywh,
                         npu_bbox_coder_decode_xywh2xyxy)
from .index_op import npu_fast_condition_index_put
from .fuse_add_softmax_dropout import fuse_add_softmax_dropout
from .roll import roll
from .matmul_transpose import matmul_transpose
from .fused_attention import npu_fused_attention_with_layernorm, npu_fused_attention
from .npu_functional import dropout_with_byte_mask

__all__ = [
    "npu_iou", "npu_ptiou", "npu_giou", "npu_diou", "npu_ciou",
    "npu_multiclass_nms", "npu_batched_multiclass_nms",
    "npu_single_level_responsible_flags", "npu_fast_condition_index_put",
    "npu_bbox_coder_encode_yolo", "npu_bbox_coder_encode_xyxy2xywh",
    "npu_bbox_coder_decode_xywh2xyxy", "fuse_add_softmax_dropout", "roll",
    "matmul_transpose", "npu_fused_attention", "npu_fused_attention_with_layernorm",
    "dropout_with_byte_mask",
]
