"""The int32-counter batch norms under the module name real torch_npu keeps for
them (defined in _batchnorm_with_int32_count; torch_npu.contrib.module has
them too). Not listed: real torch_npu lists none here."""

from torch_npu.contrib.module._batchnorm_with_int32_count import (  # noqa: F401
    FastBatchNorm1d, FastBatchNorm2d, FastBatchNorm3d, FastSyncBatchNorm)

__all__ = []
