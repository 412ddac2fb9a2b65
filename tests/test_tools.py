"""torch_npu.tools: check_model and check_compatibility."""

import pytest
import torch
import torch.nn as nn

import torch_npu
from torch_npu.tools import check_compatibility, check_model


def test_check_model_reports_agreement():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    report = check_model(model, (torch.randn(4, 8),))
    assert report.compatible and report.error == ""
    assert report.output_shape == (4, 2)
    assert report.fallback_ops == {}
    assert report.max_output_diff < 1e-5 and report.max_grad_diff < 1e-5
    assert "compatible: True" in str(report)


def test_check_model_flags_float64():
    model = nn.Linear(3, 3).double()
    report = check_model(model, torch.randn(2, 3, dtype=torch.float64))
    assert report.compatible
    assert any("float64" in issue for issue in report.dtype_issues)


def test_check_model_reports_fallback_ops():
    torch.library.define("vnpu_tools::cpu_only", "(Tensor x) -> Tensor")
    torch.library.impl("vnpu_tools::cpu_only", "CPU")(lambda x: x * 2)

    class UsesCpuOnlyOp(nn.Module):
        def forward(self, x):
            return torch.ops.vnpu_tools.cpu_only(x)

    report = check_model(UsesCpuOnlyOp(), torch.randn(3), backward=False)
    assert report.compatible
    assert "vnpu_tools::cpu_only" in report.fallback_ops


def test_check_model_reports_errors_instead_of_raising():
    class Broken(nn.Module):
        def forward(self, x):
            return x @ torch.randn(5, 5).npu()  # shape mismatch

    report = check_model(Broken(), torch.randn(2, 3))
    assert not report.compatible and "RuntimeError" in report.error


def test_check_model_rejects_non_modules():
    with pytest.raises(TypeError):
        check_model(lambda x: x, torch.randn(2))


def test_seed_check_compatibility():
    assert check_compatibility(nn.Linear(10, 4), (2, 10)) == {"compatible": True, "output_shape": (2, 4)}
    result = check_compatibility(nn.Linear(10, 4), (2, 11))
    assert result["compatible"] is False and "error" in result
