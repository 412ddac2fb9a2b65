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

import importlib

# Each optimizer's module, imported at first use: every process imports this
# package with torch_npu, few build a fused optimizer.
_MODULES = {
    "NpuFusedOptimizerBase": "npu_fused_optim_base", "NpuFusedSGD": "npu_fused_sgd",
    "NpuFusedAdadelta": "npu_fused_adadelta", "NpuFusedLamb": "npu_fused_lamb", "NpuFusedAdam": "npu_fused_adam",
    "NpuFusedAdamW": "npu_fused_adamw", "NpuFusedAdamP": "npu_fused_adamp",
    "NpuFusedBertAdam": "npu_fused_bert_adam", "NpuFusedRMSprop": "npu_fused_rmsprop",
    "NpuFusedRMSpropTF": "npu_fused_rmsprop_tf",
}


def __getattr__(name):
    if name in _MODULES:
        value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_MODULES))
