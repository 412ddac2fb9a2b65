"""Backward passes of npu tensors run on their calling thread (Note [npu backward on the calling
thread], torch_npu/_backward_on_caller.py), with the results of autograd's npu device thread and of cpu."""

import threading

import pytest
import torch
import torch.utils.checkpoint

from conftest import run_python


def _hook_threads(device):
    seen = []
    w = torch.randn(8, device=device, requires_grad=True)
    w.register_hook(lambda g: seen.append(threading.current_thread()))
    (w * 3).sum().backward()
    return seen, w.grad


def test_an_npu_backward_runs_its_hooks_on_the_calling_thread():
    seen, grad = _hook_threads("npu")
    assert seen == [threading.current_thread()]
    assert torch.equal(grad.cpu(), torch.full((8,), 3.0))
    # and from another Python thread too, which gets its own pass
    result = {}
    worker = threading.Thread(target=lambda: result.update(seen=_hook_threads("npu")[0]), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the backward pass on the second thread did not finish"
    assert result["seen"] == [worker]
    # torch.autograd.grad goes through the same engine entry
    w = torch.randn(8, device="npu", requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(threading.current_thread()))
    (grad,) = torch.autograd.grad((w * w).sum(), [w])
    assert seen == [threading.current_thread()]
    torch.testing.assert_close(grad.cpu(), 2 * w.detach().cpu())


def test_the_callers_multithreading_setting_is_kept():
    assert torch.autograd.is_multithreading_enabled()
    during = []
    w = torch.randn(4, device="npu", requires_grad=True)
    w.register_hook(lambda g: during.append(torch.autograd.is_multithreading_enabled()))
    (w * 2).sum().backward()
    assert during == [False] and torch.autograd.is_multithreading_enabled()
    with torch.autograd.set_multithreading_enabled(False):
        (w * 2).sum().backward()
        assert not torch.autograd.is_multithreading_enabled()
    assert torch.autograd.is_multithreading_enabled()


def test_a_failing_backward_restores_the_setting():
    w = torch.randn(4, device="npu", requires_grad=True)

    def fail(grad):
        raise RuntimeError("hook failed on purpose")

    w.register_hook(fail)
    with pytest.raises(RuntimeError, match="hook failed on purpose"):
        (w * 2).sum().backward()
    assert torch.autograd.is_multithreading_enabled()


def _train(device, reentrant):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(device)
    x = torch.randn(8, 16).to(device).requires_grad_()  # a reentrant checkpoint needs an input that does
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        y = torch.utils.checkpoint.checkpoint(model, x, use_reentrant=reentrant)
        y.square().sum().backward()  # (a reentrant checkpoint supports backward(), not autograd.grad)
        opt.step()
    return [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpointed_training_equals_cpu(reentrant):
    for npu, cpu in zip(_train("npu", reentrant), _train("cpu", reentrant)):
        torch.testing.assert_close(npu, cpu, rtol=1e-5, atol=1e-6)


def test_device_threads_on_request_give_the_same_gradients():
    code = """
        import threading, torch, torch_npu
        w = torch.arange(6.0, device="npu").requires_grad_()
        seen = []
        w.register_hook(lambda g: seen.append(threading.current_thread() is threading.main_thread()))
        (w.sin() * w).sum().backward()
        print("MAIN", seen[0], "GRAD", w.grad.cpu().tolist())
    """
    on_caller = run_python(code)
    device_threads = run_python(code, VNPU_AUTOGRAD_DEVICE_THREADS="1")
    assert on_caller.returncode == 0 and device_threads.returncode == 0, on_caller.stderr + device_threads.stderr
    assert "MAIN True" in on_caller.stdout and "MAIN False" in device_threads.stdout
    assert on_caller.stdout.split("GRAD")[1] == device_threads.stdout.split("GRAD")[1]


def test_a_bad_device_threads_value_is_refused_at_import():
    r = run_python("import torch_npu", VNPU_AUTOGRAD_DEVICE_THREADS="yes")
    assert r.returncode != 0
    assert "VNPU_AUTOGRAD_DEVICE_THREADS must be 0 or 1, but got 'yes'" in r.stderr


def test_concurrent_backward_passes_from_two_threads_accumulate_like_cpu():
    # Each thread now runs its own pass (the npu device thread used to take them one at a time);
    # AccumulateGrad's lock keeps the shared leaf's gradient whole, as on cpu.
    def accumulate(device):
        w = torch.linspace(-1, 1, 64, device=device).requires_grad_()

        def work(k):
            for _ in range(20):
                (w * k).sin().sum().backward()

        threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in (1.0, 2.0)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        return w.grad.cpu()

    torch.testing.assert_close(accumulate("npu"), accumulate("cpu"), rtol=1e-5, atol=1e-5)
