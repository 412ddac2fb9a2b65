"""C++ extensions against torch_npu's public C++ API (issue: custom operators).

An extension written for torch_npu (tests/cpp_extensions/npu_api_extension.cpp:
NPUStream, NPUGuard, NPUEvent, NPUGraph, NPUCachingAllocator, OpCommand::
RunOpApi, OpHook, from_blob, NPUFormat and the ACL runtime API) is built the
two ways users build one, NpuExtension in a setup.py and torch.utils.
cpp_extension.load, and each of its functions is checked against the same
work done from Python.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_npu
from torch_npu.utils import cpp_extension as npu_cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "cpp_extensions", "npu_api_extension.cpp")


def _build_env():
    # torch's BuildExtension uses ccache by itself when it is on PATH.
    env = dict(os.environ)
    env.setdefault("MAX_JOBS", "2")
    return env


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    """The extension, built with NpuExtension through setup.py (build_ext --inplace)."""
    root = tmp_path_factory.mktemp("npu_api_ext")
    (root / "setup.py").write_text(textwrap.dedent(f"""
        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension
        from torch_npu.utils.cpp_extension import NpuExtension
        setup(name="npu_api_ext",
              ext_modules=[NpuExtension("npu_api_ext", [{SOURCE!r}], extra_compile_args=["-O1"])],
              cmdclass={{"build_ext": BuildExtension}})
        """))
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root, env=_build_env(),
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    sys.path.insert(0, str(root))
    try:
        import npu_api_ext
    finally:
        sys.path.remove(str(root))
    return npu_api_ext


def test_npu_extension_has_torch_npu_include_dirs_and_libraries():
    extension = npu_cpp_extension.NpuExtension("x", ["x.cpp"])
    for lib in ("c10", "torch", "torch_cpu", "torch_python", "torch_npu"):
        assert lib in extension.libraries
    root = os.path.dirname(torch_npu.__file__)
    assert os.path.join(root, "include") in extension.include_dirs
    assert os.path.join(root, "lib") in extension.library_dirs
    assert os.path.isfile(os.path.join(root, "include", "torch_npu", "csrc", "core", "npu", "NPUStream.h"))


def test_the_extension_links_against_libtorch_npu(ext):
    dynamic = subprocess.run(["readelf", "-d", ext.__file__], capture_output=True, text=True).stdout
    assert "[libtorch_npu.so]" in dynamic


def test_run_op_api_work_is_ordered_on_the_current_stream(ext):
    x = torch.randn(1000)
    bias = torch.randn(1000)
    xn, bn = x.npu(), bias.npu()
    ext.sleep_on_stream(50)  # the stream is busy: the op's work must queue behind it
    out = ext.scaled_add(xn, 2.5, bn)
    torch.testing.assert_close(out.cpu(), x * 2.5 + bias)
    # and it is ordered before what follows: an in-place update after it does not leak in
    out2 = ext.scaled_add(xn, 1.0, bn)
    xn.add_(100)
    torch.testing.assert_close(out2.cpu(), x + bias)


def test_a_custom_op_registered_for_privateuse1_runs_through_torch_ops_and_compile(ext):
    x, bias = torch.randn(64), torch.randn(64)
    out = torch.ops.vnpu_ext.scaled_add(x.npu(), 3.0, bias.npu())
    torch.testing.assert_close(out.cpu(), x * 3 + bias)

    def f(a, b):
        return torch.ops.vnpu_ext.scaled_add(a.relu(), 2.0, b) * 2

    compiled = torch.compile(f, backend="aot_eager")  # the extension op stays opaque (a Meta kernel traces it)
    torch.testing.assert_close(compiled(x.npu(), bias.npu()).cpu(), (x.relu() * 2 + bias) * 2)


def test_a_failing_extension_kernel_is_reported_at_sync_and_the_stream_stays_usable(ext):
    ext.failing_op()
    with pytest.raises(RuntimeError, match="failing_op failed.*returned 7"):
        torch.npu.synchronize()
    assert (torch.ones(3).npu() * 2).sum().item() == 6.0


def test_acl_launch_callback_runs_in_stream_order(ext):
    # 1: the callback had not run before the sync (it waited for the sleep) and ran once after
    assert ext.callback_after_sleep(40) == 1


def test_secondary_stream_guard_joins_the_side_stream_into_the_original(ext):
    # the fill on the side stream waits 50 ms there; the read on the original stream must wait for it.
    # Twice: a kernel's first launch runs on the caller (after its stream drains), the second is queued.
    for _ in range(2):
        y, restored = ext.secondary_stream_join(torch.zeros(1000).npu())
        assert restored
        assert torch.equal(y.cpu(), torch.full((1000,), 8.0))


def test_the_npu_generator_is_torch_npus_generator_type_and_gives_dropout_masks(ext):
    # at::check_generator<at_npu::NPUGeneratorImpl> works on the default generator; philox_engine_inputs advances
    # the offset by whole groups of 4; the C++ mask equals the operator's for the same (seed, offset)
    torch.npu.manual_seed(123)
    offset = torch.npu.default_generators[0].get_offset()
    (seed, first, seed2, second), mask = ext.philox_dropout_mask(torch.empty(1).npu(), 100, 0.3)
    assert seed == seed2 == 123 and first == offset and second == first + 12
    expected = torch_npu._npu_dropout_gen_mask(torch.empty(1).npu(), [100], 0.3, seed, first)
    assert torch.equal(mask.cpu(), expected.cpu())


def test_external_acl_streams(ext):
    assert ext.external_stream_roundtrip()


def test_acl_memory_copies_and_their_bounds(ext):
    assert ext.acl_memory_roundtrip([1.5, -2.0, 3.25]) == [1.5, -2.0, 3.25]
    status, message = ext.acl_bad_copy()
    assert status == 100000  # ACL_ERROR_INVALID_PARAM
    assert "runs past the end of its npu allocation of 64 bytes" in message


def test_from_blob_views_npu_memory(ext):
    base = torch.arange(10.0).npu()
    view = ext.view_from_blob(base, 3, 5)
    assert view.device == base.device and view.storage_offset() == 3
    torch.testing.assert_close(view.cpu(), torch.arange(3.0, 8.0))
    base.mul_(2)  # shares the memory
    torch.testing.assert_close(view.cpu(), torch.arange(3.0, 8.0) * 2)
    with pytest.raises(ValueError, match="past the end of its npu allocation"):
        ext.view_from_blob(base, 8, 5)


def test_storage_sizes_of_private_formats(ext):
    torch.npu.config.allow_internal_format = True
    nz = 29
    assert ext.storage_sizes(torch_npu.npu_format_cast(torch.ones(128, 512, dtype=torch.int8).npu(), nz)) == [16, 8, 16, 32]
    assert ext.storage_sizes(torch_npu.npu_format_cast(torch.ones(31, 127, 511, dtype=torch.int8).npu(), nz)) == [31, 16, 8, 16, 32]
    assert ext.storage_sizes(torch_npu.npu_format_cast(torch.ones(128, 512).npu(), nz)) == [32, 8, 16, 16]
    assert ext.storage_sizes(torch.ones(3, 5).npu()) == [3, 5]


def test_allocator_stats_events_graphs_and_generators_match_python(ext):
    keep = torch.empty(1 << 20, device="npu")
    torch.npu.synchronize()
    assert ext.device_stats_allocated(0) == torch.npu.memory_allocated(0)
    assert ext.event_elapsed_ms() >= 15.0  # two events around a 20 ms stream task
    torch.testing.assert_close(ext.graph_double(torch.ones(4).npu()).cpu(), torch.full((4,), 10.0))
    torch.npu.manual_seed(1234)
    assert ext.default_generator_seed() == torch.npu.initial_seed() == 1234
    assert ext.soc_name() == torch.npu.get_device_name(0)
    del keep


def test_init_npu_sets_the_device_and_finalize_npu_returns_cached_memory(ext):
    before = torch.npu.current_device()
    try:
        assert ext.init_npu_and_current("npu:1") == 1 == torch.npu.current_device()
        with pytest.raises(RuntimeError, match="expects an npu device, got cpu"):
            ext.init_npu_and_current("cpu")
        with pytest.raises(RuntimeError, match="Invalid device ID 99"):
            ext.init_npu_index(99)
        x = torch.ones(1 << 20, device="npu:1")
        del x
        assert torch.npu.memory_reserved(1) > 0
        ext.finalize_npu()
        assert torch.npu.memory_reserved(1) == 0
        assert (torch.ones(3, device="npu:1") + 1).sum().item() == 6  # still usable
    finally:
        torch.npu.set_device(before)


def test_an_extension_built_against_another_torch_is_named_at_load(ext, capfd):
    # The check every extension runs when loaded (NPUMacros.h), with another version.
    assert ext.check_torch_version(torch.__version__.split("+")[0])
    assert not ext.check_torch_version("2.99.0")
    err = capfd.readouterr().err
    assert "built against torch 2.99.0, but this process runs torch 2.13.0" in err
    assert "rebuild the extension" in err
    assert not ext.check_torch_version("2.99.0")  # reported once
    assert "2.99.0" not in capfd.readouterr().err


def test_the_aoti_c_shim_for_npu_runs_ops_on_npu(ext):
    x = torch.randn(5, 7)
    out = ext.shim_cumsum(x.npu(), 1)
    assert out.device.type == "npu"
    torch.testing.assert_close(out.cpu(), torch.cumsum(x, 1))


def test_op_hooks_count_begin_inputs_outputs_end_only_while_enabled(ext):
    ext.register_op_hooks()
    ext.reset_hook_calls()
    a = torch.tensor([4, 4]).npu()
    torch.add(a, a)
    assert ext.hook_calls() == 0
    torch.npu.set_option({"OP_HOOK_ENABLE": "enable"})
    try:
        torch.add(a, a)
        assert ext.hook_calls() == 5  # begin, two inputs, one output, end
    finally:
        torch.npu.set_option({"OP_HOOK_ENABLE": "disable"})
    torch.add(a, a)
    assert ext.hook_calls() == 5


def test_op_hooks_around_collectives_begin_at_issue_and_end_at_wait(ext):
    # As ProcessGroupHCCL: begin(torch_npu's name) and pre(t) per tensor when
    # a collective is issued, end() when its work is waited for; the
    # operator-level hook does not count collectives a second time.
    import torch.distributed as dist

    pg = torch_npu._C._distributed_c10d.ProcessGroupHCCL(dist.HashStore(), 0, 1)
    x = torch.ones(4, device="npu")
    ext.register_op_hooks()
    ext.reset_hook_calls()
    torch.npu.set_option({"OP_HOOK_ENABLE": "enable"})
    try:
        work = pg.allreduce([x])
        assert ext.hook_log() == ["begin:allreduce", "pre"]
        work.wait()
        assert ext.hook_log() == ["begin:allreduce", "pre", "end"]
        ext.reset_hook_calls()
        out = torch.empty(4, device="npu")
        pg._allgather_base(out, x).wait()
        assert ext.hook_log() == ["begin:_allgather_base", "pre", "pre", "end"]
    finally:
        torch.npu.set_option({"OP_HOOK_ENABLE": "disable"})
    ext.reset_hook_calls()
    pg.allreduce([x]).wait()
    assert ext.hook_log() == []
    torch.testing.assert_close(out.cpu(), torch.ones(4))


def test_an_attached_trace_tracker_sees_segments_and_allocations(ext):
    # In a fresh process: a tracker stays attached for the process's life.
    code = f"""
