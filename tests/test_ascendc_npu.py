"""Ascend C kernels on npu tensors (issue: custom operators).

CANN-style sample kernels (tests/ascendc/kernels: vector add with tiling,
multi-core and double buffering; LeakyRelu; a multi-core atomic sum; row
softmax; a Cube matmul through the high-level Matmul API) are built with
NpuExtension into PyTorch operators (tests/ascendc/npu_ops/ascendc_ops.cpp)
and compared with the same formula on cpu: launched on the current stream,
ordered with torch's kernels, differentiable through a registered backward,
opaque under torch.compile. Bad launches fail with the cause named and leave
the process and the stream usable.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "ascendc", "kernels")
OPS = os.path.join(HERE, "ascendc", "npu_ops")
SOURCES = [os.path.join(OPS, "ascendc_ops.cpp"), os.path.join(OPS, "matmul_tiling.cpp")] + [
    os.path.join(KERNELS, name) for name in
    ("add_custom.asc", "leaky_relu.asc", "softmax.asc", "reduce_sum.asc", "matmul_custom.asc")]


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    root = tmp_path_factory.mktemp("ascendc_ops")
    (root / "setup.py").write_text(textwrap.dedent(f"""
        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension
        from torch_npu.utils.cpp_extension import NpuExtension
        setup(name="ascendc_ops",
              ext_modules=[NpuExtension("ascendc_ops_ext", {SOURCES!r}, extra_compile_args=["-O2"])],
              cmdclass={{"build_ext": BuildExtension}})
        """))
    env = dict(os.environ, MAX_JOBS="2")
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root, env=env,
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    # A library of operators, not a Python module: torch.ops loads it.
    (library,) = root.glob("ascendc_ops_ext*.so")
    torch.ops.load_library(str(library))
    return torch.ops.ascendc_ops


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_vector_add_with_tiling_multi_core_and_double_buffering(ops, dtype):
    n = 8 * 8 * 2 * 256  # blockDim 8, 8 tiles per core, 2 buffers, 256-element tiles
    x, y = torch.randn(n).to(dtype), torch.randn(n).to(dtype)
    z = ops.add_custom(x.npu(), y.npu())
    torch.testing.assert_close(z.cpu(), x + y)


def test_kernels_run_in_stream_order_with_torch_kernels(ops):
    n = 8 * 8 * 2 * 64
    x, y = torch.randn(n), torch.randn(n)
    xn, yn = x.npu(), y.npu()
    torch.npu._sleep(20000)    # the stream is busy
    xn.mul_(3)                 # queued before the kernel: it must see it
    z = ops.add_custom(xn, yn)
    xn.zero_()                 # queued after: it must not
    torch.testing.assert_close(z.cpu(), x * 3 + y)


def test_leaky_relu_forward_and_backward_match_cpu(ops):
    x = torch.randn(8 * 4 * 2 * 64 * 2)
    xn = x.npu().requires_grad_()
    y = ops.leaky_relu_custom(xn, 0.1)
    xc = x.clone().requires_grad_()
    yc = F.leaky_relu(xc, 0.1)
    torch.testing.assert_close(y.detach().cpu(), yc.detach())
    g = torch.randn_like(x)
    y.backward(g.npu())
    yc.backward(g)
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)


def test_add_backward_flows_to_both_inputs(ops):
    n = 8 * 8 * 2 * 8
    a = torch.randn(n, device="npu", requires_grad=True)
    b = torch.randn(n, device="npu", requires_grad=True)
    (ops.add_custom(a, b) * 2).sum().backward()
    torch.testing.assert_close(a.grad.cpu(), torch.full((n,), 2.0))
    torch.testing.assert_close(b.grad.cpu(), torch.full((n,), 2.0))


def test_softmax_rows(ops):
    x = torch.randn(37, 64)
    torch.testing.assert_close(ops.softmax_custom(x.npu()).cpu(), torch.softmax(x, dim=1))


def test_multi_core_atomic_sum(ops):
    x = torch.randn(8 * 512 * 4)
    torch.testing.assert_close(ops.sum_custom(x.npu()).cpu(), x.sum(), rtol=1e-5, atol=1e-4)


def test_cube_matmul_through_the_matmul_api(ops):
    a = torch.randn(64, 96).half()
    b = torch.randn(96, 128).half()
    c = ops.matmul_custom(a.npu(), b.npu())
    torch.testing.assert_close(c.cpu(), a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def test_custom_ops_are_opaque_under_torch_compile(ops):
    n = 8 * 4 * 2 * 64 * 2

    def f(x, y):
        return ops.leaky_relu_custom(ops.add_custom(x * 2, y), 0.2).sum() + 1

    x, y = torch.randn(n), torch.randn(n)
    compiled = torch.compile(f, backend="inductor")
    expected = F.leaky_relu(x * 2 + y, 0.2).sum() + 1
    torch.testing.assert_close(compiled(x.npu(), y.npu()).cpu(), expected, rtol=1e-4, atol=1e-3)


def test_bad_launches_name_the_cause_and_the_stream_stays_usable(ops):
    x = torch.randn(8 * 8 * 2 * 8).npu()
    with pytest.raises(Exception, match=r"blockDim.*0|0.*blockDim"):
        ops.add_custom(x, x, block_dim=0)
    with pytest.raises(Exception, match="48"):  # a 910B2 has 48 vector cores
        ops.add_custom(x, x, block_dim=64)
    # One tile of 64K floats per buffer: 6 x 256 KiB, far over the 192 KiB Unified Buffer.
    big = torch.randn(1 * 1 * 2 * 65536).npu()
    ops.add_custom(big, big, block_dim=1, tile_num=1)
    with pytest.raises(RuntimeError, match="(?i)unified buffer|UB"):
        torch.npu.synchronize()
    torch.testing.assert_close(ops.add_custom(x, x).cpu(), (x * 2).cpu())
