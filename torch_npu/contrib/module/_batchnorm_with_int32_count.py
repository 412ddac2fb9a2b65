"""BatchNorm modules whose ``num_batches_tracked`` counter is int32, not int64.

Real torch_npu ships them because int64 scalar updates were slow on the
device. The normalisation is torch.nn's: y = (x - E[x]) / sqrt(Var[x] + eps)
* weight + bias, with running statistics updated by ``momentum`` (or a
cumulative average when momentum is None, which is what the counter is for).

Defined here, under real torch_npu's private module name (its tests import the
bases from here); batchnorm_with_int32_count re-exports the Fast* modules.
"""

import torch
import torch.nn as nn
from torch.nn.modules import batchnorm as _torch_batchnorm

__all__ = []


class _Int32Count:
    """Mixin: re-registers the counter as an int32 buffer after torch.nn's __init__."""

    def _use_int32_count(self):
        if self.track_running_stats:
            device = self.running_mean.device
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.int32, device=device))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints of torch.nn BatchNorm hold an int64 counter: keep ours int32.
        key = prefix + "num_batches_tracked"
        if key in state_dict:
            state_dict[key] = state_dict[key].to(torch.int32)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class FastBatchNorm1d(_Int32Count, nn.BatchNorm1d):
    """torch.nn.BatchNorm1d over (N, C) or (N, C, L), with an int32 batch counter."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._use_int32_count()


class FastBatchNorm2d(_Int32Count, nn.BatchNorm2d):
    """torch.nn.BatchNorm2d over (N, C, H, W), with an int32 batch counter."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._use_int32_count()


class FastBatchNorm3d(_Int32Count, nn.BatchNorm3d):
    """torch.nn.BatchNorm3d over (N, C, D, H, W), with an int32 batch counter."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._use_int32_count()


class FastSyncBatchNorm(_Int32Count, nn.SyncBatchNorm):
    """torch.nn.SyncBatchNorm (statistics all-reduced over the process group under
    hccl; plain batch norm when not distributed), with an int32 batch counter."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._use_int32_count()


class _NormBase(_Int32Count, _torch_batchnorm._NormBase):
    """torch.nn's _NormBase (parameters and running statistics) with an int32 batch counter."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self._use_int32_count()


class _BatchNorm(_Int32Count, _torch_batchnorm._BatchNorm):
    """torch.nn's _BatchNorm (forward over any input its _check_input_dim accepts)
    with an int32 batch counter."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self._use_int32_count()
