"""Real torch_npu's module paths that code imports names from, besides the
packages vNPU organises them in (docs/fidelity.md, "Real torch_npu's public
names"): each name works from there as it does from torch.npu / torch_npu."""

import io
import os
import warnings

import pytest
import torch

import torch_npu


def test_npu_submodules_export_real_torch_npus_names():
    import torch_npu.npu.memory as memory
    import torch_npu.npu.streams as streams
    import torch_npu.npu.utils as utils
    from torch_npu.npu import autocast_utils, npu_config
    assert utils.synchronize is torch.npu.synchronize and utils.current_stream is torch.npu.current_stream
    assert utils.npu_check_overflow(torch.tensor([1.0, float("inf")], device="npu"))
    assert not utils.npu_check_overflow(torch.ones(3, device="npu")) and utils.npu_check_overflow(float("nan"))
    with pytest.raises(TypeError):
        utils.npu_check_overflow("x")
    assert memory.host_memory_stats is torch.npu.host_memory_stats
    assert memory.empty_virt_addr_cache is torch.npu.empty_virt_addr_cache
    assert streams.SyncLaunchStream is torch.npu.SyncLaunchStream
    assert npu_config.set_option is torch.npu.set_option and npu_config.get_stream_limit is torch.npu.get_stream_limit
    assert autocast_utils.get_amp_supported_dtype() == torch.npu.get_amp_supported_dtype()
    with pytest.raises(AttributeError):
        npu_config.not_a_name


def test_aclnn_allow_hf32_is_the_convolution_switch():
    # Set through flags(): torch's test utilities freeze plain assignment to
    # backend flags (torch.backends' rule, which this module follows).
    assert torch.npu.aclnn.allow_hf32 is True  # real torch_npu's default
    with torch.npu.aclnn.flags(allow_hf32=False):
        assert torch.npu.aclnn.allow_hf32 is False and torch.npu.conv.allow_hf32 is False
        with torch.npu.aclnn.flags(allow_hf32=True):
            assert torch.npu.conv.allow_hf32 is True
        assert torch.npu.aclnn.allow_hf32 is False
    assert torch.npu.aclnn.allow_hf32 is True
    with warnings.catch_warnings(record=True):
        assert torch.npu.aclnn.version() is None


def test_profiler_supported_sets():
    from torch_npu.profiler import (AiCMetrics, ExportType, HostSystem, ProfilerLevel, supported_ai_core_metrics,
                                    supported_export_type, supported_profiler_level)
    assert supported_profiler_level() == {ProfilerLevel.Level0, ProfilerLevel.Level1, ProfilerLevel.Level2,
                                          ProfilerLevel.Level_none}
    assert AiCMetrics.PipeUtilization in supported_ai_core_metrics()
    assert supported_export_type() == {ExportType.Db, ExportType.Text}
    assert HostSystem.CPU == "cpu" and HostSystem.NUMA == "numa"


def test_thread_affinity_binds_and_resets_the_calling_thread():
    from torch_npu.utils import reset_thread_affinity, set_thread_affinity
    available = sorted(os.sched_getaffinity(0))
    first = available[0]
    set_thread_affinity([first, first])
    try:
        assert os.sched_getaffinity(0) == {first}
        set_thread_affinity([[first, first]])
        assert os.sched_getaffinity(0) == {first}
    finally:
        reset_thread_affinity()
    assert sorted(os.sched_getaffinity(0)) == available
    for bad in ([3, 1], "0-3", [[0]], [-1, 0], [0, 10_000], [0, 10**12], [[0, 0], [5, 10**15]]):
        with pytest.raises(ValueError, match="Invalid core range"):
            set_thread_affinity(bad)


def test_thread_affinity_goes_through_the_c_bindings_real_torch_npu_has(monkeypatch):
    # Real torch_npu's utils call torch_npu._C._npu_set_thread_affinity with the
    # sorted core ids, or (-1, -1) for the default; its tests replace them.
    from torch_npu.utils import reset_thread_affinity, set_thread_affinity
    calls = []
    monkeypatch.setattr(torch_npu._C, "_npu_set_thread_affinity", lambda *args: calls.append(args))
    monkeypatch.setattr(torch_npu._C, "_npu_reset_thread_affinity", lambda: calls.append("reset"))
    set_thread_affinity([[2, 4], [3, 6]])
    set_thread_affinity(None)
    reset_thread_affinity()
    assert calls == [([2, 3, 4, 5, 6],), (-1, -1), "reset"]
    monkeypatch.undo()
    # The bindings themselves: a range, a list, the default, and cores this process lacks.
    available = sorted(os.sched_getaffinity(0))
    try:
        torch_npu._C._npu_set_thread_affinity(available[0], available[0])
        assert os.sched_getaffinity(0) == {available[0]}
        torch_npu._C._npu_set_thread_affinity(-1, -1)
        assert sorted(os.sched_getaffinity(0)) == available
        torch_npu._C._npu_set_thread_affinity([available[-1]])
        assert os.sched_getaffinity(0) == {available[-1]}
        with pytest.raises(ValueError, match=r"cores \[100000\] are not available"):
            torch_npu._C._npu_set_thread_affinity([100_000])
        with pytest.raises(ValueError, match="Invalid core range values"):
            torch_npu._C._npu_set_thread_affinity(5, 2)
        with pytest.raises(ValueError, match="cores are numbered 0 to 1023"):
            torch_npu._C._npu_set_thread_affinity(0, 10**12)  # refused, not enumerated
    finally:
        torch_npu._C._npu_reset_thread_affinity()
    assert sorted(os.sched_getaffinity(0)) == available


def test_serialization_load_and_save_async_from_their_real_module():
    from torch_npu.utils.serialization import load, save_async
    assert save_async is torch_npu.utils.save_async
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(4.0, device="npu")}, buffer)
    buffer.seek(0)
    loaded = load(buffer)
    assert loaded["w"].device.type == "npu" and loaded["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    buffer.seek(0)
    assert load(buffer, map_location="cpu")["w"].device.type == "cpu"


def test_compat_shims_are_the_installed_torchs_helpers():
    from torch.distributed.tensor._ops import _matrix_ops
    from torch.distributed.tensor._ops import utils as dtensor_op_utils
    from torch.utils._config_module import _ConfigEntry, Config

    from torch_npu._compat import distributed, utils, version

    assert version.CURRENT_VERSION == tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    assert version.MIN_SUPPORTED_VERSION <= version.CURRENT_VERSION
    assert version._major_minor("2.14.0a0+git1234") == (2, 14) and version._major_minor("3.0") == (3, 0)
    assert distributed.register_op_strategy is dtensor_op_utils.register_op_strategy
    assert distributed.register_prop_rule is dtensor_op_utils.register_prop_rule
    assert distributed._mm_like_strategy is _matrix_ops._mm_like_strategy
    entry = utils.make_config_entry(Config(default=3), name="npu_option")
    assert isinstance(entry, _ConfigEntry) and entry.default == 3
