"""torch.npu names real torch_npu exports that vNPU added later: core limits,
fault handling, deterministic switches, mstx markers, and the names that
raise "not supported on vNPU" with a reason. Each test asserts what the
name does here (or that it refuses), not merely that it exists."""

import warnings

import pytest
import torch
import torch_npu  # noqa: F401

# Which of real torch_npu's torch.npu names exist, and their signatures: tests/test_signatures.py.


# --- core limits --------------------------------------------------------------------------

@pytest.fixture
def device_limit_settable():
    """set_device_limit may be called once per process (torch_npu's rule): each
    test that sets it starts with it unused and puts the chip's limits back."""
    set_limit = torch.npu.set_device_limit
    set_limit.called = False
    yield set_limit
    set_limit.called = False
    for index in range(torch.npu.device_count()):
        props = torch.npu.get_device_properties(index)
        set_limit(index, props.cube_core_num, props.vector_core_num)
        set_limit.called = False


def test_device_limit_defaults_to_chip_and_is_stored(device_limit_settable):
    props = torch.npu.get_device_properties(1)
    chip = {"cube_core_num": props.cube_core_num, "vector_core_num": props.vector_core_num}
    assert torch.npu.get_device_limit(1) == chip
    torch.npu.set_device_limit(1, 8)
    assert torch.npu.get_device_limit(1) == {"cube_core_num": 8, "vector_core_num": chip["vector_core_num"]}
    # Other devices keep theirs.
    assert torch.npu.get_device_limit(2) == chip
    # Once per process, as in torch_npu.
    with pytest.raises(RuntimeError, match="You can only set this interface once"):
        torch.npu.set_device_limit(1, vector_num=16)
    assert torch.npu.get_device_limit(1)["vector_core_num"] == chip["vector_core_num"]


def test_device_limit_takes_an_int_device(device_limit_settable):
    for device in ("0", "npu:1", 0.0, None, True, torch.device("npu", 1)):
        with pytest.raises(TypeError, match="device must be an int"):
            torch.npu.get_device_limit(device)
        device_limit_settable.called = False
        with pytest.raises(TypeError, match="device must be an int"):
            torch.npu.set_device_limit(device)
    with pytest.raises(AssertionError, match="Invalid device id 99"):
        torch.npu.get_device_limit(99)


def test_stream_limit_follows_device_until_set_and_reset():
    s = torch.npu.Stream(device=3)
    chip = torch.npu.get_device_limit(3)
    assert torch.npu.get_stream_limit(s) == chip
    torch.npu.set_stream_limit(s, 4, 8)
    assert torch.npu.get_stream_limit(s) == {"cube_core_num": 4, "vector_core_num": 8}
    other = torch.npu.Stream(device=3)
    assert torch.npu.get_stream_limit(other) == chip
    torch.npu.reset_stream_limit(s)
    assert torch.npu.get_stream_limit(s) == chip
    # Work on a limited stream still runs and gives the same result (the limit has no effect on vNPU).
    torch.npu.set_stream_limit(s, 1, 1)
    with torch.npu.stream(s):
        y = torch.arange(6.0, device="npu:3").reshape(2, 3) @ torch.ones(3, 2, device="npu:3")
    s.synchronize()
    assert torch.equal(y.cpu(), torch.arange(6.0).reshape(2, 3) @ torch.ones(3, 2))
    torch.npu.reset_stream_limit(s)


def test_limit_argument_checks():
    s = torch.npu.current_stream()
    cores = torch.npu.get_device_properties(s.device_index).cube_core_num
    with pytest.raises(RuntimeError, match=rf"cube_num should be -1 \(unchanged\) or in \[1, {cores}\]"):
        torch.npu.set_stream_limit(s, cores + 1)
    torch.npu.set_device_limit.called = False
    with pytest.raises(RuntimeError, match="vector_num should be"):
        torch.npu.set_device_limit(0, vector_num=0)
    torch.npu.set_device_limit.called = False
    with pytest.raises(TypeError, match="stream should be a torch.npu.Stream"):
        torch.npu.get_stream_limit("not a stream")
    with pytest.raises(TypeError, match="should be an int"):
        torch.npu.set_device_limit(0, 2.5)
    torch.npu.set_device_limit.called = False


