"""torch_npu.op_plugin.float_status: the float status of saturation mode (Note [Saturation
mode's float status] in csrc/launch/float_status.h), the inf/nan mode each chip profile and
INF_NAN_MODE_* give, and AMP's unscale reading the status in saturation mode."""

import pytest
import torch
from torch.testing import assert_close

import torch_npu
from conftest import run_python


def _ok(proc):
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout


def test_inf_nan_mode_reports_no_status():
    # The 910B default computes with inf/nan: an overflow gives inf and no status, as on the chip.
    assert torch.npu.utils.is_support_inf_nan()
    y = torch.tensor([40000.0], dtype=torch.float16).npu()
    assert torch.isinf(y + y).all()
    status = torch_npu.npu_alloc_float_status(torch.zeros(8).npu())
    assert status.shape == (8,) and status.dtype == torch.float32 and status.device.type == "npu"
    got = torch_npu.npu_get_float_status(status)
    assert got.dtype == torch.int32 and got.shape == (8,)  # NPUGetFloatStatusV2 on the 910B
    assert_close(got.cpu(), torch.zeros(8, dtype=torch.int32))
    assert_close(torch_npu.npu_clear_float_status(status).cpu(), torch.zeros(8))
    with pytest.raises(RuntimeError, match=r"mode only supported for ORIGINAL_MODE\(0\) DEBUG_MODE\(1\), but got "
                                           "mode:2"):
        torch_npu.npu_get_float_status(status, 2)


SATURATION = """
    import torch, torch_npu
    assert not torch.npu.utils.is_support_inf_nan()
    def status():
        return int(torch_npu.npu_get_float_status(torch.zeros(8).npu())[0])
    assert status() == 0
    # moving or filling non-finite values is no overflow (an attention mask of -inf)
    mask = torch.zeros(4, 4).npu().masked_fill_(torch.eye(4, dtype=torch.bool).npu(), float("-inf"))
    full = torch.full((3,), float("inf"), device="npu")
    moved = torch.cat([mask.flatten(), full]).clone()
    assert status() == 0, "a fill or a copy raised the status"
    # arithmetic that overflows does, in stream order
    y = torch.tensor([40000.0], dtype=torch.float16).npu()
    y = y + y
    assert status() != 0 and status() != 0, "get_float_status must not clear"
    torch_npu.npu_clear_float_status(torch.zeros(8).npu())
    assert status() == 0
    # AMP's unscale reads the status: set -> found_inf = 1, gradients untouched, status cleared
    grads = [torch.full((3, 3), 4.0).npu(), torch.full((5,), 8.0).npu()]
    found_inf, inv_scale = torch.zeros(1).npu(), torch.full((1,), 0.25).npu()
    torch.tensor([3e38]).npu() * 10
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    assert found_inf.item() == 1.0 and grads[0][0, 0].item() == 4.0 and status() == 0
    # not set -> gradients unscaled, found_inf unchanged (even though a gradient holds an inf
    # that no kernel produced: op-plugin's saturation path reads the status only)
    found_inf.zero_()
    grads[1].copy_(torch.tensor([float("inf")] * 5))
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    assert found_inf.item() == 0.0 and grads[0][0, 0].item() == 1.0
    # GradScaler skips the step after an overflow in the backward
    model = torch.nn.Linear(4, 1).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.npu.amp.GradScaler(init_scale=2.0 ** 16)
    before = model.weight.detach().clone()
    with torch.autocast("npu", dtype=torch.float16):
        loss = model(torch.full((2, 4), 60000.0).npu()).float().sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert torch.equal(model.weight.detach(), before), "the step after an overflow was not skipped"
    assert scaler.get_scale() == 2.0 ** 15
    print("ok")
"""


def test_saturation_mode_records_overflows_and_amp_reads_them():
    assert "ok" in _ok(run_python(SATURATION, INF_NAN_MODE_FORCE_DISABLE="1"))


def test_old_chips_are_in_saturation_mode_and_write_the_status_into_self():
    out = _ok(run_python("""
        import torch, torch_npu
        assert not torch.npu.utils.is_support_inf_nan()
        buf = torch_npu.npu_alloc_float_status(torch.zeros(8).npu())
        x = torch.tensor([60000.0], dtype=torch.float16).npu() * 2
        got = torch_npu.npu_get_float_status(buf)
        assert got is buf and got.dtype == torch.float32 and got[0].item() != 0
        print("ok")
    """, VNPU_CHIP="Ascend910A"))
    assert "ok" in out


@pytest.mark.parametrize("env, expected", [
    ({"INF_NAN_MODE_ENABLE": "0"}, "INF_NAN_MODE_ENABLE shouldn't be set to 0 on the current device. If you want "
                                   "to disable inf-nan mode, please export INF_NAN_MODE_FORCE_DISABLE=1"),
    ({"INF_NAN_MODE_ENABLE": "2"}, "INF_NAN_MODE_ENABLE should be 0 or 1."),
    ({"INF_NAN_MODE_FORCE_DISABLE": "yes"}, "INF_NAN_MODE_FORCE_DISABLE should be 0 or 1."),
])
def test_bad_inf_nan_settings_raise_at_device_init(env, expected):
    proc = run_python("import torch, torch_npu; torch.npu.utils.is_support_inf_nan()", **env)
    assert proc.returncode != 0 and expected in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("env, inf_nan", [
    ({"INF_NAN_MODE_ENABLE": "0", "INF_NAN_MODE_FORCE_DISABLE": "1"}, False),
    ({"VNPU_CHIP": "Ascend950", "INF_NAN_MODE_FORCE_DISABLE": "1"}, True),  # the 950 ignores both
    ({"VNPU_CHIP": "Ascend950", "INF_NAN_MODE_ENABLE": "0"}, True),
    ({"VNPU_CHIP": "Ascend310P3"}, False),
    ({"VNPU_CHIP": "Ascend910_9391"}, True),
])
def test_inf_nan_mode_per_chip_and_environment(env, inf_nan):
    out = _ok(run_python("import torch, torch_npu; print(torch.npu.utils.is_support_inf_nan())", **env))
    assert out.strip() == str(inf_nan)
