"""The int32-counter batch norms under real torch_npu's private module name
(its tests import the bases from here): ``_NormBase`` and ``_BatchNorm`` are
torch.nn's bases with an int32 ``num_batches_tracked``; the Fast* modules are
those of batchnorm_with_int32_count."""

from torch.nn.modules import batchnorm as _torch_batchnorm

from .batchnorm_with_int32_count import (  # noqa: F401
    FastBatchNorm1d, FastBatchNorm2d, FastBatchNorm3d, FastSyncBatchNorm, _Int32Count)

__all__ = []


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