# --- fault handling -----------------------------------------------------------------------

def test_uce_checks_report_no_error():
    assert torch.npu.check_uce_in_memory(0) == 0
    assert torch.npu._get_uce_addr() == []
    with pytest.raises(RuntimeError, match="Invalid device ID"):
        torch.npu.check_uce_in_memory(99)


@pytest.mark.parametrize("call", [lambda: torch.npu.stop_device(0), lambda: torch.npu.stress_detect()])
def test_recovery_not_supported(call):
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        call()


def test_restart_device_marks_live_data_unsafe_until_a_copy_rewrites_it():
    from torch_npu.npu import _recovery
    torch.npu.restart_device(0)  # the virtual NPU never stops: nothing to do
    a = torch.randn(64, device="npu")
    b = torch.randn(64, device="npu")
    b_saved = b.cpu()
    expected = (a + b).cpu()
    try:
        torch.npu.restart_device(0, rebuild_all_resources=True)
        assert _recovery.get_npu_tensor_unsafe_check_flag()
        assert not _recovery.check_npu_tensor_is_safe(a) and not _recovery.check_npu_tensor_is_safe(b[3:])
        with pytest.raises(RuntimeError, match="There is unsafe data in the input tensor"):
            a + b
        with pytest.raises(RuntimeError, match="There is unsafe data in the input tensor"):
            a.add_(1)
        fresh = torch.randn(64, device="npu")  # new memory is safe
        assert _recovery.check_npu_tensor_is_safe(fresh)
        with pytest.raises(RuntimeError, match="There is unsafe data in the input tensor"):
            b.cpu()  # a copy from unsafe data
        a.copy_(expected.npu() - b_saved.npu())  # a reload: safe again
        assert _recovery.check_npu_tensor_is_safe(a)
        b.copy_(b_saved)
        torch.testing.assert_close((a + b).cpu(), expected)
        address = fresh.data_ptr()
        torch.npu.restart_device(0, rebuild_all_resources=True)
        del fresh  # freed: the next tensor in that memory is safe
        again = torch.empty(64, device="npu")
        assert again.data_ptr() == address and _recovery.check_npu_tensor_is_safe(again)
        _recovery.set_npu_tensor_unsafe_check_flag(False)  # off: unsafe data is used without a check
        a + b
    finally:
        _recovery.set_npu_tensor_unsafe_check_flag(False)
    with pytest.raises(RuntimeError, match="param type should be Tensor"):
        _recovery.check_npu_tensor_is_safe("not a tensor")
    with pytest.raises(RuntimeError, match="Invalid device ID"):
        torch.npu.restart_device(99)


def test_recovery_storage_functions_and_host_data():
    from torch_npu.npu import _recovery
    t = torch.randn(16, device="npu")
    host = torch.randn(16)
    try:
        _recovery.mark_all_npu_tensor_unsafe(0)
        assert not _recovery.check_npu_storage_is_safe(t.untyped_storage())
        assert not _recovery.check_npu_storage_is_safe(t[4:].storage())  # a TypedStorage of a view: same block
        _recovery.update_npu_storage_to_safe(t.untyped_storage())
        assert _recovery.check_npu_tensor_is_safe(t)
        _recovery.mark_all_npu_tensor_unsafe(0)
        _recovery.update_npu_tensor_to_safe(t)
        assert _recovery.check_npu_storage_is_safe(t.untyped_storage())
        # host memory is never marked: always safe, and marking it safe is a no-op
        assert _recovery.check_npu_tensor_is_safe(host) and _recovery.check_npu_storage_is_safe(host.untyped_storage())
        _recovery.update_npu_tensor_to_safe(host)
    finally:
        _recovery.update_npu_tensor_to_safe(t)
        _recovery.set_npu_tensor_unsafe_check_flag(False)
    with pytest.raises(RuntimeError, match="param type should be TypedStorage or UntypedStorage"):
        _recovery.check_npu_storage_is_safe(t)
    with pytest.raises(RuntimeError, match="param type should be Tensor"):
        _recovery.update_npu_tensor_to_safe(t.untyped_storage())
    with pytest.raises(RuntimeError, match="param type should be TypedStorage or UntypedStorage"):
        _recovery.update_npu_storage_to_safe(None)
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        _recovery.stop_device(0)


