"""torch_npu.optim: the fused optimizers real torch_npu ships.

On Ascend these flatten all parameters of a group into one buffer and update
it with one kernel. vNPU gives the same math as torch.optim (which is what
they compute) through torch.optim's multi-tensor (foreach) path, so a step is
a handful of queued kernels per group rather than a few per parameter.
Constructor signatures and defaults follow torch_npu's.
"""

import torch

__all__ = ["NpuFusedAdamW", "NpuFusedAdam", "NpuFusedSGD"]


class NpuFusedAdamW(torch.optim.AdamW):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=True)


class NpuFusedAdam(torch.optim.Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=True)


class NpuFusedSGD(torch.optim.SGD):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                         nesterov=nesterov, foreach=True)
