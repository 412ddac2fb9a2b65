"""NNAL's ATB C++ API on the virtual NPU (torch_npu/_cann/nnal/atb, csrc/opapi/atb_*.cpp).

An extension (tests/cpp_extensions/atb_extension.cpp) creates each operation
from its parameter struct and runs it the two ways Ascend code does: inside
an OpCommand custom handler (MindSpeed's RunAtbCmd) and from the host
thread. Each result is compared with the same math on cpu (autograd for the
backward operations).
"""

import os

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401  (the npu device)
from torch_npu.utils import cpp_extension as npu_cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "cpp_extensions", "atb_extension.cpp")

# atb::infer::ActivationType and LinearParallelParam::ParallelType values.
RELU, GELU, FAST_GELU, SWISH, LOG, SWIGLU_FORWARD, SWIGLU_BACKWARD, SIGMOID, FASTER_GELU = range(1, 10)
LINEAR_ALL_REDUCE, LINEAR_REDUCE_SCATTER, ALL_GATHER_LINEAR, PURE_LINEAR, ALL_GATHER_LINEAR_REDUCE_SCATTER = range(5)
RMS_NORM_NORM, RMS_NORM_PRENORM = 1, 2


@pytest.fixture(scope="module")
def ext_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("atb_ext")


@pytest.fixture(scope="module")
def ext(ext_dir):
    from torch.utils.cpp_extension import load
    build = ext_dir
    atb = os.environ["ATB_HOME_PATH"]
    return load("vnpu_atb_ext", [SOURCE], extra_include_paths=npu_cpp_extension.include_paths()
                + [os.path.join(atb, "include")],
                extra_cflags=["-O1"],
                extra_ldflags=[f"-L{p}" for p in npu_cpp_extension.library_paths()]
                + ["-ltorch_npu", f"-L{atb}/lib", "-latb", "-lasdops", "-llcal"],
                build_directory=str(build), verbose=False)


@pytest.mark.parametrize("in_handler", [True, False])
def test_linear_with_accumulation_equals_cpu(ext, in_handler):
    # MindSpeed's fused gradient accumulation: grad += grad_output^T @ input, in fp32
    grad_output, total_input = torch.randn(16, 8), torch.randn(16, 12)
    main_grad = torch.randn(8, 12)
    accum = main_grad.npu()
    out = ext.linear(grad_output.npu(), total_input.npu(), None, accum, True, False, in_handler)
    assert out.data_ptr() == accum.data_ptr()
    torch.testing.assert_close(accum.cpu(), main_grad + grad_output.t() @ total_input)
    # a plain linear layer: x @ w^T + b, in x's dtype
    x, w, b = (torch.randn(5, 12, dtype=torch.bfloat16), torch.randn(7, 12, dtype=torch.bfloat16),
               torch.randn(7, dtype=torch.bfloat16))
    y = ext.linear(x.npu(), w.npu(), b.npu(), None, False, True, in_handler)
    torch.testing.assert_close(y.cpu(), (x.float() @ w.float().t() + b.float()).to(torch.bfloat16))


def test_setup_refuses_shapes_that_do_not_multiply(ext, capfd):
    with pytest.raises(RuntimeError, match="LinearOperation Setup returned 1"):
        ext.linear(torch.randn(4, 3).npu(), torch.randn(4, 5).npu(), None, None, False, True, False)
    assert "op(x) [4, 3] and op(weight) [5, 4] do not multiply" in capfd.readouterr().err


def rms_norm_reference(x, gamma, eps, gemma=False):
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    rstd = torch.rsqrt(x.float().pow(2).mean(dims, keepdim=True) + eps)
    g = gamma.float() + 1 if gemma else gamma.float()
    return (x.float() * rstd * g).to(x.dtype), rstd


@pytest.mark.parametrize("in_handler", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_and_its_backward_equal_cpu_autograd(ext, in_handler, dtype):
    # MindSpeed's ATB rms_norm op: forward with rstd, backward from it
    x = torch.randn(3, 5, 16, dtype=dtype)
    gamma = torch.randn(16, dtype=dtype)
    y, rstd = ext.rms_norm(x.npu(), gamma.npu(), 1e-6, RMS_NORM_NORM, False, True, in_handler)
    y_ref, rstd_ref = rms_norm_reference(x, gamma, 1e-6)
    assert rstd.shape == (3, 5, 1) and rstd.dtype == torch.float32
    torch.testing.assert_close(rstd.cpu(), rstd_ref)
    torch.testing.assert_close(y.cpu(), y_ref)

    dy = torch.randn(3, 5, 16, dtype=dtype)
    dx, dgamma = ext.rms_norm_backward(dy.npu(), x.npu(), rstd, gamma.npu(), in_handler)
    xc, gc = x.float().requires_grad_(), gamma.float().requires_grad_()
    (xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + 1e-6) * gc).backward(dy.float())
    assert dx.dtype == dtype and dgamma.dtype == torch.float32
    tol = {} if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(dx.cpu(), xc.grad.to(dtype), **tol)
    torch.testing.assert_close(dgamma.cpu(), gc.grad, rtol=1e-4, atol=1e-4)


