"""torch.npu.npugraph_ex and torchair's scope and inference APIs: what real
torch_npu users call around the "npugraph_ex" backend, compared with eager."""

import pytest
import torch
import torch.nn as nn

import torch_npu
import torchair
from torch._functorch.aot_autograd import aot_module_simplified


def _graphs():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    return graphs, backend


def test_compile_fx_compiles_aten_graphs_for_a_custom_aot_backend():
    torch._dynamo.reset()
    calls = []

    def fw_compiler(gm, example_inputs):
        calls.append(len(example_inputs))
        return torch.npu.npugraph_ex.compile_fx(gm, example_inputs, {"clone_input": False})

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=fw_compiler)

    fn = torch.compile(lambda x, y: torch.relu(x @ y) + 1, backend=backend, fullgraph=True, dynamic=False)
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    for _ in range(3):  # warm-up, capture, replay
        assert torch.equal(fn(x.npu(), y.npu()).cpu(), torch.relu(x @ y) + 1)
    assert calls == [2]
    with pytest.raises(ValueError, match="unknown option 'bogus'"):
        torch.npu.npugraph_ex.compile_fx(None, [], {"bogus": True})
    with pytest.raises(TypeError, match="options should be a dict"):
        torch.npu.npugraph_ex.compile_fx(None, [], ["clone_input"])


def test_registered_replacements_apply_to_npugraph_ex_compilations_only_where_extra_check_allows():
    from torch._subclasses.fake_tensor import FakeTensorMode

    def search(x, y):
        return torch.mul(torch.add(x, y), 2)

    def replace(x, y):  # visibly different, so that the test sees whether it ran
        return torch.mul(torch.add(x, y), 3)

    def only_width_24(match):
        return match.kwargs["x"].meta["val"].shape[-1] == 24

    with FakeTensorMode():
        example = (torch.empty(4, 24, device="npu"), torch.empty(4, 24, device="npu"))
        torch.npu.npugraph_ex.register_replacement(search_fn=search, replace_fn=replace, example_inputs=example,
                                                   extra_check=only_width_24)
    try:
        for width, factor in ((24, 3), (16, 2)):
            torch._dynamo.reset()
            x, y = torch.randn(4, width), torch.randn(4, width)
            f = torch.compile(lambda a, b: (a + b) * 2, backend="npugraph_ex", fullgraph=True, dynamic=False)
            assert torch.equal(f(x.npu(), y.npu()).cpu(), (x + y) * factor), width
        # Other backends do not apply npugraph_ex's replacements.
        torch._dynamo.reset()
        x, y = torch.randn(4, 24), torch.randn(4, 24)
        f = torch.compile(lambda a, b: (a + b) * 2, backend="npu", fullgraph=True, dynamic=False)
        assert torch.equal(f(x.npu(), y.npu()).cpu(), (x + y) * 2)
    finally:
        from torch_npu.npu.npugraph_ex import _patterns
        _patterns._pass.cache_clear()


def test_scopes_are_recorded_in_the_graph_and_leave_values_as_eager():
    from torchair import scope

    def fn(x, y):
        with scope.npu_stream_switch("s1", 3):
            a = x * 2
        with scope.limit_core_num(4, 5), scope.super_kernel("sk"), scope.op_never_timeout():
            b = torch.mm(x, y)
        with torch.npu.npugraph_ex.scope.limit_core_num(2, 3):
            c = b - 1
        return scope.npu_wait_tensor(a, b) + c

    x, y = torch.randn(4, 4).npu(), torch.randn(4, 4).npu()
    torch._dynamo.reset()
    graphs, backend = _graphs()
    torch.compile(fn, backend=backend, fullgraph=True)(x, y)
    code = graphs[0].code
    assert code.count("torch.ops.air.scope_enter") == 4 and code.count("torch.ops.air.scope_exit") == 4
    assert "'_user_stream_label', '_user_stream_priority'" in code and "['s1', '3', 'True']" in code
    assert code.count("torch.ops.npugraph_ex.scope_enter(['_op_aicore_num', '_op_vectorcore_num'], ['2', '3'])") == 1
    for backend in ("npu", "npugraph_ex"):
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=backend, fullgraph=True)
        for _ in range(3):
            torch.testing.assert_close(compiled(x, y).cpu(), fn(x, y).cpu())


def test_scope_arguments_are_checked():
    from torchair import scope
    with pytest.raises(TypeError, match="'stream_tag' must be str"):
        scope.npu_stream_switch(1)
    with pytest.raises(ValueError, match="'op_aicore_num' must be a non-negative int"):
        scope.limit_core_num(-1, 2)
    with pytest.raises(TypeError, match="'enable' must be bool"):
        scope.op_never_timeout("yes")
    with pytest.raises(RuntimeError, match="deterministic\\(2\\) is not supported on vNPU"):
        torch.npu.npugraph_ex.scope.deterministic(2)
    with torch.npu.npugraph_ex.scope.deterministic(1):
        pass


