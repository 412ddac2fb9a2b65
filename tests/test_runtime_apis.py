"""Runtime and memory APIs real torch_npu's test/npu and test/allocator use
(allocator settings at run time, host cache, swapped memory, npurt, CANN
version helpers, memory_stats_as_nested_dict, autocast setters), and the
torch_npu.utils package (combined tensors)."""

import ctypes

import pytest
import torch
import torch_npu
from torch.testing import assert_close
from torch_npu.npu.utils import _is_gte_cann_version, get_cann_version

from conftest import run_python


# --- allocator settings at run time --------------------------------------------

def test_set_allocator_settings_rejects_a_non_string():
    with pytest.raises(TypeError, match="settings should be a str"):
        torch_npu.npu.memory._set_allocator_settings(128)


@pytest.mark.skipif(not hasattr(torch_npu._C, "_npu_set_allocator_settings"),
                    reason="torch_npu._C._npu_set_allocator_settings is not in this build of the extension yet")
def test_set_allocator_settings_applies_and_rejects():
    r = run_python("""
        import torch, torch_npu
        from torch_npu.npu.memory import _set_allocator_settings
        _set_allocator_settings("garbage_collection_threshold:0.8")
        x = torch.ones(1024, device="npu"); del x
        for bad in ("no_such_key:1", "max_split_size_mb:abc"):
            try:
                _set_allocator_settings(bad)
            except RuntimeError as e:
                print("rejected", bad)
        print(torch.ones(4, device="npu").sum().item())
    """)
    assert r.returncode == 0, r.stderr
    assert "rejected no_such_key:1" in r.stdout and "rejected max_split_size_mb:abc" in r.stdout
    assert "4.0" in r.stdout


def test_set_allocator_settings_without_the_binding_says_what_to_do(monkeypatch):
    monkeypatch.delattr(torch_npu._C, "_npu_set_allocator_settings", raising=False)
    with pytest.raises(RuntimeError, match="no _npu_set_allocator_settings; rebuild"):
        torch_npu.npu.memory._set_allocator_settings("max_split_size_mb:64")


# --- host memory, swapped memory, memory stats -------------------------------------

def test_host_empty_cache_keeps_live_pinned_memory():
    t = torch.arange(1000.0).pin_memory()
    dst = torch.empty(1000, device="npu")
    dst.copy_(t, non_blocking=True)
    torch.npu.host_empty_cache()  # a queued copy still reads t: nothing may be freed under it
    assert t.is_pinned()
    assert_close(dst.cpu(), torch.arange(1000.0))
    del t
    torch.npu.synchronize()
    torch.npu.host_empty_cache()
    assert torch.npu.host_empty_cache is torch_npu.npu.memory.host_empty_cache


def test_empty_with_swapped_memory_is_an_npu_tensor_that_computes():
    t = torch_npu.empty_with_swapped_memory([3, 4], dtype=torch.float16, device=torch.device("npu:0"))
    assert t.device == torch.device("npu:0") and t.dtype == torch.float16 and t.shape == (3, 4)
    t.fill_(0).add_(torch.ones(3, 4, dtype=torch.float16, device="npu"))
    assert_close(t.cpu(), torch.ones(3, 4, dtype=torch.float16))
    assert torch_npu.empty_with_swapped_memory((5,)).dtype == torch.get_default_dtype()
    with pytest.raises(RuntimeError, match="should be an npu device"):
        torch_npu.empty_with_swapped_memory([2], device="cpu")


def test_memory_stats_as_nested_dict_matches_memory_stats():
    x = torch.ones(1 << 16, device="npu")
    flat = torch.npu.memory_stats()
    nested = torch.npu.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == flat["allocated_bytes.all.current"] >= x.numel() * 4
    leaves = 0
    stack = [nested]
    while stack:
        node = stack.pop()
        for value in node.values():
            if isinstance(value, dict):
                stack.append(value)
            else:
                leaves += 1
    assert leaves == len(flat)
    assert torch.npu.get_allocator_backend() == "native"


# --- npurt ------------------------------------------------------------------------

ACL_HOST_REG_MAPPED, ACL_HOST_REG_PINNED = 0x2, 0x10000000