import gc, sys
sys.path.insert(0, {os.path.dirname(ext.__file__)!r})
import torch, torch_npu, npu_api_ext as ext
MB = 1 << 20
torch.empty(1, device="npu")
ext.attach_trace_tracker(24 * MB)

def make():
    return torch.empty(24 * MB, dtype=torch.uint8, device="npu")

x = make()  # a large block: a segment of its own
del x
torch.npu.empty_cache()
print("PLAIN", ext.trace_tracker_counts())
torch.npu.memory._record_memory_history("all", context="alloc", stacks="python", max_entries=64)
x = make()
del x
torch.npu.empty_cache()
print("HISTORY", ext.trace_tracker_counts())
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plain = eval(proc.stdout.split("PLAIN ")[1].splitlines()[0])
    history = eval(proc.stdout.split("HISTORY ")[1].splitlines()[0])
    # segment allocs, segment frees, tracked allocs, ... with a stack, tracked frees, history on
    assert plain[0] >= 1 and plain[1] >= 1 and plain[2:] == [1, 0, 1, 0], plain
    assert history[0] > plain[0] and history[1] > plain[1], history
    assert history[2:] == [2, 1, 2, 1], history  # the stack came with the second allocation only


def test_jit_load_of_a_one_op_extension(tmp_path):
    """torch.utils.cpp_extension.load with torch_npu's include and library paths,
    as documented in docs/custom_ops.md."""
    source = tmp_path / "jit_double.cpp"
    source.write_text(textwrap.dedent("""
        #include <ATen/ops/empty_like.h>
        #include <torch/library.h>
        #include "torch_npu/csrc/core/npu/NPUStream.h"
        #include "torch_npu/csrc/framework/OpCommand.h"

        at::Tensor jit_double(const at::Tensor& x) {
          at::Tensor xc = x.contiguous();
          at::Tensor out = at::empty_like(xc);
          at_npu::native::OpCommand::RunOpApi("jit_double", [xc, out]() -> int {
            const float* in = xc.data_ptr<float>();
            float* o = out.data_ptr<float>();
            for (int64_t i = 0; i < xc.numel(); ++i) o[i] = 2 * in[i];
            return 0;
          });
          return out;
        }
        TORCH_LIBRARY(vnpu_jit, m) { m.def("jit_double(Tensor x) -> Tensor"); }
        TORCH_LIBRARY_IMPL(vnpu_jit, PrivateUse1, m) { m.impl("jit_double", TORCH_FN(jit_double)); }
        """))
    from torch.utils.cpp_extension import load
    load("vnpu_jit", [str(source)], extra_include_paths=npu_cpp_extension.include_paths(),
         extra_ldflags=[f"-L{p}" for p in npu_cpp_extension.library_paths()] + ["-ltorch_npu"],
         build_directory=str(tmp_path), is_python_module=False, verbose=False)
    x = torch.randn(100)
    torch.testing.assert_close(torch.ops.vnpu_jit.jit_double(x.npu()).cpu(), x * 2)


