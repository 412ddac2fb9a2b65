"""The names client libraries look up on torch, torch.npu and torch_npu."""

import glob
import os
import re

import pytest
import torch

import torch_npu
from conftest import run_python


def test_cann_version_and_home():
    assert torch.version.cann == torch_npu.npu.utils.get_cann_version()
    home = os.environ["ASCEND_HOME_PATH"]
    # DeepSpeed reads the version from an ascend_*_install.info under the folder.
    (info,) = glob.glob(os.path.join(home, "ascend_*_install.info"))
    assert re.search(r"^version=" + re.escape(torch.version.cann) + "$", open(info).read(), re.M)


def test_a_users_ascend_home_path_is_kept():
    proc = run_python("import os, torch, torch_npu; print(os.environ['ASCEND_HOME_PATH'])",
                      ASCEND_HOME_PATH="/opt/my/cann")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "/opt/my/cann"


def test_lazy_call_runs_the_callable():
    calls = []
    torch.npu._lazy_call(lambda: calls.append(1))
    assert calls == [1]


def test_storage_use_count_counts_references():
    t = torch.zeros(4, device="npu")
    before = torch_npu._C._storage_Use_Count(t.untyped_storage()._cdata)
    view = t[1:]  # noqa: F841  (a second tensor on the storage)
    assert torch_npu._C._storage_Use_Count(t.untyped_storage()._cdata) == before + 1


def test_npu_config_is_a_module():
    import importlib

    config = importlib.import_module("torch_npu.npu.config")
    assert torch.npu.config is config
    old = config.allow_internal_format
    try:
        torch.npu.config.allow_internal_format = True
        assert config.allow_internal_format is True
        with pytest.raises(TypeError, match="must be a bool"):
            torch.npu.config.allow_internal_format = 1
        with pytest.raises(AttributeError, match="unknown option"):
            torch.npu.config.no_such_option = True
    finally:
        config.allow_internal_format = old


def test_dtype_names_are_torch_npus_integer_constants():
    # As real torch_npu (torch_npu._C._cd.DType copied onto torch_npu): the ACL
    # data type number + 256, what the npu operators' int dst_type arguments take.
    assert (torch_npu.float32, torch_npu.bfloat16, torch_npu.hifloat8) == (256, 283, 290)
    assert (torch_npu.float8_e5m2, torch_npu.float8_e4m3fn, torch_npu.float8_e8m0fnu) == (291, 292, 293)
    assert torch_npu.float4_e2m1fn_x2 == torch_npu._C._cd.DType.float4_e2m1fn_x2 == 296


def test_flops_counter_records_and_traverses():
    from torch_npu.utils import FlopsCounter

    a, b = torch.randn(8, 16, device="npu"), torch.randn(16, 4, device="npu")
    counter = FlopsCounter()
    counter.start()
    a @ b
    counter.pause()
    a @ b  # a recomputation: traversed, not recorded
    counter.resume()
    assert counter.get_flops() == [2 * 8 * 16 * 4, 2 * 2 * 8 * 16 * 4]
    assert FlopsCounter().get_flops() == counter.get_flops(), "the counts are the process's, as in real torch_npu"
    counter.start()  # already on: the counts stay
    a @ b
    assert counter.get_flops() == [2 * 2 * 8 * 16 * 4, 3 * 2 * 8 * 16 * 4]
    counter.stop()  # off, and cleared
    a @ b
    assert counter.get_flops() == [0, 0]
    counter.stop()  # a second stop does nothing
    with FlopsCounter() as scoped:
        a @ b
        assert scoped.get_flops() == [2 * 8 * 16 * 4] * 2


def test_flops_counter_old_path_warns_like_real_torch_npu():
    from torch_npu.utils import FlopsCounter
    from torch_npu.utils.flops_count import FlopsCounter as OldPath
    with pytest.warns(FutureWarning, match="will be deprecated"):
        counter = OldPath()
    assert isinstance(counter, FlopsCounter)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FlopsCounter()


def test_collect_env_names_the_npu():
    from torch_npu.utils import collect_env

    text = "\n".join(collect_env.get_npu_env_lines())
    assert "CANN version: " + torch.version.cann in text and "Ascend" in text


