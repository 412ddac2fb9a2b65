"""Moving a module between cpu and npu keeps its Parameter objects, as between
cpu and cuda, so an optimizer built before the move trains the moved model
(accelerate's and DeepSpeed's pattern: optimizer first, then prepare)."""

import copy

import pytest
import torch
from torch.testing import assert_close


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


@pytest.mark.parametrize("move", [lambda m: m.to("npu"), lambda m: m.npu(), lambda m: m.to(torch.device("npu", 0))])
def test_move_keeps_parameter_objects(move):
    m = _model()
    before = list(m.parameters())
    move(m)
    after = list(m.parameters())
    assert all(a is b for a, b in zip(before, after))
    assert all(p.device.type == "npu" for p in after)
    m.cpu()
    assert all(a is b for a, b in zip(before, m.parameters()))
    assert all(p.device.type == "cpu" for p in m.parameters())


def test_optimizer_built_before_move_trains_like_cpu():
    data = torch.randn(32, 8, generator=torch.Generator().manual_seed(1))
    target = data.sum(1, keepdim=True)
    losses = {}
    for device in ["cpu", "npu"]:
        m = _model()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)  # before the move
        m.to(device)
        run = []
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(data.to(device)), target.to(device))
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses[device] = run
        assert all(s["exp_avg"].device.type == device for s in opt.state.values())
    assert losses["npu"][-1] < losses["npu"][0]  # it learns
    assert_close(losses["npu"], losses["cpu"], rtol=1e-5, atol=1e-6)


def test_gradients_move_with_their_parameters():
    m = _model().npu()
    m(torch.randn(4, 8, device="npu")).sum().backward()
    grads = [p.grad.cpu() for p in m.parameters()]
    m.cpu()
    for p, g in zip(m.parameters(), grads):
        assert p.grad.device.type == "cpu"
        assert torch.equal(p.grad, g)


def test_assigning_data_across_devices():
    p = torch.nn.Parameter(torch.zeros(3))
    p.data = torch.arange(3.0, device="npu")
    assert p.device.type == "npu" and isinstance(p, torch.nn.Parameter)
    assert torch.equal(p.cpu(), torch.arange(3.0))
    p.data = torch.ones(2)  # and back, with a new shape
    assert p.device.type == "cpu" and torch.equal(p.detach(), torch.ones(2))
    (p * 2).sum().backward()
    assert torch.equal(p.grad, torch.full((2,), 2.0))


def test_incompatible_types_still_rejected():
    p = torch.zeros(3, device="npu")
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        p.data = torch.zeros(3, device="meta")
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        p.data = torch.zeros(3).to_sparse()


def test_deepcopy_and_state_dict_after_move():
    m = _model()
    m.npu()
    c = copy.deepcopy(m)
    for a, b in zip(m.parameters(), c.parameters()):
        assert a is not b and b.device.type == "npu" and torch.equal(a.cpu(), b.cpu())
    sd = m.state_dict()
    m2 = _model().npu()
    m2.load_state_dict(sd)
    assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(m.parameters(), m2.parameters()))
