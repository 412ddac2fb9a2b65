"""The top-level torch_npu namespace: the subpackages real torch_npu binds at
import (torch_npu.profiler.profile(...) right after `import torch_npu`), and
what vNPU puts in the three it had lacked: asd (matmul_checksum),
multiprocessing (npu tensors on torch.multiprocessing queues) and atb."""

import pickle
import warnings
from multiprocessing.reduction import ForkingPickler

import pytest
import torch
import torch_npu

from conftest import run_python

# Real torch_npu binds these at import (torch_npu/_init/core/module_loader.py and the patches it applies).
SUBPACKAGES = ("profiler", "contrib", "utils", "optim", "distributed", "dynamo", "npu", "asd", "multiprocessing",
               "atb")


def test_subpackages_bound_at_import():
    # A fresh interpreter: nothing but `import torch_npu` may have run before the checks.
    code = f"""
        import sys, types
        import torch_npu
        names = {SUBPACKAGES!r}
        bound_at_import = [n for n in names if isinstance(torch_npu.__dict__.get(n), types.ModuleType)]
        assert bound_at_import == list(names), ("not bound by import torch_npu", set(names) - set(bound_at_import))
        for n in names:
            assert hasattr(torch_npu, n), n
            assert n in dir(torch_npu), n
            assert sys.modules["torch_npu." + n] is getattr(torch_npu, n), n
        from torch_npu import profiler
        import torch_npu.profiler as imported
        assert profiler is imported is torch_npu.profiler
        assert callable(torch_npu.profiler.profile) and callable(torch_npu.profiler.schedule)
        assert callable(torch_npu.contrib.npu_iou) and callable(torch_npu.asd.checksum._matmul_checksum)
        print("ok")
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_fused_ops_are_resolved_at_first_use_and_listed_from_the_start():
    # Building some 400 operator packets and docstrings at import was a tenth
    # of `import torch_npu` (issue 28); each is made on first access instead.
    code = """
        import torch, torch_npu
        assert "npu_rms_norm" not in torch_npu.__dict__
        assert "npu_rms_norm" in dir(torch_npu) and "npu_rms_norm" in torch_npu.__all__
        assert "npu_hans_encode" in dir(torch_npu) and "npu_fusion_attention" in torch_npu.__all__
        assert torch_npu.npu_rms_norm is torch.ops.npu.npu_rms_norm  # then kept in the module
        assert "npu_rms_norm" in torch_npu.__dict__ and "Schemas:" in torch_npu.npu_rms_norm.__doc__
        from torch_npu import npu_rotary_mul
        assert npu_rotary_mul is torch.ops.npu.npu_rotary_mul
        namespace = {}
        exec("from torch_npu import *", namespace)
        missing = [n for n in torch_npu.__all__ if n not in namespace]
        assert not missing, missing
        try:
            torch_npu.npu_no_such_op
        except AttributeError as e:
            assert "has no attribute 'npu_no_such_op'" in str(e)
        print("ok")
    """
    result = run_python(code)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]


def test_unsupported_dtype_lists_the_quantized_dtypes_npu_storages_refuse():
    assert torch_npu.unsupported_dtype == [torch.quint8, torch.quint4x2, torch.quint2x4, torch.qint32, torch.qint8]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        storage = torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.quint8).storage()
        with pytest.raises(RuntimeError, match="Cannot create npu storage as torch.quint8 dtype is not supported"):
            storage.npu()


def test_profiler_usable_without_importing_it():
    code = """
        import torch, torch_npu
        with torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.CPU]) as prof:
            torch.ones(4, device="npu").sum().item()
        assert any("aten::sum" in e.name for e in prof.events())
        print("ok")
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    # (before it, torch_npu's warning for a profile stopped while it records without a schedule)
    assert result.stdout.strip().splitlines()[-1] == "ok"


# --- asd: matmul_checksum --------------------------------------------------------------------

@pytest.mark.parametrize("dtype,shape", [(torch.float32, (64, 96, 80)), (torch.bfloat16, (128, 256, 192)),
                                         (torch.float16, (2, 32, 64, 48))])
def test_matmul_checksum_passes_a_correct_product(dtype, shape):
    torch.manual_seed(0)
    *batch, m, k, n = shape
    a = torch.randn(*batch, m, k, dtype=dtype, device="npu")
    b = torch.randn(*batch, k, n, dtype=dtype, device="npu")
    c = a @ b
    flag = torch_npu.matmul_checksum(a, b, c)
    assert flag.device.type == "npu" and flag.dtype == torch.bool
    assert not flag.item()


