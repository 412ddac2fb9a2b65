"""torch_npu.op_plugin.float_status: the float-status operators report zeros (vNPU keeps
no overflow register)."""

import torch
from torch.testing import assert_close

import torch_npu


def test_float_status_reports_zeros():
    # vNPU keeps no overflow register: the status is documented as always zero.
    y = torch.tensor([40000.0], dtype=torch.float16).npu()
    assert torch.isinf(y + y).all()
    status = torch_npu.npu_alloc_float_status(torch.zeros(8).npu())
    assert status.shape == (8,) and status.dtype == torch.float32 and status.device.type == "npu"
    got = torch_npu.npu_get_float_status(status)
    assert_close(got.cpu(), torch.zeros(8))
    assert_close(torch_npu.npu_clear_float_status(got).cpu(), torch.zeros(8))