def test_the_generator_class_is_torch_npus_with_its_methods(ext):
    # A generator of the extension's own: philox_npu_state hands out (seed, offset) and moves the offset by
    # groups of 4; a clone continues from the same state; the philox offset is the generator's offset.
    seed, first, second, from_copy, offset, get_offset, captured = ext.own_generator_draws(77)
    assert (seed, first, second, from_copy, offset, get_offset, captured) == (77, 0, 12, 12, 100, 100, 0)
    # The default generator: what torch.npu's state says.
    torch.npu.manual_seed(5)
    before = torch.npu.default_generators[0].get_offset()
    assert ext.default_philox_offset() == before and torch.npu.default_generators[0].get_offset() == before + 4
    # During a capture a fixed (seed, offset) would replay the same numbers: refused.
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="philox_npu_state is not supported during an NPU graph capture"):
        with torch.npu.graph(g):
            ext.default_philox_offset()


def test_npu_hooks_events_sync_debug_and_swapped_memory(ext, capfd):
    assert ext.hooks_are_torch_npus()
    with pytest.raises(RuntimeError, match="NPUEvent::ipc_handle is not supported on the virtual NPU"):
        ext.event_ipc_handle()
    try:
        ext.set_sync_debug_mode_and_sync(1)
        assert torch.npu.get_sync_debug_mode() == 1
        # A pybind11 function does not turn TORCH_WARN into a Python warning: it is printed.
        capfd.readouterr()
        ext.set_sync_debug_mode_and_sync(1)
        assert "Warning: called a synchronizing NPU operation" in capfd.readouterr().err
        with pytest.raises(RuntimeError, match="called a synchronizing NPU operation"):
            ext.set_sync_debug_mode_and_sync(2)
    finally:
        torch.npu.set_sync_debug_mode(0)
    ext.set_sync_debug_mode_and_sync(0)  # disabled: nothing
    t = ext.swapped([3, 5])
    assert t.device.type == "npu" and t.dtype == torch.float16 and t.shape == (3, 5)


def test_op_plugin_ops_h_and_the_aclop_builder(ext):
    x = torch.empty(1).npu()
    want = torch_npu._npu_dropout_gen_mask(x, [200], 0.25, 11, 4)
    assert torch.equal(ext.ops_h_dropout_mask(x, 200, 0.25, 11, 4).cpu(), want.cpu())
    a, b = torch.ones(4).npu(), torch.ones(4).npu()
    message = ext.aclop_builder(a, b)
    assert "OpCommand::Run(Add): running CANN operators by name" in message and "not supported on vNPU" in message
    assert ext.custom_handler_sync(a) == 1
