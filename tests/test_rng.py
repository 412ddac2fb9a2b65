"""NPU random number generation: seeding, state save/restore, per-device
generators."""

import pytest
import torch
import torch.nn.functional as F

from conftest import run_python


def _draw():
    return (torch.randn(1000, device="npu").cpu(),
            torch.rand(10, 10, device="npu").cpu(),
            torch.randint(0, 100, (50,), device="npu").cpu(),
            F.dropout(torch.ones(2000, device="npu"), p=0.5).cpu(),
            torch.randperm(30, device="npu").cpu(),
            torch.empty(100, device="npu").normal_(2.0, 3.0).cpu(),
            torch.empty(100, device="npu").uniform_(-1, 1).cpu(),
            torch.bernoulli(torch.full((100,), 0.3, device="npu")).cpu(),
            torch.multinomial(torch.tensor([0.1, 0.2, 0.7], device="npu"), 20, replacement=True).cpu())


def _assert_same(a, b):
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_manual_seed_reproducible():
    torch.npu.manual_seed(42)
    first = _draw()
    torch.npu.manual_seed(42)
    second = _draw()
    _assert_same(first, second)
    torch.npu.manual_seed(43)
    third = _draw()
    assert not torch.equal(first[0], third[0])


def test_draws_advance_state():
    torch.npu.manual_seed(0)
    a = torch.randn(100, device="npu").cpu()
    b = torch.randn(100, device="npu").cpu()
    assert not torch.equal(a, b)


def test_dropout_mask_reproducible():
    x = torch.randn(64, 64, device="npu", requires_grad=True)
    torch.npu.manual_seed(7)
    y1 = F.dropout(x, 0.3)
    torch.npu.manual_seed(7)
    y2 = F.dropout(x, 0.3)
    assert torch.equal((y1 == 0).cpu(), (y2 == 0).cpu())


def test_reproducible_across_processes():
    code = """
        import torch, torch_npu
        torch.npu.manual_seed(1234)
        print(torch.randn(5, device="npu").cpu().tolist())
    """
    r1, r2 = run_python(code), run_python(code)
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr[-2000:] + r2.stderr[-2000:]
    assert r1.stdout.strip(), r1.stderr[-2000:]
    assert r1.stdout == r2.stdout, (r1.stdout, r2.stdout)


def test_get_set_rng_state_roundtrip():
    torch.npu.manual_seed(5)
    torch.randn(10, device="npu")
    state = torch.npu.get_rng_state()
    assert isinstance(state, torch.Tensor) and state.dtype == torch.uint8 and state.device.type == "cpu"
    a = _draw()
    torch.npu.set_rng_state(state)
    b = _draw()
    _assert_same(a, b)


def test_rng_state_takes_any_devices_index_as_torch_npu_does():
    # Megatron's torch.cuda.random.get_rng_state(device="cuda") reaches here
    # under transfer_to_npu: only the index counts (torch_npu and torch.cuda alike).
    torch.npu.manual_seed(9)
    assert torch.equal(torch.npu.get_rng_state("cuda"), torch.npu.get_rng_state())
    assert torch.equal(torch.npu.get_rng_state(torch.device("cuda", 1)), torch.npu.get_rng_state(1))
    state = torch.npu.get_rng_state("cuda:0")
    a = _draw()
    torch.npu.set_rng_state(state, device="cuda")
    _assert_same(a, _draw())


def test_rng_state_all_roundtrip():
    states = torch.npu.get_rng_state_all()
    assert len(states) == torch.npu.device_count()
    x = torch.randn(10, device="npu:1").cpu()
    torch.npu.set_rng_state_all(states)
    y = torch.randn(10, device="npu:1").cpu()
    assert torch.equal(x, y)


def test_torch_manual_seed_seeds_npu():
    torch.manual_seed(99)
    a = torch.randn(100, device="npu").cpu()
    b = torch.randn(100, device="npu:3").cpu()
    torch.manual_seed(99)
    assert torch.equal(a, torch.randn(100, device="npu").cpu())
    assert torch.equal(b, torch.randn(100, device="npu:3").cpu())
    assert torch.npu.initial_seed() == 99


def test_per_device_generators_are_independent():
    torch.npu.manual_seed_all(3)
    a0 = torch.randn(10, device="npu:0").cpu()
    a1 = torch.randn(10, device="npu:1").cpu()
    # Same seed on both devices: same stream of numbers, like CUDA.
    assert torch.equal(a0, a1)
    torch.npu.manual_seed_all(3)
    torch.randn(10, device="npu:0")  # advancing device 0 does not touch device 1
    assert torch.equal(torch.randn(10, device="npu:1").cpu(), a1)


