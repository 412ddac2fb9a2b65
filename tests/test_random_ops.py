"""Random ops run natively and draw from the npu generator only."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401

RANDOM_OPS = {
    "rand": lambda: torch.rand(5, device="npu"),
    "randn": lambda: torch.randn(5, device="npu"),
    "randint": lambda: torch.randint(0, 100, (5,), device="npu"),
    "normal": lambda: torch.normal(torch.zeros(5, device="npu"), 1.0),
    "uniform_": lambda: torch.empty(5, device="npu").uniform_(),
    "bernoulli": lambda: torch.bernoulli(torch.full((16,), 0.5, device="npu")),
    "dropout": lambda: F.dropout(torch.ones(16, device="npu"), 0.5),
    "multinomial": lambda: torch.multinomial(torch.ones(10, device="npu"), 5),
    "randperm": lambda: torch.randperm(8, device="npu"),
    "rand_like": lambda: torch.rand_like(torch.zeros(4, device="npu")),
    "exponential_": lambda: torch.empty(4, device="npu").exponential_(),
}


@pytest.mark.parametrize("name", sorted(RANDOM_OPS))
def test_same_npu_seed_same_numbers(name):
    op = RANDOM_OPS[name]
    torch.npu.manual_seed(11)
    first = op().cpu()
    torch.manual_seed(99)  # the CPU generator must not influence npu random ops
    torch.npu.manual_seed(11)
    second = op().cpu()
    torch.npu.manual_seed(12)
    other = op().cpu()
    assert torch.equal(first, second)
    assert not torch.equal(first, other)


def test_random_ops_do_not_fall_back():
    torch_npu._C._reset_fallback_counts()
    for op in RANDOM_OPS.values():
        op()
    assert torch_npu.npu.fallback_counts() == {}


def test_distribution_statistics():
    torch.npu.manual_seed(0)
    x = torch.randn(200_000, device="npu").cpu()
    assert abs(x.mean().item()) < 0.01 and abs(x.std().item() - 1) < 0.01
    u = torch.rand(200_000, device="npu").cpu()
    assert 0 <= u.min().item() and u.max().item() < 1 and abs(u.mean().item() - 0.5) < 0.01
    mask = F.dropout(torch.ones(200_000, device="npu"), 0.3).cpu()
    assert abs((mask == 0).float().mean().item() - 0.3) < 0.01


@pytest.mark.parametrize("call,message", [
    (lambda w: torch.multinomial(w, 0), "cannot sample n_sample <= 0 samples"),
    (lambda w: torch.multinomial(w, 5, replacement=False), "cannot sample n_sample > prob_dist.size"),
    (lambda w: torch.multinomial(w.long(), 2), "multinomial only supports floating-point dtypes"),
    (lambda w: torch.multinomial(w.reshape(1, 1, 4), 2), "prob_dist must be 1 or 2 dim"),
])
def test_multinomial_refuses_bad_arguments_at_the_call_as_cpu_does(call, message):
    # The queued npu kernel checks ATen's arguments on the caller, with cpu's words.
    for device in ("cpu", "npu"):
        with pytest.raises(RuntimeError, match=message):
            call(torch.tensor([1.0, 2.0, 3.0, 4.0], device=device))