def test_restart_device_drops_the_errors_its_streams_hold():
    src = torch.randn(5, 3, device="npu")
    src.gather(0, torch.tensor([[1, 0, 0]], device="npu"))  # a first launch runs on the caller: not the bad one
    src.gather(0, torch.tensor([[7, 0, 0]], device="npu"))  # fails on the stream
    torch.npu.restart_device(0, rebuild_all_resources=True, disable_tensor_unsafe_check=True)
    assert not torch_npu.npu._recovery.get_npu_tensor_unsafe_check_flag()
    assert torch.ones(3, device="npu").sum().item() == 3


# --- deterministic switches ---------------------------------------------------------------

def test_deterministic_with_backward_switches_forward_and_backward():
    seen = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            seen.append(("forward", torch.are_deterministic_algorithms_enabled()))
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(("backward", torch.are_deterministic_algorithms_enabled()))
            return g * 2

    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(False)
        x = torch.ones(3, device="npu", requires_grad=True)
        h = torch.npu.enable_deterministic_with_backward(x)
        y = Probe.apply(h)
        out = torch.npu.disable_deterministic_with_backward(y)
        assert not torch.are_deterministic_algorithms_enabled()
        out.sum().backward()
        assert seen == [("forward", True), ("backward", True)]
        assert not torch.are_deterministic_algorithms_enabled()
        assert torch.equal(x.grad.cpu(), torch.full((3,), 2.0))
    finally:
        torch.use_deterministic_algorithms(before)


# --- mstx -----------------------------------------------------------------------------------

def test_mstx_marks_and_ranges_reach_the_profiler():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.npu.mstx.mark("vnpu-mark")
        rid = torch.npu.mstx.range_start("vnpu-range", torch.npu.current_stream())
        assert isinstance(rid, int) and rid > 0
        torch.ones(4, device="npu").sum().item()
        torch.npu.mstx.range_end(rid)

        @torch.npu.mstx.mstx_range("vnpu-decorated")
        def work():
            return 7
        assert work() == 7
    names = {e.name for e in prof.events()}
    assert {"vnpu-mark", "vnpu-range", "vnpu-decorated"} <= names
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.npu.mstx.range_start("") == 0
        assert torch.npu.mstx.range_start("x", stream="bad") == 0
        assert torch.npu.mstx.range_start("x", domain=1) == 0
        assert torch.npu.mstx.range_push("") == -1
        assert torch.npu.mstx.range_pop(domain="") == -1
        torch.npu.mstx.mark("x", stream=1)
    assert len(caught) == 6


def test_mstx_push_pop_domains_annotate_and_the_c_backend():
    import torch_npu
    mstx = torch.npu.mstx
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        assert mstx.range_push("outer", domain="d1") == 0
        assert mstx.range_push("inner", torch.npu.current_stream(), domain="d1") == 1
        assert mstx.range_push("other", domain="d2") == 0
        assert mstx.range_pop("d1") == 1 and mstx.range_pop("d1") == 0 and mstx.range_pop("d1") == -1
        assert mstx.range_pop("d2") == 0

        with mstx.annotate("ctx-range", domain="d3"):
            pass

        @mstx.annotate()
        def named_by_function():
            return 3
        assert named_by_function() == 3
    names = {e.name for e in prof.events()}
    assert {"outer", "inner", "other", "ctx-range", "named_by_function"} <= names
    # The front end calls torch_npu._C._mstx at call time, as real torch_npu's does.
    seen = []
    saved = torch_npu._C._mstx._mark_on_host
    torch_npu._C._mstx._mark_on_host = lambda message, domain="default": seen.append((message, domain))
    try:
        mstx.mark("stubbed", domain="dom")
    finally:
        torch_npu._C._mstx._mark_on_host = saved
    assert seen == [("stubbed", "dom")]


