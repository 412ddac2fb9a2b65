"""TorchScript (script and trace) and gradient checkpointing on npu."""

import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import torch_npu  # noqa: F401


class BERTLayer(nn.Module):
    """The seeds' BERTModel: Linear then LayerNorm."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 64)
        self.norm = nn.LayerNorm(64)

    def forward(self, x):
        return self.norm(self.linear(x))


def test_script_and_trace_match_eager():
    model = BERTLayer().npu()
    x = torch.randn(4, 64).npu()
    eager = model(x)
    scripted = torch.jit.script(model)
    traced = torch.jit.trace(model, x)
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())  # x and the weights were copied on the default stream
    with torch.npu.stream(side):
        out_s, out_t = scripted(x), traced(x)
    torch.npu.synchronize()
    torch.testing.assert_close(out_s.cpu(), eager.cpu())
    torch.testing.assert_close(out_t.cpu(), eager.cpu())


def test_gradient_checkpointing_matches_plain_backward():
    model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16)).npu()
    x = torch.randn(4, 16).npu().requires_grad_()
    checkpoint(model, x, use_reentrant=False).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    x2 = x.detach().clone().requires_grad_()
    model(x2).sum().backward()
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g.cpu(), p.grad.cpu())
    torch.testing.assert_close(x.grad.cpu(), x2.grad.cpu())


def test_compile_mode_flags():
    assert torch.npu.is_jit_compile_false()
    torch.npu.set_compile_mode(jit_compile=True)
    try:
        assert not torch.npu.is_jit_compile_false()
    finally:
        torch.npu.set_compile_mode(jit_compile=False)
    import pytest
    with pytest.raises(TypeError):
        torch.npu.set_compile_mode(jit_compile="yes")


# --- TorchScript calling boxed npu kernels ------------------------------------
# TorchScript passes a `Tensor?[]` argument as a list typed `Tensor[]` (or a
# generic list); the boxed npu kernels must accept it as ATen's unboxed ones
# do (this was the root cause of OpInfo's jit variant-consistency failures).

def _index_put(x, i, v):
    return torch.index_put(x, [i], v, accumulate=True)


def _index_put_method(x, i, v):
    y = x.clone()
    y.index_put_((i,), v)
    return y


def _index_with_none(x, i):
    return x[:, i]



@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
@pytest.mark.parametrize("fn", [_index_put, _index_put_method], ids=["index_put", "index_put_"])
def test_scripted_and_traced_index_put_match_cpu(fn, dtype):
    x = torch.randn(5, 3).to(dtype)
    i = torch.tensor([0, 2, 2])
    v = torch.randn(3, 3).to(dtype)
    expected = fn(x, i, v)
    scripted = torch.jit.script(fn)
    traced = torch.jit.trace(fn, (x.npu(), i.npu(), v.npu()))
    for compiled in (scripted, traced):
        for _ in range(3):  # the profiling executor optimises after the first runs
            torch.testing.assert_close(compiled(x.npu(), i.npu(), v.npu()).cpu(), expected)


def test_scripted_indexing_with_none_matches_cpu():
    x = torch.randn(4, 6)
    i = torch.tensor([5, 0, 3])
    scripted = torch.jit.script(_index_with_none)
    for _ in range(3):
        torch.testing.assert_close(scripted(x.npu(), i.npu()).cpu(), _index_with_none(x, i))


def test_jit_variant_consistency_on_npu_matches_cpu():
    """OpInfo's test_variant_consistency_jit (scripted + traced, forward and
    backward) on a set of ops with list, optional and complex arguments."""
    import torch.testing._internal.common_utils as common_utils
    from torch.testing._internal.common_jit import JitCommonTestCase, check_against_reference
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.jit_metaprogramming_utils import create_script_fn, create_traced_fn
    from torch.testing._internal.jit_utils import disable_autodiff_subgraph_inlining, is_lambda

    common_utils.GRAPH_EXECUTOR = common_utils.ProfilingMode.PROFILING

    class Case(JitCommonTestCase):
        exact_dtype = True

        def runTest(self):
            pass

    case = Case()
    case.setUp()
    names = {"index_put", "_unsafe_masked_index_put_accumulate", "index_add", "index_select", "cat", "stack",
             "add", "mul", "abs", "sum", "mean", "where", "masked_fill", "gather", "scatter_add", "matmul",
             "nn.functional.linear", "softmax", "view_as_real", "angle", "tensor_split", "split"}
    checked = 0
    for op in op_db:
        if op.name not in names:
            continue
        for dtype in (torch.float32, torch.complex64):
            if dtype not in op.supported_dtypes("cpu"):
                continue
            requires_grad = dtype in op.supported_backward_dtypes("cpu")
            samples = list(op.sample_inputs("npu", dtype, requires_grad=requires_grad))[:2]
            for sample in samples:
                for kind, variant in (("function", op.get_op()), ("method", op.get_method())):
                    if variant is None or is_lambda(variant):
                        continue

                    def out_fn(output, sample=sample):
                        process = sample.output_process_fn_grad
                        return process(output) if process is not None else output

                    args = (sample.input,) + tuple(sample.args)
                    with disable_autodiff_subgraph_inlining():
                        if op.supports_scripting:
                            check_against_reference(case, create_script_fn(case, op.name, kind), op.get_op(), out_fn,
                                                    args, sample.kwargs, no_grad=not requires_grad,
                                                    no_gradgrad=not op.supports_gradgrad)
                        if op.supports_tracing:
                            check_against_reference(case, create_traced_fn(case, variant), op.get_op(), out_fn,
                                                    args, sample.kwargs, no_grad=not requires_grad,
                                                    no_gradgrad=not op.supports_gradgrad)
                    checked += 1
    assert checked > 40


class _SliceOut(nn.Module):
    def forward(self, x, out):
        return torch_npu.npu_slice(x, [0, 1], [2, 3], out=out)


def test_npu_slice_out_scripted_and_traced():
    x = torch.arange(16.0).view(4, 4)
    expected = x[0:2, 1:4]
    module = _SliceOut()
    for compiled in (torch.jit.script(module), torch.jit.trace(module, (x.npu(), torch.empty(2, 3, device="npu")))):
        out = torch.empty(0, device="npu")
        result = compiled(x.npu(), out)
        assert torch.equal(result.cpu(), expected) and torch.equal(out.cpu(), expected)


def test_torch_npu_jit_optimize_rewrites_gelu_into_fast_gelu(tmp_path):
    import torch_npu.jit

    class Block(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(x * x) + torch.nn.functional.gelu(x, approximate="tanh")

    x = torch.rand(4, 5).npu()
    traced = torch.jit.trace(Block(), x, check_trace=False)
    torch_npu.jit.optimize(traced)
    kinds = [n.kind() for n in traced.graph.nodes()]
    assert kinds.count("npu::fast_gelu") == 1  # the tanh gelu is another function: kept
    assert not traced.training
    expected = torch_npu.fast_gelu(x * x) + torch.nn.functional.gelu(x, approximate="tanh")
    torch.testing.assert_close(traced(x), expected)
    path = tmp_path / "optimized.pt"
    torch.jit.save(traced, str(path))
    torch.testing.assert_close(torch.jit.load(str(path))(x), expected)
    with pytest.raises(TypeError, match="expects a ScriptModule or ScriptFunction"):
        torch_npu.jit.optimize(Block())
