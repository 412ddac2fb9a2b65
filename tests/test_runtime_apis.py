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
        _set_allocator_settings("max_split_size_mb:64")
        x = torch.ones(1024, device="npu"); del x
        for bad in ("no_such_key:1", "max_split_size_mb:abc", "max_split_size_mb:2",
                    "garbage_collection_threshold:0.8"):  # only from PYTORCH_NPU_ALLOC_CONF, as in torch_npu
            try:
                _set_allocator_settings(bad)
            except (RuntimeError, ValueError) as e:
                print("rejected", bad)
        print(torch.ones(4, device="npu").sum().item())
    """)
    assert r.returncode == 0, r.stderr
    for bad in ("no_such_key:1", "max_split_size_mb:abc", "max_split_size_mb:2", "garbage_collection_threshold:0.8"):
        assert f"rejected {bad}" in r.stdout
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
    assert rt is torch_npu.npu.npurt() is torch_npu._C._npurt  # real torch_npu's binding name
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
    stream = torch.npu.ExternalStream(slot.value)  # the handle is an aclrtStream, as on a chip
    assert stream != current and stream.npu_stream == slot.value
    assert stream == torch.npu.ExternalStream(slot.value) and isinstance(stream, torch.npu.Stream)
    with torch.npu.stream(stream):
        y = torch.ones(8, device="npu") * 3
    torch.npu.synchronize()
    assert_close(y.cpu(), torch.full((8,), 3.0))
    # As in real torch_npu, the caller owns an external stream's completion.
    with pytest.raises(RuntimeError, match="not supported in NPUStream::synchronize"):
        stream.synchronize()
    with pytest.raises(RuntimeError, match="Cannot query external NPU stream status"):
        stream.query()
    with pytest.raises(ValueError, match="is not a stream of the virtual NPU"):
        torch.npu.ExternalStream(12345)
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


# --- torch_npu.utils -----------------------------------------------------------------

def test_utils_is_an_attribute_of_torch_npu_and_loads_submodules_lazily():
    r = run_python("""
        import sys, torch_npu
        print(torch_npu.utils.npu_combine_tensors.__module__)
        print("torch_npu.utils.collect_env" in sys.modules, "torch_npu.utils.flops_count" in sys.modules)
        print(torch_npu.utils.FlopsCounter.__name__, torch_npu.utils.collect_env.get_cann_version())
        print(sorted(torch_npu.utils.__all__) == sorted(n for n in torch_npu.utils.__all__
                                                        if hasattr(torch_npu.utils, n)))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:4] == ["torch_npu.utils.combine_tensors", "False False",
                                        f"_FlopsCounter {get_cann_version()}", "True"]  # as real torch_npu names it


@pytest.mark.parametrize("dtype", [torch.half, torch.float, torch.bfloat16])
def test_combine_tensors_moves_each_tensor_into_one_buffer(dtype):
    x, y, z = (torch.randn(s, dtype=dtype, device="npu") for s in ((2, 2, 2, 2), (4, 4), (3, 3, 3)))
    before = [t.clone() for t in (x, y, z)]
    combined = torch_npu.utils.npu_combine_tensors([x, y, z])
    sizes = [torch_npu.get_storage_size(t) for t in (x, y, z)]
    assert sizes == [16, 16, 27] and torch_npu.get_storage_size(combined) == 59 and combined.is_contiguous()
    assert combined.data_ptr() == x.data_ptr()
    assert x.data_ptr() + 16 * x.element_size() == y.data_ptr()
    assert y.data_ptr() + 16 * y.element_size() == z.data_ptr()
    for t, b in zip((x, y, z), before):
        assert_close(t.cpu(), b.cpu())
    # One buffer, three views of it: writes through either side show on the other.
    combined.zero_().add_(2)
    assert [float(t.float().sum()) for t in (x, y, z)] == [32.0, 32.0, 54.0]
    for t in (x, y, z):
        t.mul_(2)
    assert float(combined.float().sum()) == 236.0
    part = torch_npu.utils.get_part_combined_tensor(combined, 16, 16)
    assert_close(part.reshape_as(y).cpu(), y.cpu())
    with pytest.raises(RuntimeError, match=r"\(index \+ size\) \(60\) > torch_npu.get_storage_size"):
        torch_npu.utils.get_part_combined_tensor(combined, 44, 16)
    valid = torch_npu.utils.is_combined_tensor_valid
    assert valid(combined, [x, y, z]) and not valid(combined, [x, y, z, None])
    assert not valid(combined, [x.clone(), y.clone(), z.clone()])
    assert torch_npu.utils.npu_combine_tensors([]) is None and valid(None, [])


def test_combined_tensors_survive_the_buffer_going_out_of_scope():
    params = [torch.full((100,), float(i), device="npu") for i in range(3)]
    torch_npu.utils.npu_combine_tensors(params)  # the buffer itself is dropped
    torch.npu.empty_cache()
    filler = [torch.full((300,), -1.0, device="npu") for _ in range(4)]  # would reuse freed memory
    assert [float(p.sum()) for p in params] == [0.0, 100.0, 200.0]
    del filler