def test_mstx_refusals_use_torch_npus_words_and_mark_allows_an_empty_domain():
    mstx = torch.npu.mstx
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mstx.mark("ok", domain="")  # accepted: only the ranges insist on a domain
        assert mstx.range_start("x", domain="") == 0
        mstx.range_end("not an id")
        assert mstx.range_push("x", stream=object()) == -1

        @mstx.mstx_range("")  # refused range: the function still runs, once
        def unnamed():
            return 5
        assert unnamed() == 5 and unnamed.__name__ == "unnamed"
    assert [str(w.message) for w in caught] == [
        "Invalid domain for mstx.range_start func. Please input valid domain string.",
        "Invalid message for mstx.range_end function. Please provide the return value from mstx.range_start.",
        "Invalid stream for mstx.range_push func. Please input valid stream.",
        "Invalid message for mstx.range_start function. Please provide a valid message string.",
    ]


def test_mstx_ranges_by_id_end_on_any_thread_and_pushes_nest_per_thread():
    import threading
    mstx = torch.npu.mstx
    started = mstx.range_start("crosses-threads")
    depths = []

    def other_thread():
        mstx.range_end(started)
        depths.append(mstx.range_push("own-stack", domain="per-thread"))
        depths.append(mstx.range_pop("per-thread"))

    assert mstx.range_push("main-stack", domain="per-thread") == 0
    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert depths == [0, 0]  # the main thread's push is not on the other thread's stack
    assert mstx.range_pop("per-thread") == 0 and mstx.range_pop("per-thread") == -1
    assert mstx.range_start("next") > started


# --- fixed answers ------------------------------------------------------------------------

def test_fixed_answers():
    with pytest.warns(UserWarning, match="NPU does not use blas handle"):
        assert torch.npu.current_blas_handle() is None
    with pytest.raises(RuntimeError, match="Unsupported api when soc_version >= Ascend910B1"):
        torch.npu.get_npu_overflow_flag()
    with pytest.warns(UserWarning, match="clear_npu_overflow_flag is useless"):
        torch.npu.clear_npu_overflow_flag()
    assert torch.npu.get_mm_bmm_format_nd() is True
    torch.npu.set_mm_bmm_format_nd(True)
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        torch.npu.set_mm_bmm_format_nd(False)
    allocated = torch.npu.memory_allocated()
    assert torch.npu.ipc_collect() is None and torch.npu.empty_virt_addr_cache() is None
    assert torch.npu.memory_allocated() == allocated


# --- not supported on vNPU ----------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: torch.npu.set_aoe("/tmp/aoe"),
    lambda: torch.npu.set_op_timeout_ms(1000),
    lambda: torch.npu.obfuscation_initialize(4096, 0, 1),
    lambda: torch.npu.obfuscation_finalize(3),
    lambda: torch.npu.obfuscation_calculate(3, torch.ones(2, device="npu"), None),
    lambda: torch.npu.stress_detect("hccs"),
    lambda: torch.npu.set_deterministic_level(3),
])
def test_not_supported_names_raise_with_reason(call):
    with pytest.raises(RuntimeError, match=r"is not supported on vNPU: \S"):
        call()


def test_set_op_timeout_ms_checks_its_argument_before_refusing():
    # torch_npu's binding takes an unsigned 32-bit count: its messages.
    with pytest.raises(OverflowError, match="can't convert negative value to unsigned int"):
        torch.npu.set_op_timeout_ms(-1)
    with pytest.raises(OverflowError, match="Overflow when unpacking long"):
        torch.npu.set_op_timeout_ms(2 ** 32)
    with pytest.raises(TypeError, match="must be int"):
        torch.npu.set_op_timeout_ms(1.5)


