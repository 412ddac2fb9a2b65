"""torch_npu._deprecated_patches: the deprecated torch.nn names hand over to
torch_npu.contrib with torch_npu's warning."""

import pytest
import torch


def test_deprecated_torch_nn_names_hand_over_to_contrib():
    from torch_npu.contrib.function import dropout_with_byte_mask
    from torch_npu.contrib.module import DropoutWithByteMask
    with pytest.warns(DeprecationWarning, match="torch.nn.DropoutWithByteMask is deprecated"):
        module = torch.nn.DropoutWithByteMask(0.1)
    assert isinstance(module, DropoutWithByteMask) and module.p == 0.1
    x = torch.rand(4, 8).npu()
    module.eval()
    assert torch.equal(module(x).cpu(), x.cpu())  # eval: identity
    with pytest.warns(DeprecationWarning, match="torch.nn.functional.dropout_with_byte_mask is deprecated"):
        out = torch.nn.functional.dropout_with_byte_mask(x, p=0.0, training=True)
    assert torch.equal(out.cpu(), dropout_with_byte_mask(x, p=0.0, training=True).cpu())
