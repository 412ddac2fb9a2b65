"""torch_npu.utils.syncbatchnorm: the autograd function of synchronized batch
norm, at real torch_npu's module path.

``SyncBatchNorm.apply(input, weight, bias, running_mean, running_var, eps,
momentum, process_group, world_size)`` normalises with the statistics of the
whole process group and synchronises the input gradient's sums in backward.
It is torch's own function (``torch.nn.modules._functions.SyncBatchNorm``,
which ``torch.nn.SyncBatchNorm`` uses), running on npu through the
statistics operators in ``torch_npu/_batch_norm_stats.py``.
"""

from torch.nn.modules._functions import SyncBatchNorm as _TorchSyncBatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_TorchSyncBatchNorm):
    """Synchronized batch norm over ``process_group`` (see the module docstring)."""
