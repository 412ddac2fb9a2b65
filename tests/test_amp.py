"""Automatic mixed precision on npu: autocast op lists and GradScaler."""

import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn as nn

import torch_npu  # noqa: F401


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_autocast_op_lists(dtype):
    x, w = torch.randn(8, 8).npu(), torch.randn(8, 8).npu()
    with torch.autocast(device_type="npu", dtype=dtype):
        assert torch.is_autocast_enabled("npu")
        mm = x @ w                                 # lower precision
        lin = nn.functional.linear(x, w)           # lower precision
        red = mm.sum()                             # float32 list (as on CUDA)
        soft = torch.log_softmax(mm, -1)           # float32 list
        loss = nn.functional.mse_loss(mm, mm.detach())  # float32 list
        mixed = torch.addcmul(x, mm, x)            # promote: widest input
    assert mm.dtype == dtype and lin.dtype == dtype
    assert soft.dtype == torch.float32 and loss.dtype == torch.float32
    assert red.dtype == torch.float32
    assert mixed.dtype == torch.float32


def test_npu_amp_autocast_defaults_to_float16():
    x = torch.randn(4, 4).npu()
    with torch.npu.amp.autocast():
        assert (x @ x).dtype == torch.float16
    assert (x @ x).dtype == torch.float32


def test_autocast_matches_cpu_numerics():
    torch.manual_seed(0)
    x, w = torch.randn(16, 32), torch.randn(32, 8)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        expected = x @ w
    with torch.autocast(device_type="npu", dtype=torch.bfloat16):
        got = x.npu() @ w.npu()
    torch.testing.assert_close(got.cpu(), expected)


def test_unsupported_autocast_dtype_warns_and_disables():
    x = torch.randn(2, 2).npu()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast(device_type="npu", dtype=torch.float64):
            y = x @ x
    assert y.dtype == torch.float32
    assert any("not supported" in str(w.message) for w in caught)


def test_amp_supported_dtypes_and_bf16():
    assert torch.npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16, torch.float32]  # torch_npu's
    assert torch.npu.is_bf16_supported()
    assert torch_npu.npu.utils.is_bf16_supported()


def test_float32_autocast_runs_lower_precision_ops_in_float32():
    # torch_npu accepts float32 as an autocast dtype: half inputs of the
    # lower-precision ops (mm, linear) are cast up, float32 ones stay.
    for dtype in (torch.float16, torch.bfloat16):
        a = torch.rand(8, 8, dtype=dtype).npu()
        with torch.autocast(device_type="npu", dtype=torch.float32):
            got = torch.mm(a, a)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.cpu(), torch.mm(a.cpu().float(), a.cpu().float()))


def test_grad_scaler_skips_inf_steps_and_backs_off():
    model = nn.Linear(4, 2).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.npu.amp.GradScaler(init_scale=1024.0, growth_interval=2)
    x = torch.randn(3, 4).npu()
    before = model.weight.detach().cpu().clone()
    opt.zero_grad()
    with torch.npu.amp.autocast():
        loss = model(x * float("inf")).float().sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 512.0                       # backed off
    assert torch.equal(model.weight.detach().cpu(), before)  # step skipped
    for _ in range(2):                                        # finite steps: grows after growth_interval
        opt.zero_grad()
        with torch.npu.amp.autocast():
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 1024.0
    assert not torch.equal(model.weight.detach().cpu(), before)


def test_static_grad_scaler_keeps_scale():
    scaler = torch.npu.amp.GradScaler(init_scale=128.0, dynamic=False)
    model = nn.Linear(4, 2).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.npu.amp.autocast():
        loss = model(torch.randn(3, 4).npu() * float("inf")).float().sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 128.0


def test_generic_grad_scaler():
    scaler = torch.amp.GradScaler("npu")
    assert scaler.is_enabled()