def test_rms_norm_over_two_dims_and_gemma_model(ext):
    x, gamma = torch.randn(4, 6, 8), torch.randn(6, 8)
    y, rstd = ext.rms_norm(x.npu(), gamma.npu(), 1e-5, RMS_NORM_NORM, False, True, True)
    y_ref, rstd_ref = rms_norm_reference(x, gamma, 1e-5)
    assert rstd.shape == (4, 1, 1)
    torch.testing.assert_close(y.cpu(), y_ref)
    (y,) = ext.rms_norm(x.npu(), gamma.npu(), 1e-5, RMS_NORM_NORM, True, False, True)
    torch.testing.assert_close(y.cpu(), rms_norm_reference(x, gamma, 1e-5, gemma=True)[0])


def test_rms_norm_refuses_what_vnpu_lacks_and_bad_shapes(ext, capfd):
    x, gamma = torch.randn(2, 8).npu(), torch.randn(8).npu()
    with pytest.raises(RuntimeError, match="RmsNormOperation Setup returned 1"):
        ext.rms_norm(x, gamma, 1e-6, RMS_NORM_PRENORM, False, False, True)
    assert "layerType 2 is not supported on vNPU" in capfd.readouterr().err
    with pytest.raises(RuntimeError, match="Setup returned 1"):
        ext.rms_norm(x, torch.randn(4).npu(), 1e-6, RMS_NORM_NORM, False, True, True)
    assert "must equal the last dims of x [2, 8]" in capfd.readouterr().err


@pytest.mark.parametrize("in_handler", [True, False])
@pytest.mark.parametrize("dim", [-1, 0])
def test_swiglu_forward_and_backward_equal_npu_swiglu_and_autograd(ext, in_handler, dim):
    # MindSpeed's ATB swiglu op
    x = torch.randn(6, 10)
    y = ext.activation(SWIGLU_FORWARD, x.npu(), None, dim, 1.0, 0, in_handler)
    torch.testing.assert_close(y.cpu(), torch_npu.npu_swiglu(x.npu(), dim).cpu())
    a, b = x.chunk(2, dim)
    torch.testing.assert_close(y.cpu(), F.silu(a) * b)
    dy = torch.randn(y.shape)
    dx = ext.activation(SWIGLU_BACKWARD, x.npu(), dy.npu(), dim, 1.0, 0, in_handler)
    xc = x.clone().requires_grad_()
    ac, bc = xc.chunk(2, dim)
    (F.silu(ac) * bc).backward(dy)
    torch.testing.assert_close(dx.cpu(), xc.grad)


@pytest.mark.parametrize("kind,reference", [
    (RELU, torch.relu),
    (GELU, lambda x: F.gelu(x, approximate="tanh")),
    (FAST_GELU, lambda x: x * torch.sigmoid(1.702 * x)),
    (FASTER_GELU, lambda x: x * torch.sigmoid(1.702 * x)),
    (SWISH, lambda x: x * torch.sigmoid(0.5 * x)),
    (LOG, torch.log),
    (SIGMOID, torch.sigmoid),
])
def test_elementwise_activations_equal_their_formulas(ext, kind, reference):
    x = torch.rand(4, 9) + 0.1 if kind == LOG else torch.randn(4, 9)
    y = ext.activation(kind, x.npu(), None, -1, 0.5, 0, True)
    torch.testing.assert_close(y.cpu(), reference(x))


def test_gelu_none_mode_is_erf_and_bad_types_are_refused(ext, capfd):
    x = torch.randn(4, 9)
    torch.testing.assert_close(ext.activation(GELU, x.npu(), None, -1, 1.0, 1, False).cpu(), F.gelu(x))
    with pytest.raises(RuntimeError, match="ActivationOperation Setup returned 1"):
        ext.activation(42, x.npu(), None, -1, 1.0, 0, False)
    assert "activationType 42 is not an activation" in capfd.readouterr().err
    with pytest.raises(RuntimeError, match="Setup returned 1"):
        ext.activation(SWIGLU_FORWARD, torch.randn(4, 9).npu(), None, -1, 1.0, 0, False)
    assert "must be even" in capfd.readouterr().err


