"""torch.npu.memory.NPUPluggableAllocator: npu memory from a user's C functions.

The allocator library (tests/cpp_extensions/pluggable_allocator.cpp) is built
once against torch_npu's headers and -lascendcl, as a user would; each
scenario runs in a fresh process, since the allocator can only be swapped
before the first npu allocation.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch.utils.cpp_extension

from torch_npu.utils import cpp_extension as npu_cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))

PRELUDE = """
import ctypes, gc, warnings
import torch, torch_npu
from torch_npu.npu.memory import NPUPluggableAllocator, change_current_allocator
LIBRARY = {library!r}
lib = ctypes.CDLL(LIBRARY)
def fn(name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
def raises(text, call, *args):
    try:
        call(*args)
    except RuntimeError as e:
        assert text in str(e), e
        return
    raise AssertionError("no error: " + text)
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    build = tmp_path_factory.mktemp("pluggable_allocator")
    lib_dirs = npu_cpp_extension.library_paths()
    torch.utils.cpp_extension.load(
        name="vnpu_test_allocator", sources=[os.path.join(HERE, "cpp_extensions", "pluggable_allocator.cpp")],
        extra_include_paths=npu_cpp_extension.include_paths(), extra_cflags=["-O1"],
        extra_ldflags=[f"-L{lib_dirs[0]}", "-lascendcl"], build_directory=str(build), is_python_module=False)
    return str(build / "vnpu_test_allocator.so")


def _run(library, body):
    script = PRELUDE.format(library=library) + textwrap.dedent(body)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout + run.stderr


def test_tensors_live_in_the_pluggable_allocators_memory_and_equal_cpu(library):
    _run(library, """
        assert torch.npu.get_allocator_backend() == "native"
        change_current_allocator(NPUPluggableAllocator(LIBRARY, "test_alloc", "test_free"))
        assert torch.npu.get_allocator_backend() == "pluggable"
        assert torch_npu.npu.memory._get_current_allocator().allocator() is not None
        torch.manual_seed(0)
        a, b = torch.randn(256, 256), torch.randn(256, 256)
        x, y = a.npu(), b.npu()
        out = (x @ y).relu() + x.sum()
        side = torch.npu.Stream()
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            z = x * 3
        torch.npu.current_stream().wait_stream(side)
        torch.testing.assert_close(out.cpu(), (a @ b).relu() + a.sum())
        torch.testing.assert_close(z.cpu(), a * 3)
        allocs = lib.test_allocs()
        assert allocs >= 4 and lib.test_stream_checks() == allocs, (allocs, lib.test_stream_checks())
        # Tensors die on stream workers too (a queued kernel held the last
        # reference): those frees run at the next allocation on a host thread.
        for _ in range(20):
            t = torch.ones(1000, device="npu")
            t = t * 2
        del x, y, out, z, t
        gc.collect()
        torch.npu.synchronize()
        keep = torch.empty(1, device="npu")
        assert lib.test_frees() == lib.test_allocs() - 1, (lib.test_frees(), lib.test_allocs())
        raises("Can't swap an already initialized allocator", change_current_allocator,
               NPUPluggableAllocator(LIBRARY, "test_alloc", "test_free"))
        """)


def test_swapping_after_the_first_allocation_is_refused(library):
    _run(library, """
        x = torch.zeros(10, device="npu")
        raises("Can't swap an already initialized allocator", change_current_allocator,
               NPUPluggableAllocator(LIBRARY, "test_alloc", "test_free"))
        assert torch.npu.get_allocator_backend() == "native" and lib.test_allocs() == 0
        assert torch.equal(x.cpu(), torch.zeros(10))
        """)


def test_statistics_and_hooks_come_from_the_allocators_functions(library):
    out = _run(library, """
        alloc = NPUPluggableAllocator(LIBRARY, "test_alloc", "test_free")
        change_current_allocator(alloc)
        x = torch.ones(1024, device="npu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.npu.memory_stats()
            torch.npu.reset_peak_memory_stats()
        assert any("set_get_device_stats_fn" in str(w.message) for w in caught), [str(w.message) for w in caught]
        assert any("set_reset_peak_status_fn" in str(w.message) for w in caught)
        alloc.allocator().set_get_device_stats_fn(fn("test_device_stats"))
        alloc.allocator().set_reset_peak_status_fn(fn("test_reset_peak"))
        alloc.allocator().set_record_stream_fn(fn("test_record_stream"))
        assert torch.npu.memory_stats()["num_alloc_retries"] == 7
        assert torch.npu.memory_allocated() == 4096
        torch.npu.reset_peak_memory_stats()
        assert lib.test_peak_resets() == 1
        side = torch.npu.Stream()
        x.record_stream(side)
        assert lib.test_record_streams() == 1
        alloc.allocator().set_erase_stream_fn(fn("test_erase_stream"))
        torch_npu.erase_stream(x, side)
        assert lib.test_record_streams() == 0
        raises("not supported on vNPU", alloc.allocator().set_base_alloc_fn, fn("test_free"))
        raises("not supported on vNPU", alloc.allocator().set_begin_allocate_to_pool, fn("test_free"))
        # caching_allocator_alloc / _delete go through it too.
        before = lib.test_allocs()
        p = torch.npu.caching_allocator_alloc(512)
        assert lib.test_allocs() == before + 1
        torch.npu.caching_allocator_delete(p)
        """)


def test_an_allocation_the_allocator_refuses_is_out_of_memory(library):
    _run(library, """
        change_current_allocator(NPUPluggableAllocator(LIBRARY, "test_alloc_small_only", "test_free"))
        small = torch.ones(16, device="npu")
        try:
            torch.empty(1 << 22, device="npu")
            raise AssertionError("no error")
        except torch.OutOfMemoryError as e:
            assert "returned NULL" in str(e), e
        assert torch.equal((small + 1).cpu(), torch.full((16,), 2.0))
        """)


def test_bad_library_or_function_names_raise(library):
    _run(library, """
        try:
            NPUPluggableAllocator(LIBRARY, "no_such_alloc", "test_free")
            raise AssertionError("no error")
        except AttributeError as e:
            assert "no_such_alloc" in str(e)
        try:
            change_current_allocator("pluggable")
            raise AssertionError("no error")
        except TypeError as e:
            assert "NPUPluggableAllocator" in str(e)
        """)


def test_a_mem_pool_of_the_allocator_takes_its_segments_from_it(library):
    # torch.npu.MemPool(allocator) (vLLM's sleep mode): tensors made inside
    # use_mem_pool live in segments the user's alloc made, which go back
    # through its free once the pool is released and the cache emptied,
    # while the other tensors stay with vNPU's caching allocator.
    _run(library, """
        allocator = NPUPluggableAllocator(LIBRARY, "test_alloc", "test_free")
        pool = torch.npu.MemPool(allocator.allocator())
        assert pool.allocator is allocator.allocator()
        before = torch.ones(8, device="npu")
        assert lib.test_allocs() == 0
        a = torch.randn(300, 300)
        with torch.npu.use_mem_pool(pool):
            x = a.npu()
            y = (x @ x).relu()
        assert lib.test_allocs() >= 1, lib.test_allocs()
        ordinary = torch.ones(8, device="npu") * 2
        allocs = lib.test_allocs()
        torch.testing.assert_close(y.cpu(), (a @ a).relu())
        assert torch.equal(ordinary.cpu(), torch.full((8,), 2.0))
        segments = pool.snapshot()
        assert segments and all(tuple(s["segment_pool_id"]) == pool.id for s in segments), segments
        everything = torch.npu.memory_snapshot()
        assert len([s for s in everything if tuple(s["segment_pool_id"]) == pool.id]) == len(segments)
        assert lib.test_allocs() == allocs and lib.test_frees() == 0
        del x, y, pool
        gc.collect()
        torch.npu.synchronize()
        torch.npu.empty_cache()
        assert lib.test_frees() == lib.test_allocs(), (lib.test_frees(), lib.test_allocs())
        """)


def test_a_mem_pool_takes_only_a_pluggable_allocator():
    import torch_npu  # noqa: F401
    with pytest.raises(TypeError, match="expects the allocator of an NPUPluggableAllocator"):
        torch.npu.MemPool(allocator=object())