class _TwoWays(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 3)
        self.prefill = torchair.inference.cache_compile(self._prefill, dynamic=False)
        self.decode = torch.npu.npugraph_ex.inference.cache_compile(self._decode)

    def _prefill(self, x):
        return torch.relu(self.linear(x))

    def _decode(self, x):
        return self.linear(x).sigmoid()

    def forward(self, x, prefill):
        return self.prefill(x) if prefill else self.decode(x)


def test_cache_compile_compiles_module_methods_as_eager_computes_them():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _TwoWays().npu()
    for rows in (2, 5, 2):
        x = torch.randn(rows, 6).npu()
        torch.testing.assert_close(model(x, True).cpu(), model._prefill(x).cpu())
        torch.testing.assert_close(model(x, False).cpu(), model._decode(x).cpu())
    with pytest.raises(ValueError, match="Only method can be cached"):
        torchair.inference.cache_compile(lambda x: x)
    class NotAModule:
        def method(self, x):
            return x

    with pytest.raises(ValueError, match="Only torch.nn.Module method"):
        torchair.inference.cache_compile(NotAModule().method)
    with pytest.warns(UserWarning, match="cache_dir is not used on vNPU"):
        torchair.inference.cache_compile(model._decode, cache_dir="/tmp/unused")
    with pytest.raises(NotImplementedError, match="writes no such cache"):
        torchair.inference.readable_cache(b"")


def test_tagged_events_order_a_side_stream_eagerly_and_compiled():
    from torchair import ops
    event = ops.npu_create_tagged_event("vnpu-test-tag")
    with pytest.raises(ValueError, match="already in use"):
        ops.npu_create_tagged_event("vnpu-test-tag")
    with pytest.raises(ValueError, match="is not in use"):
        ops.npu_tagged_event_record(torch.npu.Event())
    side = torch.npu.Stream()

    def produce_on_side(x):
        with torch.npu.stream(side):
            torch.npu._sleep(20000)  # the side stream is busy: only the event orders the read below
            y = x * 2
            ops.npu_tagged_event_record(event)
        ops.npu_tagged_event_wait(event)
        return y + 1

    produce_on_side(torch.zeros(64).npu())  # first launches of each signature run on the caller: queued from here on
    torch.npu.synchronize()
    x = torch.randn(64).npu()
    torch.testing.assert_close(produce_on_side(x).cpu(), x.cpu() * 2 + 1)
    torch._dynamo.reset()
    graphs, backend = _graphs()
    torch.compile(produce_on_side, backend=backend)(x)
    code = "".join(g.code for g in graphs)
    assert "torch.ops.air.tagged_event_record('vnpu-test-tag')" in code
    assert "torch.ops.air.tagged_event_wait('vnpu-test-tag')" in code
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(produce_on_side, backend="npu")(x).cpu(), x.cpu() * 2 + 1)


def test_record_tagged_stream_keeps_memory_for_that_stream_and_wait_checks_its_arguments():
    from torchair import ops
    x = torch.empty(1 << 20, device="npu")
    ops.npu_record_tagged_stream(x, "vnpu-side")
    ops.npu_record_tagged_stream(x, "default")
    assert ops.record().numel() == 0
    ops.wait([x])
    with pytest.raises(ValueError, match="at least one tensor"):
        ops.wait([])
    with pytest.raises(ValueError, match="must be torch.Tensor"):
        ops.wait([1])


def test_npu_print_prints_summaries(capsys):
    from torchair import ops
    ops.npu_print("x:", torch.arange(10).npu(), summarize_size=2, tensor_detail=True)
    assert capsys.readouterr().out.strip() == "x: (dtype: torch.int64, shape: [10]) [0 1 ... 8 9]"
    with pytest.raises(ValueError, match="tensors or strings"):
        ops.npu_print(3)


def test_custom_decompositions_replace_inductors_own():
    calls = []

    def quick_gelu(x, approximate="none"):  # visibly not GELU, so that the test sees it ran
        calls.append(approximate)
        return x * torch.sigmoid(1.702 * x)

    backend = torchair.get_npu_backend(custom_decompositions={torch.ops.aten.gelu.default: quick_gelu})
    torch._dynamo.reset()
    x = torch.randn(32).npu()
    out = torch.compile(torch.nn.functional.gelu, backend=backend)(x)
    assert calls, "the custom decomposition was not used"
    torch.testing.assert_close(out.cpu(), x.cpu() * torch.sigmoid(1.702 * x.cpu()))
    with pytest.raises(TypeError, match="custom_decompositions should be a dict"):
        torchair.get_npu_backend(custom_decompositions=[quick_gelu])