def test_argument_refusals_name_what_to_do():
    with pytest.raises(ValueError, match="unknown NPU memory pool"):
        torch.npu.memory_snapshot(mempool_id=(0, 987654))
    with pytest.raises(ValueError, match="supports configuring 0/1/2/3"):
        torch.npu.set_deterministic_level(4)


# --- CubeMathType, set_deterministic_level, erase_stream -------------------------------------

def test_cube_math_type_is_kept_and_checked():
    assert torch.npu.CubeMathType.USE_HF32 == 3 and torch.npu.CubeMathType.FORCE_GRP_ACC_FOR_FP32 == 4
    before = torch.npu.matmul.cube_math_type
    try:
        torch.npu.matmul.cube_math_type = torch.npu.CubeMathType.USE_HF32
        assert torch.npu.matmul.cube_math_type is torch.npu.CubeMathType.USE_HF32
        with pytest.raises(TypeError, match="value should be one of Enum CubeMathType"):
            torch.npu.matmul.cube_math_type = 3
    finally:
        object.__setattr__(torch.npu.matmul, "cube_math_type", before)


def test_set_deterministic_level_switches_torch_and_warns_on_change():
    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(False)
        with pytest.warns(UserWarning, match="'torch.use_deterministic_algorithms' has been configured to 'True'"):
            torch.npu.set_deterministic_level(1)
        assert torch.are_deterministic_algorithms_enabled()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.npu.set_deterministic_level(1)  # no change: only real torch_npu's advice, at every call
        assert [str(w.message)[:52] for w in caught] == ["After using 'torch_npu.npu.set_deterministic_level',"]
        with pytest.warns(UserWarning, match="configured to 'False'"):
            torch.npu.set_deterministic_level(0)
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before)


def test_deterministic_level_2_gives_bits_independent_of_the_core_count():
    # Note [Deterministic level 2]: a kernel's team is one thread, so a parallel
    # reduction gives the bits of a one-thread CPU run whatever the process's threads.
    x = torch.randn(1 << 22, generator=torch.Generator().manual_seed(0))
    on_npu = x.npu()
    threads, before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    try:
        torch.set_num_threads(1)
        one_thread = x.sum()
        with pytest.warns(UserWarning, match="do not use 'torch.use_deterministic_algorithms' anymore"):
            torch.npu.set_deterministic_level(2)
        assert torch.npu._get_deterministic_level() == 2
        for count in (2, 4, 8):
            torch.set_num_threads(count)
            assert torch.equal(on_npu.sum().cpu(), one_thread)
        torch.use_deterministic_algorithms(False)  # the level in effect follows torch's switch
        assert torch.npu._get_deterministic_level() == 0
        with pytest.raises(RuntimeError, match=r"set_deterministic_level\(3\)' \(batch consistency\) is not supported"):
            torch.npu.set_deterministic_level(3)
        assert not torch.are_deterministic_algorithms_enabled()  # put back when the level is refused
    finally:
        torch.set_num_threads(threads)
        torch_npu._C._npu_set_deterministic_level(0)
        torch.use_deterministic_algorithms(before)


def test_the_first_kernel_on_a_new_stream_takes_the_deterministic_team_too():
    # ATen sets a thread's OpenMP count to the process's at its first parallel
    # loop; on a new stream's worker that once undid the kernel's team, so the
    # first reduction there gave other bits than the next ones.
    x = torch.randn(1 << 22, generator=torch.Generator().manual_seed(1)).npu()
    threads, before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    try:
        torch.set_num_threads(4)
        torch.use_deterministic_algorithms(True)
        for _ in range(3):
            fresh = torch.npu.Stream()
            fresh.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(fresh):
                first, second = x.sum(), x.sum()
            torch.npu.current_stream().wait_stream(fresh)
            assert torch.equal(first.cpu(), second.cpu())
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(before)


