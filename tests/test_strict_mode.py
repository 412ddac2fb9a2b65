"""Strict chip mode (torch.npu.set_check_mode, torch_npu/npu/check_mode.py,
csrc/launch/strict_mode.cpp): what real torch_npu on 910B2, 310P3 and 910A would
refuse or run on the CPU, found while vNPU runs everything."""

import warnings

import pytest
import torch
import torch.nn as nn

from conftest import run_python
from torch_npu.tools import check_compatibility, check_model


@pytest.fixture
def strict():
    torch.npu.check_mode_report(clear=True)
    torch.npu.set_check_mode(True)
    yield
    torch.npu.set_check_mode(False)
    torch.npu.check_mode_report(clear=True)


def test_off_by_default_and_a_bool():
    assert torch.npu.get_check_mode() is False
    with pytest.raises(TypeError, match="must be a bool"):
        torch.npu.set_check_mode("yes")
    with pytest.raises(ValueError, match="chip must name an Ascend 910 or 310 chip"):
        torch.npu.set_check_mode(True, chip="Ascend950")
    assert torch.npu.get_check_mode() is False  # the refused call changed nothing
    x = torch.randn(3, 3, device="npu", dtype=torch.float64)
    assert (x @ x).dtype == torch.float64  # vNPU runs it; strict mode would not


def test_rejected_dtypes_raise_in_aclnn_words(strict):
    x = torch.randn(8, 8, device="npu")
    torch.testing.assert_close((x @ x).cpu(), x.cpu() @ x.cpu())  # fp32 GEMMs are fine
    (x.bfloat16() @ x.bfloat16())  # the default 910B2 has bf16
    with pytest.raises(RuntimeError, match=r"call aclnn(Matmul|Mm) failed, detail:EZ1001: .*DT_DOUBLE not implemented on "
                                           r"Ascend910B2, should be in dtype support list \[DT_FLOAT,DT_FLOAT16,"
                                           r"DT_BFLOAT16\]"):
        x.double() @ x.double()
    with pytest.raises(RuntimeError, match="DT_COMPLEX64"):
        torch.mm(x.to(torch.complex64), x.to(torch.complex64))
    u = torch.ones(4, dtype=torch.uint64, device="npu")
    with pytest.raises(RuntimeError, match="call aclnnAdd failed.*DT_UINT64"):
        u + u
    kinds = {(f["op"], f["kind"]) for f in torch.npu.check_mode_report()}
    assert {("aten::matmul", "dtype"), ("aten::mm", "dtype"), ("aten::add.Tensor", "dtype")} <= kinds
    # The device works on after each refusal.
    torch.testing.assert_close((x + 1).cpu(), x.cpu() + 1)