def test_collect_env_report_and_path_checks(tmp_path, monkeypatch):
    from torch_npu.utils import collect_env

    info = collect_env.get_env_info()
    assert info.torch_version == torch.__version__ and info.torch_npu_version == torch_npu.__version__
    assert info.cann_version == torch.version.cann
    text = collect_env.pretty_str(info._replace(pip_packages="", conda_packages=None, is_xnnpack_available=True))
    assert f"Torch-npu version: {torch_npu.__version__}" in text and f"CANN:\n{torch.version.cann}" in text
    assert f"[{info.pip_version}] No relevant packages" in text and "[conda] Could not collect" in text
    assert "Is XNNPACK available: Yes" in text
    monkeypatch.setattr(collect_env, "TORCH_NPU_AVAILABLE", False)
    assert collect_env.get_torch_npu_version() == "N/A"
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path))
    assert collect_env.get_cann_version() == "not known"
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "ascend_toolkit_install.info").write_text("package_name=t\nversion=9.1.RC1\n")
    assert collect_env.get_cann_version() == "9.1.RC1"
    (tmp_path / "link").symlink_to(tmp_path / "x")
    with pytest.raises(RuntimeError, match="soft chain"):
        collect_env.check_directory_path_readable(str(tmp_path / "link"))
    with pytest.raises(RuntimeError, match="does not exist"):
        collect_env.check_directory_path_readable(str(tmp_path / "missing"))
    with pytest.warns(FutureWarning), pytest.raises(RuntimeError, match="does not exist"):
        collect_env.check_path_owner_consistent(str(tmp_path / "missing"))


def test_collect_env_cann_version_search_and_install_path(tmp_path, monkeypatch):
    from torch_npu.utils import collect_env

    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "ascend_nnae_install.info").write_text("package_name=nnae\n")  # no version line
    (tmp_path / "a" / "ascend_zz_install.info").write_text("version=1.0\n")  # not the folder's first info
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.info").write_text("version=2.0\n")  # not an install info
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "ascend_toolkit_install.info").write_text("name=t\nversion=8.0.RC3\n")
    assert collect_env.get_cann_version() == "8.0.RC3"
    monkeypatch.setenv("ASCEND_HOME_PATH", "")  # empty counts as unset: vNPU's stand-in folder
    assert collect_env.get_cann_version() == torch.version.cann
    monkeypatch.setattr(collect_env.site, "getsitepackages", lambda: ["/x/site-packages", "/y"])
    assert collect_env.get_torch_npu_install_path() == "/x/site-packages"
    monkeypatch.setattr(collect_env.site, "getsitepackages", lambda: [])
    assert collect_env.get_torch_npu_install_path() == ""


def test_vllm_ascend_start_up_names():
    # What vllm-ascend's platform and worker read before any model runs.
    from torch_npu.npu.streams import Event
    from torch_npu.op_plugin.atb._atb_ops import _register_atb_extensions

    assert _register_atb_extensions() is None
    props = torch.npu.get_device_properties(0)
    assert len(str(props.uuid)) == 36 and len(props.uuid.bytes) == 16
    assert props.cube_core_num > 0 and props.vector_core_num > 0
    assert 220 <= torch_npu.npu.get_soc_version() <= 225  # the default chip is a 910B ("A2")
    free, total = torch.npu.mem_get_info()
    assert 0 < free <= total
    assert "allocated_bytes.all.peak" in torch.npu.memory_stats(0)
    event = Event(enable_timing=True)
    event.record()
    event.synchronize()
    # _warm_up_atb: c (fp32) += x^T @ w (fp16), in place
    x = torch.rand(2, 4, dtype=torch.float16).npu()
    w = torch.rand(2, 4, dtype=torch.float16).npu()
    c = torch.rand(4, 4).npu()
    want = c.cpu() + x.cpu().float().t() @ w.cpu().float()
    torch_npu._npu_matmul_add_fp32(x, w, c)
    torch.testing.assert_close(c.cpu(), want)


def test_mindspeed_start_up_names():
    from torch_npu.npu import _lazy_call, device  # noqa: F401

    assert "Ascend" in torch_npu.npu.get_device_name()  # no argument: the current device
    gen = torch.npu.default_generators[0]
    gen.manual_seed(5)
    state = gen.graphsafe_get_state()
    a = torch.rand(3, device="npu")
    gen.graphsafe_set_state(state)
    assert torch.equal(torch.rand(3, device="npu").cpu(), a.cpu())
    torch_npu.npu.manual_seed_all(1)
    torch_npu.npu.manual_seed(1)