def test_manual_seed_only_current_device():
    torch.npu.manual_seed_all(1)
    with torch.npu.device(2):
        torch.npu.manual_seed(50)
        a = torch.randn(5, device="npu").cpu()
    torch.npu.manual_seed_all(1)
    with torch.npu.device(2):
        torch.npu.manual_seed(50)
        assert torch.equal(torch.randn(5, device="npu").cpu(), a)


def test_explicit_generator():
    g = torch.Generator(device="npu")
    assert g.device.type == "npu"
    g.manual_seed(11)
    a = torch.randn(20, device="npu", generator=g).cpu()
    g.manual_seed(11)
    b = torch.randn(20, device="npu", generator=g).cpu()
    assert torch.equal(a, b)


def test_default_generators():
    gens = torch.npu.default_generators
    assert len(gens) == torch.npu.device_count()
    gens[0].manual_seed(21)
    a = torch.rand(5, device="npu:0").cpu()
    torch.npu.manual_seed(21)
    assert torch.equal(a, torch.rand(5, device="npu:0").cpu())


def test_seed_and_initial_seed():
    torch.npu.seed()
    s = torch.npu.initial_seed()
    assert isinstance(s, int)
    torch.npu.manual_seed(s)
    assert torch.npu.initial_seed() == s


def test_fork_rng():
    torch.npu.manual_seed(8)
    with torch.random.fork_rng(devices=[0], device_type="npu"):
        torch.randn(100, device="npu")
    after = torch.randn(5, device="npu").cpu()
    torch.npu.manual_seed(8)
    assert torch.equal(after, torch.randn(5, device="npu").cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_random_dtypes(dtype):
    torch.npu.manual_seed(0)
    x = torch.randn(1000, dtype=dtype, device="npu")
    assert x.dtype == dtype
    assert abs(x.float().mean().item()) < 0.15


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_preserves_dropout_rng(reentrant):
    # Gradient checkpointing (seed 002) recomputes the forward in backward; the
    # recomputation must replay the same dropout mask, or gradients are wrong.
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 64).npu()
    x0 = torch.randn(32, 64, device="npu")

    def f(z):
        return F.dropout(lin(z), 0.5)

    x = x0.clone().requires_grad_()
    torch.npu.manual_seed(5)
    y = torch.utils.checkpoint.checkpoint(f, x, use_reentrant=reentrant)
    y.sum().backward()
    grad_ckpt = x.grad.cpu()

    x = x0.clone().requires_grad_()
    torch.npu.manual_seed(5)
    f(x).sum().backward()
    torch.testing.assert_close(grad_ckpt, x.grad.cpu())


def test_initialized_flag_like_cuda():
    # torch.utils.checkpoint reads torch.<device>._initialized.
    torch.ones(1, device="npu")
    assert torch.npu._initialized is True


def test_rng_state_offset_moves_the_default_generator_like_cudas():
    torch.npu.manual_seed(1)
    assert torch.npu._get_rng_state_offset() == 0
    first = torch.rand(4, device="npu").cpu()
    torch.npu.manual_seed(1)
    torch.npu._set_rng_state_offset(100)
    assert torch.npu._get_rng_state_offset() == 100
    moved = torch.rand(4, device="npu").cpu()
    torch.npu.manual_seed(1)
    torch.npu._set_rng_state_offset(100, device="npu:0")
    assert torch.equal(torch.rand(4, device="npu").cpu(), moved)
    assert not torch.equal(moved, first)


def test_rng_state_under_fake_tensors_is_a_real_host_tensor_not_a_crash():
    # The generator makes its state tensor without dispatching: under
    # FakeTensorMode at::empty would have returned a tensor without data.
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        state = torch.npu.get_rng_state(torch.device("npu:0"))
    assert type(state) is torch.Tensor and state.shape == (16,) and state.device.type == "cpu"


def test_compiled_checkpoint_replays_dropout_like_eager():
    # checkpoint(preserve_rng_state) with fallback_random runs the random op
    # through torch's run_and_save_rng_state / run_with_rng_state, whose
    # backend selection knew CPU, CUDA, XPU and HPU only
    # (torch_npu/_rng_state_ops.py).
    from torch.utils.checkpoint import checkpoint

    def fn(x):
        return checkpoint(lambda t: torch.sigmoid(torch.dropout(torch.sigmoid(t), p=0.5, train=True)), x,
                          use_reentrant=False, preserve_rng_state=True)

    torch._dynamo.reset()
    with torch._inductor.config.patch("fallback_random", True):
        results = []
        for compiled in (False, True):
            x = torch.linspace(-2, 2, 16, device="npu").reshape(4, 4).requires_grad_()
            torch.npu.manual_seed(42)
            out = (torch.compile(fn, backend="aot_eager") if compiled else fn)(x)
            out.sum().backward()
            results.append((out.detach().cpu(), x.grad.cpu()))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