@pytest.mark.parametrize("in_handler", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_matmul_add_accumulates_each_groups_weight_gradient(ext, in_handler, dtype):
    # MindSpeed's npu_groupmatmul_add_fp32: main_grad[e] += x[rows_e]^T @ dy[rows_e]
    x, dy = torch.randn(20, 6, dtype=dtype), torch.randn(20, 4, dtype=dtype)
    ends = torch.tensor([5, 5, 20])  # the second group is empty
    main_grad = torch.randn(3 * 6, 4)
    grad = main_grad.npu()
    ext.grouped_matmul_add(x.npu(), dy.npu(), ends.npu(), grad, True, in_handler)
    expected = main_grad.view(3, 6, 4).clone()
    for e, (begin, end) in enumerate(zip([0, 5, 5], [5, 5, 20])):
        expected[e] += x[begin:end].float().t() @ dy[begin:end].float()
    torch.testing.assert_close(grad.cpu(), expected.view(18, 4))


def test_grouped_matmul_add_refuses_bad_group_lists(ext, capfd):
    x, dy, grad = torch.randn(8, 2).npu(), torch.randn(8, 3).npu(), torch.zeros(4, 3).npu()
    with pytest.raises(RuntimeError, match="GroupedMatmulInplaceAddOperation Setup returned 1"):
        ext.grouped_matmul_add(x, dy, torch.tensor([4, 8], dtype=torch.int32).npu(), grad, True, False)
    assert "groupList must be a 1-d int64 tensor" in capfd.readouterr().err
    with pytest.raises(RuntimeError, match="Setup returned 1"):
        ext.grouped_matmul_add(x, dy, torch.tensor([4, 8, 8]).npu(), grad, True, False)
    assert "grad must hold 3 groups of [2, 3]" in capfd.readouterr().err
    # decreasing ends are found when the operation runs: a kernel failure at the next sync
    ext.grouped_matmul_add(x, dy, torch.tensor([6, 4]).npu(), grad, True, False)
    with pytest.raises(RuntimeError, match="non-decreasing cumulative ends"):
        torch.npu.synchronize()


@pytest.mark.parametrize("kind", [LINEAR_ALL_REDUCE, LINEAR_REDUCE_SCATTER, ALL_GATHER_LINEAR, PURE_LINEAR,
                                  ALL_GATHER_LINEAR_REDUCE_SCATTER])
def test_linear_parallel_over_one_rank_is_the_linear(ext, kind):
    # MindSpeed's lcal coc ops with a tensor-parallel size of 1
    x, w, residual = torch.randn(6, 8), torch.randn(5, 8), torch.randn(5)
    keep = kind == ALL_GATHER_LINEAR
    outputs = ext.linear_parallel(x.npu(), w.npu(), residual.npu(), kind, 0, 1, keep, True, "0")
    torch.testing.assert_close(outputs[0].cpu(), x @ w.t() + residual)
    if keep:
        torch.testing.assert_close(outputs[1].cpu(), x)


def test_linear_parallel_pure_linear_needs_no_group_and_the_collectives_need_theirs(ext, capfd):
    x, w = torch.randn(6, 8), torch.randn(8, 5)
    (y,) = ext.linear_parallel(x.npu(), w.npu(), None, PURE_LINEAR, 1, 2, False, True, "0")
    torch.testing.assert_close(y.cpu(), x @ w)
    with pytest.raises(RuntimeError, match="LinearParallelOperation Setup returned 1"):
        ext.linear_parallel(x.npu(), w.npu(), None, LINEAR_ALL_REDUCE, 1, 2, False, True, "0")
    assert "communication domain 0 of 2 ranks is the hccl process group of global ranks 0 to 1" in \
        capfd.readouterr().err
    with pytest.raises(RuntimeError, match="Setup returned 1"):
        ext.linear_parallel(x.npu(), w.npu(), None, LINEAR_ALL_REDUCE, 1, 2, False, True, "tp")
    assert 'commDomain "tp" must be a communication domain number' in capfd.readouterr().err


def test_linear_parallel_collectives_over_hccl_as_mindspeeds_lcal_coc_calls_them(ext, ext_dir):
    # 2 ranks: all-reduce, reduce-scatter and all-gather matmuls equal the formulas, between collectives
    from torchrun_jobs import torchrun
    torchrun("atb_lcoc.py", 2, timeout=300, VNPU_ATB_EXT_DIR=str(ext_dir))


def test_linear_parallel_2d_gathers_and_reduces_along_the_grid_lines(ext, ext_dir):
    # 4 ranks: MindSpeed's tp_2d all_gather_matmul_reduce_scatter for grids 2x2 (both orders), 4x1 and 1x4
    from torchrun_jobs import torchrun
    torchrun("atb_lcoc_2d.py", 4, timeout=300, VNPU_ATB_EXT_DIR=str(ext_dir))
