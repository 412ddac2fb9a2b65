"""vNPU's pyACL (``import acl``, CANN's Python AscendCL binding): the device and
memory queries clients make (MindSpeed's adaptive recomputing and swap
features call acl.rt.get_mem_info), on the path after ``import torch_npu`` as
CANN's environment script would put it, and refusals naming the rest."""

import os
import subprocess
import sys

import pytest
import torch

import torch_npu  # noqa: F401


def test_memory_and_device_queries_answer_for_vnpu():
    import acl
    free, total, ret = acl.rt.get_mem_info(1)  # ACL_HBM_MEM
    assert ret == 0 and (free, total) == torch.npu.mem_get_info()
    host_free, host_total, ret = acl.rt.get_mem_info(0)  # ACL_DDR_MEM
    assert ret == 0 and 0 < host_free <= host_total
    assert acl.rt.get_mem_info(42)[2] == acl.rt.ACL_ERROR_INVALID_PARAM
    assert acl.rt.get_device_count() == (torch.npu.device_count(), 0)
    assert acl.rt.get_device() == (torch.npu.current_device(), 0)
    assert acl.rt.set_device(torch.npu.device_count()) == acl.rt.ACL_ERROR_INVALID_PARAM
    assert acl.rt.synchronize_device() == 0


def test_what_vnpu_does_not_answer_is_named():
    import acl
    with pytest.raises(AttributeError, match="acl.rt.malloc is not supported on vNPU's pyACL"):
        acl.rt.malloc(16, 0)
    with pytest.raises(AttributeError, match="acl.op is not supported on vNPU's pyACL"):
        acl.op


def test_on_the_path_only_for_vnpu_s_cann():
    code = "import torch, torch_npu, importlib.util; print(importlib.util.find_spec('acl') is not None)"
    for home, want in ((None, "True"), ("/opt/elsewhere/ascend-toolkit", "False")):
        env = {k: v for k, v in os.environ.items() if k not in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")}
        if home:
            env["ASCEND_HOME_PATH"] = home
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == want, (home, out.stdout, out.stderr[-1000:])
