"""torch_npu.contrib.module.batchnorm_with_int32_count: the FastBatchNorm modules equal
torch's batch norms and keep an int32 counter."""

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


@pytest.mark.parametrize("cls, ref_cls, shape", [(cm.FastBatchNorm1d, nn.BatchNorm1d, (8, 5, 3)),
                                                 (cm.FastBatchNorm2d, nn.BatchNorm2d, (8, 5, 3, 2)),
                                                 (cm.FastBatchNorm3d, nn.BatchNorm3d, (4, 5, 2, 3, 2)),
                                                 (cm.FastSyncBatchNorm, nn.BatchNorm2d, (8, 5, 3, 2))])
def test_fast_batchnorm_equals_torch_with_int32_counter(cls, ref_cls, shape):
    fast, ref = cls(5).to(NPU), ref_cls(5)
    assert fast.num_batches_tracked.dtype == torch.int32
    x = rnd(*shape, seed=181)
    a = x.clone().to(NPU).requires_grad_()
    r = x.clone().requires_grad_()
    for _ in range(2):
        out, want = fast(a), ref(r)
    assert_close(out.detach().cpu(), want.detach(), atol=1e-5, rtol=1e-5)
    assert_close(fast.running_var.cpu(), ref.running_var)
    assert fast.num_batches_tracked.item() == 2 and fast.num_batches_tracked.dtype == torch.int32
    out.sum().backward()
    want.sum().backward()
    assert_close(a.grad.cpu(), r.grad, atol=1e-5, rtol=1e-4)
    fast.load_state_dict(ref.state_dict())  # int64 counter of a torch checkpoint stays int32
    assert fast.num_batches_tracked.dtype == torch.int32
    if cls is not cm.FastSyncBatchNorm:
        with pytest.raises(ValueError, match="expected"):
            fast(torch.zeros(2, 5, *([1] * (len(shape) - 1))).to(NPU))


def test_private_bases_count_in_int32_and_normalise_like_torch():
    from torch_npu.contrib.module._batchnorm_with_int32_count import _BatchNorm, _NormBase
    base = _NormBase(3)
    assert base.num_batches_tracked.dtype == torch.int32
    bn = _BatchNorm(num_features=5).to("npu")
    bn._check_input_dim = lambda x: None  # the base leaves the rank to subclasses
    ref = torch.nn.BatchNorm1d(5)
    x = torch.randn(4, 5)
    torch.testing.assert_close(bn(x.to("npu")).cpu(), ref(x))
    torch.testing.assert_close(bn.running_mean.cpu(), ref.running_mean)
    assert bn.num_batches_tracked.dtype == torch.int32 and int(bn.num_batches_tracked) == 1
