"""torch_npu.contrib.module: nn.Module building blocks real torch_npu ships.

One concept per file; each is written with plain PyTorch (see docs/contrib.md).
"""

from .channel_shuffle import ChannelShuffle
from .prefetcher import Prefetcher
from .crossentropy import LabelSmoothingCrossEntropy
from .roi_align import ROIAlign
from .deform_conv import ModulatedDeformConv, DCNv2
from .activations import Mish, SiLU, Swish
from .bidirectional_lstm import BiLSTM
from .ps_roi_pooling import PSROIPool
from .ensemble_dropout import NpuFairseqDropout, NpuCachedDropout
from ._ensemble_dropout import NpuPreGenDropout
from .multihead_attention import MultiheadAttention
from .fusedcolorjitter import FusedColorJitter
from .drop_path import NpuDropPath
from .focus import Focus
from ._batchnorm_with_int32_count import FastBatchNorm1d, FastBatchNorm2d, FastBatchNorm3d, FastSyncBatchNorm
from .linear_a8w8_quant import LinearA8W8Quant
from .linear_quant import LinearQuant
from .linear_weight_quant import LinearWeightQuant
from .quant_conv2d import QuantConv2d
from .npu_modules import DropoutWithByteMask

__all__ = [
    "ChannelShuffle", "Prefetcher", "LabelSmoothingCrossEntropy", "ROIAlign", "DCNv2",
    "ModulatedDeformConv", "Mish", "BiLSTM", "PSROIPool", "SiLU", "Swish", "NpuFairseqDropout",
    "NpuCachedDropout", "MultiheadAttention", "FusedColorJitter", "NpuDropPath", "Focus",
    "LinearA8W8Quant", "LinearQuant", "LinearWeightQuant", "QuantConv2d", "DropoutWithByteMask",
]