def test_matmul_checksum_flags_a_corrupted_product_and_repairs_it():
    torch.manual_seed(1)
    a = torch.randn(32, 64, dtype=torch.bfloat16, device="npu")
    b = torch.randn(64, 48, dtype=torch.bfloat16, device="npu")
    c = a @ b
    good = c.clone()
    c[5, 7] += 1000.0  # a flipped exponent bit: far beyond rounding
    assert torch_npu.matmul_checksum(a, b, c).item()
    assert torch.equal(c.cpu(), good.cpu())  # recomputed in place
    # Rounding-sized differences are not faults.
    c[5, 7] += float(c[5, 7].abs()) * 2 ** -9
    assert not torch_npu.matmul_checksum(a, b, c).item()


def test_matmul_checksum_wants_npu_tensors():
    a = torch.randn(4, 4, device="npu")
    with pytest.raises(TypeError, match=r"matmul_checksum: c should be a torch.Tensor on an npu device, got cpu"):
        torch_npu.matmul_checksum(a, a, (a @ a).cpu())
    with pytest.raises(TypeError, match=r"b should be a torch.Tensor on an npu device, got list"):
        torch_npu.matmul_checksum(a, [1.0], a)


# --- multiprocessing: CPU tensors unchanged (npu tensors: tests/test_multiprocessing_npu.py) ----------

def test_forking_pickler_still_shares_cpu_tensors():
    t = torch.arange(6.0).reshape(2, 3)
    u = pickle.loads(ForkingPickler.dumps(t))
    assert torch.equal(u, t)
    assert u.is_shared()  # torch's own reducer moved it to shared memory


@pytest.mark.parametrize("name", ["rebuild_npu_event"])
def test_rebuild_functions_not_supported(name):
    fn = getattr(torch_npu.multiprocessing.reductions, name)
    args = [None] * fn.__code__.co_argcount
    with pytest.raises(RuntimeError, match=rf"torch_npu.multiprocessing.reductions.{name} is not supported on vNPU"):
        fn(*args)


# --- atb: real torch_npu's torch_npu.atb names are the torch.ops.atb operators -------

@pytest.mark.parametrize("name", torch_npu.atb.__all__ + torch_npu.atb._PRIVATE)
def test_atb_names_are_the_atb_operators(name):
    fn = getattr(torch_npu.atb, name)
    assert fn.__name__ == name
    assert getattr(fn, "_packet", fn) is getattr(torch.ops.atb, name)


def test_atb_all_lists_public_names_only():
    # torch's public-API rules (real test/npu/test_public_bindings.py): a name
    # in __all__ must look public
    assert not [n for n in torch_npu.atb.__all__ if n.startswith("_")]
    assert torch_npu.atb._npu_paged_attention_v2 is not None  # still there by name


def test_atb_fused_add_topk_div_runs_from_the_atb_namespace():
    x = torch.randn(4, 8)
    bias = torch.zeros(8)
    kwargs = dict(activation_type="activation_sigmoid", group_num=2, group_topk=1, n=2, k=2, is_norm=True, scale=1.0)
    on_npu = torch_npu.atb.npu_fused_add_topk_div(x.npu(), bias.npu(), **kwargs)
    on_cpu = torch_npu.atb.npu_fused_add_topk_div(x, bias, **kwargs)
    for a, b in zip(on_npu, on_cpu):
        torch.testing.assert_close(a.cpu(), b)


def test_import_leaves_the_heavy_subsystems_unimported():
    """`import torch` with torch_npu installed (autoloaded) must stay cheap:
    every process pays it (subprocess-isolated tests, DataLoader workers,
    torchrun ranks). Dynamo alone costs over 2 s; it, Inductor and sympy are
    imported when first used (torch.compile), not by torch_npu."""
    from conftest import run_python
    r = run_python("""
        import sys, torch
        import torch_npu
        x = torch.ones(2, device="npu") + 1
        torch.npu.synchronize()
        # (torch.use_deterministic_algorithms, and so torch.npu's
        # enable_deterministic_with_backward, import Inductor's config: torch's doing.)
        print(sorted(m for m in ("torch._dynamo", "torch._inductor", "sympy") if m in sys.modules))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