def test_use_internal_format_weight_casts_linear_and_conv_weights_and_keeps_results():
    from torchair.experimental.inference import npu_format_cast_via_cpu, use_internal_format_weight
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3).half(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5).half(),
                          nn.Conv2d(4, 4, 3, groups=2).half()).npu()
    x = torch.randn(2, 3, 8, 8, dtype=torch.float16).npu()
    want = model[:3](x)
    use_internal_format_weight(model)
    assert torch_npu.get_npu_format(model[0].weight) == torch_npu.Format.FRACTAL_Z
    assert torch_npu.get_npu_format(model[2].weight) == torch_npu.Format.FRACTAL_NZ
    assert torch_npu.get_npu_format(model[3].weight) == torch_npu.Format.NCHW  # grouped: left as it is
    torch.testing.assert_close(model[:3](x).cpu(), want.cpu())
    with pytest.raises(RuntimeError, match="Cpu weight is not supported"):
        use_internal_format_weight(nn.Linear(2, 2))
    w = torch.randn(16, 16).npu()
    assert torch_npu.get_npu_format(npu_format_cast_via_cpu(w, 29)) == torch_npu.Format.FRACTAL_NZ


def test_clone_of_a_ge_graph_and_the_logger():
    import logging
    assert torchair.logger is logging.getLogger("torchair")
    with pytest.raises(Exception, match="not supported on vNPU"):
        torchair.ge.Clone(None)


def test_torchair_top_level_compiler_export_hcom_and_replacements():
    from torch._subclasses.fake_tensor import FakeTensorMode
    # get_compiler: an ATen-level compiler for custom AOTAutograd backends.
    torch._dynamo.reset()
    backend = lambda gm, inputs: aot_module_simplified(gm, inputs, fw_compiler=torchair.get_compiler())  # noqa: E731
    x = torch.randn(6, 6)
    torch.testing.assert_close(torch.compile(lambda a: torch.tanh(a) * 3, backend=backend)(x.npu()).cpu(),
                               torch.tanh(x) * 3)
    with pytest.raises(NotImplementedError, match="dynamo_export is not supported on vNPU"):
        torchair.dynamo_export(x, model=nn.Linear(6, 6))
    torchair.patch_for_hcom()  # torch >= 2.3.1: nothing to patch, as real torchair says
    # register_replacement: applied by every compilation with torchair's backend.

    def search(a, b):
        return torch.sub(torch.mul(a, b), b)

    def replace(a, b):  # visibly different
        return torch.add(torch.mul(a, b), b)

    with FakeTensorMode():
        example = (torch.empty(8, device="npu"), torch.empty(8, device="npu"))
        torchair.register_replacement(search, replace, example)
    try:
        a, b = torch.randn(8), torch.randn(8)
        for mode in ("max-autotune", "npugraph_ex"):
            torch._dynamo.reset()
            config = torchair.CompilerConfig()
            config.mode = mode
            f = torch.compile(lambda p, q: p * q - q, backend=torchair.get_npu_backend(compiler_config=config))
            torch.testing.assert_close(f(a.npu(), b.npu()).cpu(), a * b + b)
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(lambda p, q: p * q - q, backend="inductor")(a.npu(), b.npu()).cpu(),
                                   a * b - b)  # not torchair's backend: not replaced
    finally:
        from torch_npu.npu.npugraph_ex import _patterns
        _patterns._pass.cache_clear()


def test_compile_fx_applies_npugraph_ex_replacements():
    from torch._subclasses.fake_tensor import FakeTensorMode

    def search(a, b):
        return torch.sub(torch.mul(a, b), b)

    def replace(a, b):  # visibly different
        return torch.add(torch.mul(a, b), b)

    with FakeTensorMode():
        torch.npu.npugraph_ex.register_replacement(search, replace,
                                                   (torch.empty(8, device="npu"), torch.empty(8, device="npu")))
    try:
        torch._dynamo.reset()
        backend = lambda gm, inputs: aot_module_simplified(  # noqa: E731
            gm, inputs, fw_compiler=lambda g, i: torch.npu.npugraph_ex.compile_fx(g, i))
        a, b = torch.randn(8), torch.randn(8)
        torch.testing.assert_close(torch.compile(lambda p, q: p * q - q, backend=backend)(a.npu(), b.npu()).cpu(),
                                   a * b + b)
    finally:
        from torch_npu.npu.npugraph_ex import _patterns
        _patterns._pass.cache_clear()
