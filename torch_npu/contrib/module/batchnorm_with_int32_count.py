"""BatchNorm modules whose ``num_batches_tracked`` counter is int32, not int64.

Real torch_npu ships them because int64 scalar updates were slow on the
device. The normalisation is torch.nn's: y = (x - E[x]) / sqrt(Var[x] + eps)
* weight + bias, with running statistics updated by ``momentum`` (or a
cumulative average when momentum is None, which is what the counter is for).
"""

import torch
import torch.nn as nn

__all__ = ["FastBatchNorm1d", "FastBatchNorm2d", "FastBatchNorm3d", "FastSyncBatchNorm"]


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