def test_combine_tensors_bad_input():
    combine = torch_npu.utils.npu_combine_tensors
    with pytest.raises(RuntimeError, match="must not have `None`"):
        combine([torch.ones(2, device="npu"), None])
    with pytest.raises(RuntimeError, match="same dtype"):
        combine([torch.ones(2, device="npu"), torch.ones(2, device="npu", dtype=torch.half)])
    with pytest.raises(RuntimeError, match="must be on NPU, got cpu"):
        combine([torch.ones(2)])
    with pytest.raises(RuntimeError, match="exceeds the 4 elements of src"):
        torch_npu.npu_change_data_ptr(torch.ones(3, device="npu"), torch.ones(4, device="npu"), 2)


def test_combine_tensors_without_values_and_the_edge_cases():
    a, b = torch.ones(3, device="npu"), torch.full((2, 2), 7.0, device="npu")
    combined = torch_npu.utils.npu_combine_tensors([a, b], require_copy_value=False)
    assert combined.shape == (7,) and b.data_ptr() == a.data_ptr() + 3 * a.element_size()
    assert a.tolist() == [0.0] * 3 and b.sum().item() == 0.0  # moved, values not carried over
    b.fill_(1.0)
    assert combined.tolist() == [0.0] * 3 + [1.0] * 4
    assert torch_npu.utils.npu_combine_tensors([torch.ones(0, device="npu")]) is None  # no elements
    assert torch_npu.utils.get_part_combined_tensor(combined, 2, 0) is None
    assert torch_npu.utils.get_part_combined_tensor(None, 0, 3) is None
    assert not torch_npu.utils.is_combined_tensor_valid(None, [a])
    dst = torch.zeros(2, device="npu")
    assert torch_npu.npu_change_data_ptr(dst, combined, 5) == 0 and dst.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="should have the same dtype"):
        torch_npu.npu_change_data_ptr(torch.zeros(2, device="npu", dtype=torch.half), combined, 0)
    with pytest.raises(RuntimeError, match="both tensors should be on npu"):
        torch_npu.npu_change_data_ptr(torch.zeros(2), combined, 0)
    with pytest.raises(RuntimeError, match="exceeds"):
        torch_npu.npu_change_data_ptr(dst, combined, -1)


def test_save_async_writes_the_state_of_the_call(tmp_path):
    from torch_npu.utils._save_async import _wait_for_pending_saves
    w = torch.arange(6.0, device="npu")
    path = tmp_path / "ckpt.pt"
    torch_npu.utils.save_async({"w": w, "step": 3}, str(path))
    w.add_(100)  # after the call: not in the checkpoint
    _wait_for_pending_saves()
    loaded = torch.load(path, map_location="cpu")
    assert loaded["step"] == 3
    assert_close(loaded["w"], torch.arange(6.0))


def test_logs(capsys):
    torch_npu.utils.print_warn_log("low on memory")
    out = capsys.readouterr().out
    assert out.startswith("[WARNING] ") and "(PID:" in out and "RankID:-1)" in out and out.endswith("low on memory\n")


def test_conv_allow_hf32_flag():
    assert torch.npu.conv.allow_hf32 is True and torch.npu.matmul.allow_hf32 is False
    try:
        torch.npu.conv.allow_hf32 = False
        assert torch.npu.conv.allow_hf32 is False
        with pytest.raises(TypeError, match="must be a bool"):
            torch.npu.conv.allow_hf32 = 1
        with pytest.raises(AttributeError, match="unknown option"):
            torch.npu.conv.allow_tf32 = True
    finally:
        torch.npu.conv.allow_hf32 = True


def test_real_torch_npus_c_names_for_devices_and_streams():
    _C = torch_npu._C
    with torch.npu.device(1):
        assert _C._npu_getDevice() == _C._npu_getLocalDevice() == 1
        side = torch.npu.Stream()
        with torch.npu.stream(side):
            assert _C._npu_getCurrentStream(1) == (side.stream_id, 1, side.device_type)
        assert _C._npu_getDefaultStream(1) == (torch.npu.default_stream(1).stream_id, 1, side.device_type)
    _C._npu_setDevice(0)
    assert torch.npu.current_device() == 0
    with torch.npu.device(1):
        torch.npu._sleep(20000)
        late = torch.ones(3, device="npu:1") * 2
        _C._npu_synchronize()  # the current device's streams
        assert torch.npu.current_stream(1).query()
    assert _C._npu_canDeviceAccessPeer(0, 1) is True
    with pytest.raises((RuntimeError, ValueError)):
        _C._npu_canDeviceAccessPeer(0, 99)
    assert torch.equal(late.cpu(), torch.full((3,), 2.0))


def test_a_device_has_a_primary_context_once_used():
    # a fresh process: only the device a tensor was made on gets a context
    run = run_python("""
        import torch, torch_npu
        has = torch_npu._C._npu_hasPrimaryContext
        assert not any(has(d) for d in range(torch.npu.device_count()))
        x = torch.randn(1, device="npu:1")
        str(x)
        torch.randn(1).copy_(x)
        assert (has(0), has(1)) == (False, True), (has(0), has(1))
        print("ok")
    """)
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]
