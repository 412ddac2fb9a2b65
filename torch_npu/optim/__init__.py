"""torch_npu.optim: the fused optimizers real torch_npu ships, one module each
(npu_fused_optim_base, npu_fused_sgd, npu_fused_adadelta, npu_fused_lamb,
npu_fused_adam, npu_fused_adamw, npu_fused_adamp, npu_fused_bert_adam,
npu_fused_rmsprop, npu_fused_rmsprop_tf).

On Ascend these flatten all parameters of a group into one buffer and update
it with a few kernels. vNPU gives the same math without the flat buffer:
NpuFusedSGD, NpuFusedAdam, NpuFusedAdamW, NpuFusedAdadelta and NpuFusedRMSprop
are torch.optim's optimizers on their multi-tensor (foreach) path; NpuFusedLamb,
NpuFusedAdamP, NpuFusedBertAdam and NpuFusedRMSpropTF (which torch.optim does
not have) subclass NpuFusedOptimizerBase and update each (group, dtype) bucket
with torch._foreach_* ops. Constructor signatures, defaults and argument
checks follow torch_npu's; all have clip_grad_norm_fused_.
"""

__all__ = [
    "NpuFusedOptimizerBase", "NpuFusedSGD", "NpuFusedAdadelta", "NpuFusedLamb",
    "NpuFusedAdam", "NpuFusedAdamW", "NpuFusedAdamP",
    "NpuFusedBertAdam", "NpuFusedRMSprop", "NpuFusedRMSpropTF",
]

from .npu_fused_optim_base import NpuFusedOptimizerBase
from .npu_fused_sgd import NpuFusedSGD
from .npu_fused_adadelta import NpuFusedAdadelta
from .npu_fused_lamb import NpuFusedLamb
from .npu_fused_adam import NpuFusedAdam
from .npu_fused_adamw import NpuFusedAdamW
from .npu_fused_adamp import NpuFusedAdamP
from .npu_fused_bert_adam import NpuFusedBertAdam
from .npu_fused_rmsprop import NpuFusedRMSprop
from .npu_fused_rmsprop_tf import NpuFusedRMSpropTF
