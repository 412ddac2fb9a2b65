"""Fused operators declared before their family is imported (Note [Operators
declared before their family] in torch_npu/op_plugin/_library.py): the
manifest matches the families, the families it declares are imported at
first use, and each declared operator behaves as its family defines it.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_npu
from torch_npu.op_plugin import _library, _manifest, declared_operators

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_manifest_is_what_the_families_define():
    run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_op_manifest.py"), "--check"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_declared_families_are_imported_at_the_first_call_of_one_of_their_operators():
    run = _run("""
        import sys
        import torch, torch_npu
        from torch_npu.op_plugin import _manifest, declared_operators
        declared = {family for _, _, family, _, _ in declared_operators(_manifest)}
        loaded = {f for f in declared if "torch_npu.op_plugin." + f in sys.modules}
        print("loaded at import:", sorted(loaded))
        x = torch.randn(4, 8).npu()
        y, rstd = torch.ops.npu.npu_rms_norm(x, torch.ones(8).npu())
        print("norm loaded after call:", "torch_npu.op_plugin.norm" in sys.modules)
        from torch_npu.op_plugin.norm import npu_rms_norm
        expected = npu_rms_norm(x.cpu(), torch.ones(8))[0]
        print("equal:", torch.equal(y.cpu(), expected))
    """)
    assert run.returncode == 0, run.stderr
    # Eager families may import a declared one (sparse_attention imports norm's
    # helpers); most declared families stay unimported.
    loaded = eval(run.stdout.splitlines()[0].split(":", 1)[1])
    declared = {family for _, _, family, _, _ in declared_operators(_manifest)}
    assert len(loaded) <= len(declared) // 4, loaded
    assert "norm loaded after call: True" in run.stdout
    assert "equal: True" in run.stdout


def test_a_declared_operator_traces_under_fake_tensors_before_its_family_is_imported():
    run = _run("""
        import sys
        import torch, torch_npu
        from torch._subclasses.fake_tensor import FakeTensorMode
        family = "torch_npu.op_plugin.rotary"
        print("before:", family in sys.modules)
        with FakeTensorMode():
            x = torch.empty(2, 3, 4, 8, device="npu")
            out = torch_npu.npu_rotary_mul(x, torch.empty(1, 3, 1, 8, device="npu"),
                                           torch.empty(1, 3, 1, 8, device="npu"))
        print("shape:", tuple(out.shape), out.device.type)
        print("after:", family in sys.modules)
    """)
    assert run.returncode == 0, run.stderr
    assert "before: False" in run.stdout
    assert "shape: (2, 3, 4, 8) npu" in run.stdout
    assert "after: True" in run.stdout


def test_every_declared_operator_gets_its_function_from_its_family():
    for qualified_name, kernel in list(_library.KERNELS.items()):
        fn = kernel.function()
        assert callable(fn), qualified_name
        assert _library.composition(qualified_name) is fn
    declared = {(namespace, schema.split("(", 1)[0]) for namespace, schema, _, _, _ in declared_operators(_manifest)}
    assert declared <= {tuple(k.op_name.split("::")) for k in _library.KERNELS.values()}


def test_the_exported_operator_documents_its_implementation_before_its_family_is_imported():
    run = _run("""
        import inspect, sys
        import torch, torch_npu
        print("before:", "torch_npu.op_plugin.moe" in sys.modules)
        doc = torch_npu.npu_moe_token_permute.__doc__
        from torch_npu.op_plugin.moe import npu_moe_token_permute
        print("schema:", "npu::npu_moe_token_permute(Tensor tokens" in doc)
        print("implementation:", inspect.cleandoc(npu_moe_token_permute.__doc__) in doc)
    """)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["before:", "False", "schema:", "True", "implementation:", "True"]


def test_a_manifest_entry_its_family_does_not_define_says_the_manifest_is_out_of_date():
    _library.declare("npu", "vnpu_test_stale_entry(Tensor self) -> Tensor", "rotary", "nothing_of_that_name", True)
    with pytest.raises(RuntimeError, match=r"out of date; run `python scripts/gen_op_manifest.py`"):
        torch.ops.npu.vnpu_test_stale_entry(torch.ones(2))


def test_a_family_that_defines_a_declared_operator_differently_is_refused():
    _library.declare("npu", "vnpu_test_changed(Tensor self) -> Tensor", "rotary", "f", True)

    def f(self, scale=1.0):
        return self * scale

    with pytest.raises(RuntimeError, match="differently from torch_npu/op_plugin/_manifest.py"):
        _library.define("vnpu_test_changed(Tensor self, float scale=1.0) -> Tensor", f)
    with pytest.raises(RuntimeError, match="differently from torch_npu/op_plugin/_manifest.py"):
        _library.define("vnpu_test_changed(Tensor self) -> Tensor", f, differentiable=False)
    _library.define("vnpu_test_changed(Tensor self) -> Tensor", f)
    assert torch.equal(torch.ops.npu.vnpu_test_changed(torch.full((2,), 3.0)), torch.full((2,), 3.0))


def test_a_declared_in_place_operator_functionalizes_before_its_family_is_imported():
    run = _run("""
        import sys
        import torch, torch_npu
        from torch.fx.experimental.proxy_tensor import make_fx
        print("before:", "torch_npu.op_plugin.scatter" in sys.modules)

        def f(x, indices, updates):
            torch.ops.npu.npu_scatter_nd_update_(x, indices, updates)
            return x

        x = torch.zeros(4, 3).npu()
        indices = torch.tensor([[1], [3]]).npu()
        updates = torch.arange(6.0).view(2, 3).npu()
        graph = make_fx(torch.func.functionalize(f))(x.clone(), indices, updates)
        print("nodes:", [str(n.target) for n in graph.graph.nodes if n.op == "call_function"])
        print("equal:", torch.equal(graph(x.clone(), indices, updates).cpu(), f(x.clone(), indices, updates).cpu()))
    """)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "before: False"
    assert "npu.npu_scatter_nd_update.default" in lines[1] and "npu_scatter_nd_update_" not in lines[1], lines[1]
    assert lines[2] == "equal: True"
