"""torch_npu.contrib itself: importing it is lazy, and it exports real torch_npu's names."""

import subprocess
import sys

import pytest

from torch_npu.contrib import function as cf


def test_package_import_is_lazy_and_transfer_to_npu_unchanged():
    code = ("import sys, torch_npu.contrib.transfer_to_npu, torch; "
            "mods = sorted(m for m in sys.modules if m.startswith('torch_npu.contrib')); "
            "print(mods); print(torch.cuda.is_available is torch.npu.is_available)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-2] == "['torch_npu.contrib', 'torch_npu.contrib.transfer_to_npu']"
    assert lines[-1] == "True"


def test_package_exports_real_torch_npu_names():
    import torch_npu.contrib as contrib
    for name in contrib.__all__:
        assert getattr(contrib, name) is not None
    assert contrib.npu_ptiou is contrib.npu_iou and contrib.Swish is contrib.SiLU
    assert contrib.DCNv2 is contrib.ModulatedDeformConv and contrib.NpuFairseqDropout is contrib.NpuCachedDropout
    from torch_npu.contrib.function import dropout_with_byte_mask  # noqa: F401
    from torch_npu.contrib.module import DropoutWithByteMask, FastBatchNorm1d  # noqa: F401
    import torch_npu.contrib.function._matmul_transpose as private
    assert private.MatmulApply is cf.matmul_transpose.__self__
    with pytest.raises(AttributeError):
        contrib.no_such_member