def test_npurt_host_register_and_unregister():
    rt = torch.npu.npurt()
    assert rt is torch_npu.npu.npurt()
    page = torch.empty(4096, dtype=torch.uint8).share_memory_()
    for flag in (ACL_HOST_REG_PINNED, ACL_HOST_REG_MAPPED, ACL_HOST_REG_PINNED | ACL_HOST_REG_MAPPED):
        assert rt.npuHostRegister(page.data_ptr(), 4096, flag) == 0
        assert rt.npuHostRegister(page.data_ptr(), 4096, flag) != 0  # already registered
        assert rt.npuHostUnregister(page.data_ptr()) == 0
    assert rt.npuHostUnregister(page.data_ptr()) != 0  # no longer registered
    assert rt.npuHostRegister(page.data_ptr(), 0, ACL_HOST_REG_PINNED) != 0
    assert rt.npuHostRegister(0, 4096, ACL_HOST_REG_PINNED) != 0
    assert rt.npuHostRegister(page.data_ptr() + 8, 64, ACL_HOST_REG_MAPPED) != 0  # MAPPED wants 4 KiB alignment
    assert rt.npuHostRegister(page.data_ptr(), 4096, 0x4) != 0  # unknown flag


def test_npurt_raw_stream_runs_work():
    rt = torch.npu.npurt()
    slot = ctypes.c_void_p()
    assert rt.npuStreamCreate(ctypes.addressof(slot)) == 0 and slot.value
    current = torch.npu.current_stream()
    stream = torch.npu.Stream(stream_id=slot.value, device_index=current.device_index,
                              device_type=current.device_type)
    assert stream != current
    with torch.npu.stream(stream):
        y = torch.ones(8, device="npu") * 3
    stream.synchronize()
    assert_close(y.cpu(), torch.full((8,), 3.0))
    assert rt.npuStreamDestroy(slot.value) == 0
    assert rt.npuStreamDestroy(slot.value) != 0
    assert rt.npuStreamCreate(0) != 0 and rt.npuStreamDestroy(0) != 0


# --- CANN version helpers -----------------------------------------------------------

def test_cann_version_is_reported_consistently():
    assert get_cann_version() == get_cann_version(module="CANN") == torch.version.cann == torch.npu.get_cann_version()
    info = (torch_npu.__path__[0] + "/_cann/ascend_toolkit_install.info")
    assert f"version={get_cann_version()}\n" in open(info).read()
    for module in ("RUNTIME", "COMPILER", "HCCL", "TOOLKIT", "OPP", "OPP_KERNEL"):
        assert get_cann_version(module=module) == get_cann_version()
    assert get_cann_version(module="DRIVER") == ""
    with pytest.raises(RuntimeError, match="module should be one of"):
        get_cann_version(module="GPU")


def test_is_gte_cann_version():
    # vNPU reports CANN 8.0.0, older than the first comparable version.
    assert _is_gte_cann_version("8.1.RC1") is False
    assert _is_gte_cann_version("8.5.0", "CANN") is False
    with pytest.raises(RuntimeError, match='When the version is less than "8.1.RC1", this function is not supported'):
        _is_gte_cann_version("7.0.0", "CANN")
    with pytest.raises(RuntimeError, match="When the module is DRIVER"):
        _is_gte_cann_version("8.1.RC1", module="DRIVER")
    with pytest.raises(RuntimeError, match="is not a CANN version"):
        _is_gte_cann_version("eight")


def test_cann_version_order(monkeypatch):
    import torch_npu.npu.utils as utils
    monkeypatch.setattr(utils, "_CANN_VERSION", "8.2.RC1")
    assert utils._is_gte_cann_version("8.1.RC1")
    assert utils._is_gte_cann_version("8.2.RC1")
    assert utils._is_gte_cann_version("8.2.RC1.alpha003")
    assert utils._is_gte_cann_version("8.2.T10")
    assert not utils._is_gte_cann_version("8.2.0")
    assert not utils._is_gte_cann_version("8.3.RC1")


# --- other torch.npu names -------------------------------------------------------------

def test_autocast_setters():
    try:
        torch.npu.set_autocast_dtype(torch.bfloat16)
        torch.npu.set_autocast_enabled(True)
        assert torch.npu.is_autocast_enabled() and torch.npu.get_autocast_dtype() == torch.bfloat16
        a = torch.randn(4, 4, device="npu")
        assert (a @ a).dtype == torch.bfloat16
    finally:
        torch.npu.set_autocast_enabled(False)
        torch.npu.set_autocast_dtype(torch.float16)
    assert not torch.npu.is_autocast_enabled()


@pytest.mark.parametrize("name", ["init_dump", "finalize_dump"])
def test_dump_apis_say_they_are_not_supported(name):
    with pytest.raises(RuntimeError, match=f"torch.npu.{name} is not supported on vNPU"):
        getattr(torch.npu, name)()
    with pytest.raises(RuntimeError, match="torch.npu.set_dump is not supported on vNPU"):
        torch.npu.set_dump("dump.json")