def test_ops_without_an_npu_kernel_warn_like_the_cpu_fallback(strict):
    x = torch.rand(16, device="npu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.special.bessel_j0(x)
    messages = [str(w.message) for w in caught if "CAUTION" in str(w.message)]
    assert len(messages) == 1  # once per op, as torch_npu warns
    assert messages[0].startswith("CAUTION: The operator 'aten::special_bessel_j0' is not currently supported on the "
                                  "NPU backend and will fall back to run on the CPU.")
    (finding,) = [f for f in torch.npu.check_mode_report() if f["kind"] == "cpu_fallback"]
    assert finding["op"] == "aten::special_bessel_j0" and finding["count"] == 3
    # Ops real torch_npu has (op-plugin's list and its core) raise nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = (x.view(4, 4) @ x.view(4, 4)).relu().sum()
        y.item()


def test_backward_ops_are_checked_too(strict):
    w = torch.randn(4, 4, device="npu", dtype=torch.float64, requires_grad=True)
    torch.npu.set_check_mode(False)
    loss = (w * 2).sum()  # forward outside strict mode
    torch.npu.set_check_mode(True)
    loss.backward()  # mul's backward: float64 mul is allowed by aclnnMul's list
    assert w.grad is not None


def test_ops_real_torch_npu_implements_are_checked_as_themselves_in_every_mode_and_thread(strict):
    x = torch.randn(8, 8, device="npu", dtype=torch.float64)
    # matmul decomposes here; the chip runs aclnnMatmul, so it is matmul that refuses.
    with torch.inference_mode():  # autograd's keys excluded: the backend-level wrapper sees it
        with pytest.raises(RuntimeError, match=r"aclnnMatmul failed.*aten::matmul.*DT_DOUBLE"):
            x @ x
    # Process-wide: an op launched by another thread is checked too.
    import threading
    errors = []

    def other_thread():
        try:
            torch.mm(x, x)
        except RuntimeError as e:
            errors.append(str(e))
    t = threading.Thread(target=other_thread)
    t.start()
    t.join(60)
    assert len(errors) == 1 and "call aclnnMm failed" in errors[0]


def test_wrapped_composites_keep_their_gradients_and_are_unwrapped_when_off():
    torch.manual_seed(0)
    w1, w2 = torch.randn(8, 16, device="npu", requires_grad=True), torch.randn(16, 4, device="npu", requires_grad=True)
    x = torch.randn(2, 5, 8, device="npu")

    def grads():  # matmul: a composite here, real torch_npu's kernel there
        w1.grad = w2.grad = None
        torch.nn.functional.gelu(x @ w1).matmul(w2).square().sum().backward()
        return [w1.grad.cpu(), w2.grad.cpu()]

    expected = grads()
    torch.npu.set_check_mode(True)
    try:
        assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::matmul", "AutogradPrivateUse1")  # wrapped
        strict = grads()
    finally:
        torch.npu.set_check_mode(False)
    for a, b in zip(expected, strict):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # Off: the dispatcher is as it was (no wrapper left behind).
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::matmul", "AutogradPrivateUse1")
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::matmul", "PrivateUse1")


@pytest.mark.parametrize("chip, bf16", [("Ascend910B2", True), ("Ascend310P3", False), ("Ascend910A", False)])
def test_per_chip_tables(chip, bf16):
    code = """
import torch, torch_npu
torch.npu.set_check_mode(True)
x = torch.randn(4, 4, device="npu")
(x.half() @ x.half())
try:
    x.bfloat16() @ x.bfloat16()
    print("BF16 OK")
except RuntimeError as e:
    print("BF16 REFUSED", "DT_BFLOAT16" in str(e), "should be in dtype support list [DT_FLOAT,DT_FLOAT16]" in str(e))
print("BF16 SUPPORTED", torch.npu.is_bf16_supported())
"""
    r = run_python(code, timeout=120, VNPU_CHIP=chip)
    assert r.returncode == 0, r.stderr[-2000:]
    assert ("BF16 OK" in r.stdout) == bf16
    if not bf16:
        assert "BF16 REFUSED True True" in r.stdout
    assert f"BF16 SUPPORTED {bf16}" in r.stdout


def test_fallback_disabled_raises_and_the_env_var_runs_a_whole_program_strict():
    code = """
import torch, torch_npu
x = torch.rand(4, device="npu")
try:
    torch.special.bessel_j0(x)
    print("RAN")
except NotImplementedError as e:
    print("REFUSED", "TORCH_NPU_FALLBACK_CPU_DISABLE=1" in str(e))
(x.double() + 1)
"""
    r = run_python(code, timeout=120, VNPU_CHECK_MODE="1", TORCH_NPU_FALLBACK_CPU_DISABLE="1")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "REFUSED True" in r.stdout
    assert "strict chip mode:" in r.stderr and "aten::special_bessel_j0" in r.stderr  # the report at exit
    bad = run_python("import torch, torch_npu", timeout=60, VNPU_CHECK_MODE="yes")
    assert bad.returncode != 0 and "VNPU_CHECK_MODE must be 0 or 1" in bad.stderr


def test_check_model_strict_reports_per_op_for_a_chip():
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 2)).bfloat16()
    x = torch.randn(4, 8).bfloat16()
    on_910b = check_model(model, (x,), strict=True)
    assert on_910b.compatible and on_910b.chip == "Ascend910B2"
    assert on_910b.ops["aten::addmm"]["native"] and "bfloat16" in on_910b.ops["aten::addmm"]["dtypes"]
    on_310p = check_model(model, (x,), chip="Ascend310P3")
    assert not on_310p.compatible and "DT_BFLOAT16" in on_310p.error
    assert any(f["kind"] == "dtype" for f in on_310p.strict_findings)
    assert torch.npu.get_check_mode() is False  # restored
    big = nn.Linear(4, 4)
    with torch.no_grad():
        big.weight.fill_(30000.0)
    risky = check_model(big, (torch.ones(2, 4),), chip="Ascend910A", backward=False)
    assert "float16's limit" in risky.ops["aten::addmm"]["risk"]
    seed_style = check_compatibility(nn.Linear(8, 2), (3, 8), chip="Ascend910A")
    assert seed_style["compatible"] and seed_style["output_shape"] == (3, 2) and seed_style["findings"] == []
    assert set(check_compatibility(nn.Linear(8, 2), (3, 8))) == {"compatible", "output_shape"}  # the seed's shape


@pytest.mark.parametrize("chip, emulated", [("Ascend910A", True), ("Ascend310P3", True), ("Ascend910B2", False)])
def test_precision_defaults_of_each_chip(chip, emulated):
    code = """
import torch, torch_npu
torch.manual_seed(0)
a, b = torch.randn(64, 64), torch.randn(64, 64)
torch.npu.set_check_mode(True)
print("MODE", torch.npu.get_option("ACL_PRECISION_MODE"))
r = (a.npu() @ b.npu()).cpu()
print("FP16_CUBE", torch.equal(r, (a.half() @ b.half()).float()), "FP32_CUBE", torch.equal(r, a @ b))
x = torch.tensor([60000.0, float("nan"), 1.0], dtype=torch.float16, device="npu")
print("SATURATED", (x * 2).cpu().tolist())
torch.npu.set_option("ACL_PRECISION_MODE", "must_keep_origin_dtype")
print("KEPT", torch.equal((a.npu() @ b.npu()).cpu(), a @ b))
"""
    r = run_python(code, timeout=120, VNPU_CHIP=chip)
    assert r.returncode == 0, r.stderr[-2000:]
    mode = "allow_fp32_to_fp16" if emulated else "must_keep_origin_dtype"
    assert f"MODE {mode}" in r.stdout
    assert (f"FP16_CUBE {emulated} FP32_CUBE {not emulated}") in r.stdout
    if emulated:
        assert "SATURATED [65504.0, 0.0, 2.0]" in r.stdout  # inf -> max, NaN -> 0
    else:
        assert "SATURATED [inf, nan, 2.0]" in r.stdout
    assert "KEPT True" in r.stdout


def test_torch_npus_operators_refuse_host_tensors_as_real_torch_npus_dispatcher_does(strict):
    import torch_npu
    with pytest.raises(NotImplementedError, match="Could not run 'npu::fast_gelu' with arguments from the 'CPU'"):
        torch_npu.fast_gelu(torch.rand(4))
    x = torch.rand(4)
    torch.testing.assert_close(torch_npu.fast_gelu(x.npu()).cpu(), x * torch.sigmoid(1.702 * x))


def test_outside_strict_mode_torch_npus_operators_run_on_host_tensors_too():
    import torch_npu
    x = torch.rand(4)
    torch.testing.assert_close(torch_npu.fast_gelu(x), x * torch.sigmoid(1.702 * x))