def test_erase_stream_checks_arguments_and_keeps_memory_safe():
    s = torch.npu.Stream()
    x = torch.ones(1 << 16, device="npu")
    s.wait_stream(torch.npu.current_stream())  # x is filled on the default stream first
    with torch.npu.stream(s):
        y = x * 2
    x.record_stream(s)
    torch_npu.erase_stream(x, s)
    s.synchronize()
    assert torch.equal(y.cpu(), torch.full((1 << 16,), 2.0))
    with pytest.raises(TypeError, match="tensor should be torch.Tensor"):
        torch_npu.erase_stream([1], s)
    with pytest.raises(TypeError, match="stream should be torch_npu.npu.Stream"):
        torch_npu.erase_stream(x, "npu")


def test_compatible_implementations_are_the_only_ones():
    # vNPU behaves as PyTorch's CUDA implementations do: the switch's True is
    # what it does, False cannot be honoured and says so.
    assert torch.npu.are_compatible_impl_enabled() is True
    torch.npu.use_compatible_impl(True)
    with pytest.warns(UserWarning, match=r"use_compatible_impl\(False\) has no effect on vNPU"):
        torch.npu.use_compatible_impl(False)
    assert torch.npu.are_compatible_impl_enabled() is True
    with pytest.raises(TypeError, match="expects a bool"):
        torch.npu.use_compatible_impl("yes")


def test_sdp_switches_are_pytorchs_global_flags():
    # As real torch_npu: torch.npu's switches read and set the flags
    # torch.backends.cuda does, with a warning that no kernel choice follows.
    before = torch.backends.cuda.flash_sdp_enabled()
    try:
        with pytest.warns(UserWarning, match="only sets the global variable"):
            torch.npu.enable_flash_sdp(not before)
        assert torch.backends.cuda.flash_sdp_enabled() is (not before)
        with pytest.warns(UserWarning):
            assert torch.npu.flash_sdp_enabled() is (not before)
    finally:
        torch.backends.cuda.enable_flash_sdp(before)
    with pytest.warns(UserWarning):
        with torch.npu.sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False):
            assert not torch.backends.cuda.mem_efficient_sdp_enabled() and torch.backends.cuda.math_sdp_enabled()
    assert torch.backends.cuda.mem_efficient_sdp_enabled()  # put back
    with pytest.warns(UserWarning, match="isn't implemented"):
        assert torch.npu.preferred_linalg_library() == torch._C._LinalgBackend.Default


def test_fft_plan_cache_settings_are_checked_as_real_torch_npu_checks_them():
    cache = torch.npu.backends.fft_plan_cache
    assert cache.max_size == 10
    try:
        cache.max_size = 20
        assert cache.max_size == 20
        for bad in (0, 100):
            with pytest.raises(RuntimeError, match="invalid value of cache_size, expected 1 to 99"):
                cache.max_size = bad
        assert cache.max_size == 20
    finally:
        cache.max_size = 10
    torch.fft.ifft(torch.randn(1, 7, dtype=torch.complex64).npu())
    assert cache.size == 0  # ATen's FFT kernels keep no npu plans
    cache.clear()
    with pytest.raises(RuntimeError, match="read-only"):
        cache.size = 1
    assert torch.npu.backends.sdp_kernel is torch.npu.sdp_kernel


def test_every_torch_npu_name_is_documented_and_operators_show_their_schemas():
    import torch_npu
    undocumented = [name for name in torch_npu.__all__ if getattr(torch_npu, name).__doc__ is None]
    assert not undocumented
    doc = torch_npu.npu_format_cast.__doc__
    assert "npu::npu_format_cast.Tensor(Tensor self, Tensor dst" in doc  # every overload's schema
    assert str(torch.ops.npu.npu_rms_norm.default._schema) in torch_npu.npu_rms_norm.__doc__
