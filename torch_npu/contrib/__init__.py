"""torch_npu.contrib: add-ons real torch_npu ships next to the core API.

- ``transfer_to_npu``: import it to run an unchanged CUDA script on npu.
- ``function``: detection and attention helpers (IoU family, NMS, box coders,
  ``roll``, ``matmul_transpose``, fused attention, ...).
- ``module``: ``nn.Module`` building blocks (activations, ROIAlign, DCNv2,
  quantised linears, cached dropouts, ...).

Each helper is written with plain PyTorch operators, so on npu it runs as a
chain of queued ATen kernels and autograd differentiates through it; see
docs/contrib.md for the formula behind each one and what is not supported.

Importing this package is cheap: ``function`` and ``module`` (and the names
re-exported from them) load on first use, so ``import
torch_npu.contrib.transfer_to_npu`` pulls in nothing else.
"""

import importlib

# Names real torch_npu re-exports here, and the sub-package each comes from.
_FUNCTION_NAMES = (
    "npu_iou", "npu_ptiou", "npu_giou", "npu_diou", "npu_ciou",
    "npu_multiclass_nms", "npu_batched_multiclass_nms",
    "npu_single_level_responsible_flags", "npu_fast_condition_index_put",
    "npu_bbox_coder_encode_yolo", "npu_bbox_coder_encode_xyxy2xywh",
    "npu_bbox_coder_decode_xywh2xyxy", "fuse_add_softmax_dropout", "roll",
    "matmul_transpose", "npu_fused_attention_with_layernorm", "npu_fused_attention",
)
_MODULE_NAMES = (
    "ChannelShuffle", "Prefetcher", "LabelSmoothingCrossEntropy", "ROIAlign", "DCNv2",
    "ModulatedDeformConv", "Mish", "BiLSTM", "PSROIPool", "SiLU", "Swish",
    "NpuFairseqDropout", "NpuCachedDropout", "MultiheadAttention", "NpuDropPath", "Focus",
    "LinearA8W8Quant", "LinearQuant", "FusedColorJitter", "LinearWeightQuant", "QuantConv2d",
    "FastBatchNorm1d", "FastBatchNorm2d", "FastBatchNorm3d", "FastSyncBatchNorm",
)
_SUBPACKAGES = ("function", "module", "transfer_to_npu")

__all__ = list(_FUNCTION_NAMES) + [n for n in _MODULE_NAMES if not n.startswith("Fast")]


def __getattr__(name):
    # PEP 562: resolve sub-packages and re-exported names on first access.
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _FUNCTION_NAMES:
        return getattr(importlib.import_module(f"{__name__}.function"), name)
    if name in _MODULE_NAMES:
        return getattr(importlib.import_module(f"{__name__}.module"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_FUNCTION_NAMES) | set(_MODULE_NAMES) | set(_SUBPACKAGES))
