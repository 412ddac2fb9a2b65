"""Ascend C kernels compiled with g++ against torch_npu/include/ascendc and run on the host.

Each C++ driver in tests/ascendc/ runs sample-like kernels (tests/ascendc/kernels/*.asc)
through the stub host interface (tests/ascendc/host_stub.cpp) and compares them with
the formula computed in plain C++; it exits nonzero on any failed check. This file
rewrites the kernels' <<<>>> launches (torch_npu/utils/_ascendc_source.py), compiles
every driver once per session (two at a time), runs them, and asserts on what they
print: the checks passed, the rules vNPU enforces failed with their messages, and the
alignment warning appeared once per kernel, not once per call.

No torch is needed by the drivers; the rewriter is loaded by file path so that it
does not import the torch_npu package either.
"""

import concurrent.futures
import importlib.util
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ASCENDC_TESTS = ROOT / "tests" / "ascendc"
INCLUDE = ROOT / "torch_npu" / "include" / "ascendc"

# Driver -> optimization level. test_add measures speed, so it gets -O2 like a real
# build; the others only check results and compile faster at -O1.
DRIVERS = {
    "test_add": "-O2",
    "test_errors": "-O1",
    "test_vector_kernels": "-O1",
    "test_cast": "-O1",
    "test_matmul": "-O1",
}

CXX = os.environ.get("CXX", "g++")
CXXFLAGS = ["-std=c++17", "-Wall", "-Wno-unused-parameter", "-pthread"]

pytestmark = pytest.mark.skipif(shutil.which(CXX) is None, reason=f"{CXX} not found")


def _load_rewriter():
    spec = importlib.util.spec_from_file_location(
        "_ascendc_source", ROOT / "torch_npu" / "utils" / "_ascendc_source.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(cmd, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="session")
def drivers(tmp_path_factory):
    """Builds every driver once: {name: path to the executable}."""
    out = tmp_path_factory.mktemp("ascendc")
    rewriter = _load_rewriter()
    kernels = out / "kernels"
    kernels.mkdir()
    for src in (ASCENDC_TESTS / "kernels").iterdir():
        text = src.read_text()
        if src.suffix == ".asc":
            text = rewriter.rewrite_launches(text)
        (kernels / src.name).write_text(text)
    includes = [f"-I{kernels}", f"-I{ASCENDC_TESTS}", f"-I{INCLUDE}"]

    stub = out / "host_stub.o"
    r = _run([CXX, *CXXFLAGS, "-O2", *includes, "-c", str(ASCENDC_TESTS / "host_stub.cpp"), "-o", str(stub)])
    assert r.returncode == 0, r.stderr

    def build(name):
        exe = out / name
        r = _run([CXX, *CXXFLAGS, DRIVERS[name], *includes, str(ASCENDC_TESTS / f"{name}.cpp"), str(stub),
                  "-o", str(exe)])
        return name, exe, r

    built = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for name, exe, r in pool.map(build, DRIVERS):
            built[name] = (exe, r)
    return built


def _run_driver(drivers, name):
    exe, build = drivers[name]
    assert build.returncode == 0, f"{name} did not compile:\n{build.stderr[-6000:]}"
    r = _run([str(exe)], timeout=120)
    print(r.stdout)
    assert r.returncode == 0, f"{name} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    assert f"{name}: all checks passed" in r.stdout
    return r


def test_headers_compile_warning_free(tmp_path):
    src = tmp_path / "headers.cpp"
    src.write_text('#include "kernel_operator.h"\n#include "lib/matmul_intf.h"\n'
                   '#include "kernel_tiling/kernel_tiling.h"\n#include "register/tilingdata_base.h"\n'
                   "int main() { return 0; }\n")
    r = _run([CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", f"-I{INCLUDE}", str(src)])
    assert r.returncode == 0, r.stderr


def test_vector_add(drivers):
    r = _run_driver(drivers, "test_add")
    assert "[vNPU] warning" not in r.stderr, r.stderr
    # The speed of the 16M-element add is printed, never asserted (a timing is not a test).
    assert "vector add 16M fp32, blockDim 8" in r.stdout


def test_vector_kernels(drivers):
    r = _run_driver(drivers, "test_vector_kernels")
    assert "[vNPU] warning" not in r.stderr, r.stderr


def test_cast_rounding_modes(drivers):
    r = _run_driver(drivers, "test_cast")
    assert "[vNPU] warning" not in r.stderr, r.stderr


def test_matmul(drivers):
    r = _run_driver(drivers, "test_matmul")
    assert "[vNPU] warning" not in r.stderr, r.stderr


def test_bad_inputs_fail_with_their_messages(drivers):
    r = _run_driver(drivers, "test_errors")
    expected = [
        # UB capacity: requested bytes and capacity
        "TPipe::InitBuffer(TQue<VECOUT>, num 2, len 65536): buffer size is 131072 bytes, exceeds the limit",
        "UB holds 196608 bytes per AI core",
        # DataCopy alignment in strict mode: the call and the length
        "DataCopy GM->local: count 100 of float is 400 bytes, not a multiple of 32",
        # out-of-bounds GM: kernel, offset and allocation size
        "read_at block 0: DataCopy GM->local: GM access out of bounds: bytes [16256, 16512) "
        "of an allocation of 16384 bytes",
        # queue misuse
        "TQue<VECIN>::DeQue: the queue is empty",
        "TQue<VECIN>::EnQue: usedCount is 1, which exceed depth limits 1",
        "TQue<VECIN>::AllocTensor: all 2 buffers of the queue are in use",
        "TQue<VECIN>::FreeTensor: the tensor does not belong to this queue",
        # blockDim: kernel, value and limit
        "launch of kernel ub_overflow: blockDim is 49, which must be in [1, 48]",
        "launch of kernel cube_noop: blockDim is 25, which must be in [1, 24]",
        # the first failing block names itself; the others finish
        "fail_in_block3 block 3: assertion failed",
    ]
    for text in expected:
        assert text in r.stdout, f"missing from test_errors output: {text}"
    # Default mode: the misaligned copy kernel copies twice (in and out, twice over) but
    # warns once.
    warnings = [line for line in r.stderr.splitlines() if line.startswith("[vNPU] warning: kernel copy_count:")]
    assert len(warnings) == 1, r.stderr
    assert "not a multiple of 32" in warnings[0] and "rounded down" in warnings[0]
