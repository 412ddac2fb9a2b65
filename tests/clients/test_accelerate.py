"""accelerate on npu, used the way its users write it: the optimizer is built
on the CPU model, then accelerator.prepare moves both. Losses must match
Accelerator(cpu=True), and the model must learn (it silently did not when
moving a module made new Parameters)."""

import pytest
import torch
from torch.testing import assert_close


def _run(cpu, mixed_precision, epochs=6):
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState
    from accelerate.utils import set_seed

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # before prepare
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 16, generator=g)
    y = x[:, :4].sum(1, keepdim=True)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    accelerator = Accelerator(cpu=cpu, mixed_precision=mixed_precision)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    losses = []
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xb).float(), yb)
            accelerator.backward(loss)
            optimizer.step()
            losses.append(loss.item())
    device = next(model.parameters()).device.type
    state_devices = {s["exp_avg"].device.type for s in optimizer.state.values()}
    return device, state_devices, losses


@pytest.fixture
def accelerate():
    return pytest.importorskip("accelerate")


def test_accelerator_picks_npu(accelerate):
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    assert Accelerator().device.type == "npu"


@pytest.mark.parametrize("mixed_precision", ["no", "bf16"])
def test_optimizer_built_before_prepare_trains_like_cpu(accelerate, mixed_precision):
    dev_c, _, loss_c = _run(True, mixed_precision)
    dev_n, states, loss_n = _run(False, mixed_precision)
    assert (dev_c, dev_n, states) == ("cpu", "npu", {"npu"})
    assert sum(loss_n[-4:]) < 0.5 * sum(loss_n[:4])  # it learns (last epoch vs first)
    tol = dict(atol=1e-5, rtol=1e-4) if mixed_precision == "no" else dict(atol=2e-2, rtol=2e-2)
    assert_close(loss_n, loss_c, **tol)


def _fp16_reference(epochs=6):
    """What accelerate's fp16 does (autocast + GradScaler), written out on cpu."""
    from accelerate.utils import set_seed

    set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 16, generator=g)
    y = x[:, :4].sum(1, keepdim=True)
    scaler = torch.amp.GradScaler("cpu")
    losses = []
    for _ in range(epochs):
        for xb, yb in zip(x.split(16), y.split(16)):
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(model(xb).float(), yb)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss.item())
    return losses, scaler.get_scale()


def test_fp16_with_grad_scaler_matches_cpu_autocast(accelerate):
    # accelerate refuses fp16 on cpu: the reference is its recipe written out
    # with cpu autocast and torch.amp.GradScaler("cpu").
    loss_ref, _ = _fp16_reference()
    dev, _, loss_n = _run(False, "fp16")
    assert dev == "npu"
    assert sum(loss_n[-4:]) < 0.5 * sum(loss_n[:4])
    assert_close(loss_n, loss_ref, atol=1e-2, rtol=1e-2)


def test_accelerate_env_reports_the_npu(accelerate):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "accelerate.commands.accelerate_cli", "env"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "PyTorch accelerator: NPU" in proc.stdout
    assert f"CANN version: {torch.version.cann}" in proc.stdout