def test_trainer_with_amp_follows_cpu_loss_curve():
    """The seeds' NPUTrainer pattern (autocast + GradScaler + clip_grad_norm_)
    trains like the same code on cpu with bfloat16 autocast, within AMP tolerance."""
    def train(device):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
        scaler = torch.amp.GradScaler(device, enabled=device == "npu")
        data = torch.randn(64, 32)
        target = torch.randint(0, 4, (64,))
        losses = []
        for _ in range(20):
            opt.zero_grad()
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                loss = nn.functional.cross_entropy(model(data.to(device)), target.to(device))
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            scaler.step(opt)
            scaler.update()
            losses.append(loss.item())
        return losses
    npu, cpu = train("npu"), train("cpu")
    assert npu[-1] < npu[0] * 0.8
    for a, b in zip(npu, cpu):
        assert abs(a - b) < 0.05 * max(1.0, abs(b))


def test_torch_npus_scaler_skips_every_optimizer_of_an_iteration_that_overflowed(capsys):
    def one_iteration(scaler):
        a = torch.nn.Linear(3, 3).npu()
        b = torch.nn.Linear(3, 3).npu()
        opt_a, opt_b = torch.optim.SGD(a.parameters(), lr=1.0), torch.optim.SGD(b.parameters(), lr=1.0)
        before = [p.detach().clone() for p in (*a.parameters(), *b.parameters())]
        x = torch.randn(2, 3, device="npu")
        scaler.scale(a(x).sum() + b(x).sum()).backward()
        a.weight.grad.fill_(float("inf"))  # only a's gradients overflow
        scaler.step(opt_a)
        scaler.step(opt_b)
        scaler.update()
        after = list((*a.parameters(), *b.parameters()))
        return [torch.equal(x.cpu(), y.detach().cpu()) for x, y in zip(before, after)]

    # torch_npu: the iteration's overflow skips b's step too (real torch_npu's _has_overflow).
    assert one_iteration(torch.npu.amp.GradScaler(init_scale=4.0)) == [True, True, True, True]
    assert "Gradient overflow. Skipping step" in capsys.readouterr().out
    # torch.amp's scaler skips only the optimizer whose gradients overflowed.
    assert one_iteration(torch.amp.GradScaler("npu", init_scale=4.0)) == [True, True, False, False]


SHARDED_SCALER = r"""
import copy
import torch, torch_npu
import torch.distributed as dist
from torch.distributed.fsdp import sharded_grad_scaler
from torch_npu.npu.amp.sharded_grad_scaler import _ShardedGradScaler

# torch_npu puts its scaler in torch's module, as real torch_npu does; the reference is torch's own.
assert sharded_grad_scaler.ShardedGradScaler is _ShardedGradScaler
ShardedGradScaler = _ShardedGradScaler.__mro__[1]
assert ShardedGradScaler.__module__ == "torch.distributed.fsdp.sharded_grad_scaler"

dist.init_process_group("cpu:gloo,npu:hccl", store=dist.HashStore(), rank=0, world_size=1)
torch.manual_seed(0)
ref = torch.nn.Linear(4, 3)
model = copy.deepcopy(ref).npu()
runs = []
for m, scaler, dev in ((model, _ShardedGradScaler(init_scale=2.0 ** 10, growth_interval=1), "npu"),
                       (ref, ShardedGradScaler(device="cpu", init_scale=2.0 ** 10, growth_interval=1), "cpu")):
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scales = []
    for step in range(4):
        opt.zero_grad()
        x = torch.ones(2, 4, device=dev) * (step + 1)
        loss = m(x).sum() * (float("inf") if step == 1 else 1.0)  # step 1 overflows: skipped, scale backs off
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    runs.append((scales, [p.detach().cpu() for p in m.parameters()]))
(npu_scales, npu_params), (cpu_scales, cpu_params) = runs
print("scales", npu_scales, cpu_scales)
assert npu_scales == cpu_scales == [2048.0, 1024.0, 2048.0, 4096.0], (npu_scales, cpu_scales)
assert all(torch.allclose(a, b) for a, b in zip(npu_params, cpu_params))
assert _ShardedGradScaler()._device == "npu"
print("ok")
"""


def test_sharded_grad_scaler_skips_and_scales_as_torchs_does_on_cpu():
    # torch_npu.npu.amp.sharded_grad_scaler._ShardedGradScaler (real torch_npu's,
    # the npu by default) against torch's ShardedGradScaler on cpu/gloo: an
    # overflowing step is skipped on both and the scale backs off, then grows.
    done = subprocess.run([sys.executable, "-c", SHARDED_SCALER], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
