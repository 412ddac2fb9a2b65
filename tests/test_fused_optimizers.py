"""torch_npu.optim: the ten fused optimizers of real torch_npu.

Each optimizer is checked three ways: the same steps on npu and on cpu agree
(1e-6), the steps agree with an independent reference (torch.optim for the
algorithms it has; for LAMB, AdamP, BertAdam and RMSpropTF a float64 numpy
transcription of the published algorithm written here), and the optimizer
behaves as a torch.optim optimizer (state_dict round trip, closure, GradScaler,
argument and gradient checks).
"""

import copy
import importlib
import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

import torch_npu
from torch_npu.optim import (NpuFusedAdadelta, NpuFusedAdam, NpuFusedAdamP, NpuFusedAdamW, NpuFusedBertAdam,
                             NpuFusedLamb, NpuFusedOptimizerBase, NpuFusedRMSprop, NpuFusedRMSpropTF, NpuFusedSGD)

CASES = {
    "sgd": (NpuFusedSGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)),
    "adam": (NpuFusedAdam, dict(lr=0.01, weight_decay=0.01, amsgrad=True)),
    "adamw": (NpuFusedAdamW, dict(lr=0.01)),
    "adadelta": (NpuFusedAdadelta, dict(lr=1.0, weight_decay=0.01)),
    "rmsprop": (NpuFusedRMSprop, dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.01)),
    "lamb": (NpuFusedLamb, dict(lr=0.01, weight_decay=0.01, use_global_grad_norm=True)),
    "adamp": (NpuFusedAdamP, dict(lr=0.01, weight_decay=0.01, nesterov=True)),
    "bert_adam": (NpuFusedBertAdam, dict(lr=0.01, warmup=0.2, t_total=10)),
    "rmsprop_tf": (NpuFusedRMSpropTF, dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.01)),
}
BASE_DERIVED = ["lamb", "adamp", "bert_adam", "rmsprop_tf"]


def tiny_model(device, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    return model.to(device)


def batch(device, step):
    gen = torch.Generator().manual_seed(100 + step)
    return torch.randn(5, 4, generator=gen).to(device), torch.randn(5, 2, generator=gen).to(device)


def train(cls, kwargs, device, steps=4, model=None, opt=None, first_step=0):
    model = tiny_model(device) if model is None else model
    opt = cls(model.parameters(), **kwargs) if opt is None else opt
    for step in range(first_step, first_step + steps):
        x, y = batch(device, step)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return model, opt


def cpu_params(model):
    return [p.detach().cpu() for p in model.parameters()]


# ---- module layout ---------------------------------------------------------

def test_all_and_submodules():
    assert torch_npu.optim.__all__ == [
        "NpuFusedOptimizerBase", "NpuFusedSGD", "NpuFusedAdadelta", "NpuFusedLamb", "NpuFusedAdam",
        "NpuFusedAdamW", "NpuFusedAdamP", "NpuFusedBertAdam", "NpuFusedRMSprop", "NpuFusedRMSpropTF"]
    modules = {"npu_fused_optim_base": "NpuFusedOptimizerBase", "npu_fused_sgd": "NpuFusedSGD",
               "npu_fused_adadelta": "NpuFusedAdadelta", "npu_fused_lamb": "NpuFusedLamb",
               "npu_fused_adam": "NpuFusedAdam", "npu_fused_adamw": "NpuFusedAdamW",
               "npu_fused_adamp": "NpuFusedAdamP", "npu_fused_bert_adam": "NpuFusedBertAdam",
               "npu_fused_rmsprop": "NpuFusedRMSprop", "npu_fused_rmsprop_tf": "NpuFusedRMSpropTF"}
    for module, name in modules.items():
        mod = importlib.import_module("torch_npu.optim." + module)
        assert getattr(mod, name) is getattr(torch_npu.optim, name)
        assert mod.__all__ == [name]
    for key in BASE_DERIVED:
        assert issubclass(CASES[key][0], NpuFusedOptimizerBase)
    for cls, plain in [(NpuFusedSGD, torch.optim.SGD), (NpuFusedAdam, torch.optim.Adam),
                       (NpuFusedAdamW, torch.optim.AdamW), (NpuFusedAdadelta, torch.optim.Adadelta),
                       (NpuFusedRMSprop, torch.optim.RMSprop)]:
        assert issubclass(cls, plain)


# ---- npu equals cpu --------------------------------------------------------

@pytest.mark.parametrize("name", list(CASES))
def test_npu_matches_cpu(name):
    cls, kwargs = CASES[name]
    m_npu, _ = train(cls, kwargs, "npu")
    m_cpu, _ = train(cls, kwargs, "cpu")
    start = cpu_params(tiny_model("cpu"))
    for a, b, s in zip(cpu_params(m_npu), cpu_params(m_cpu), start):
        assert not torch.equal(b, s)  # the optimizer did move the parameters
        assert_close(a, b, atol=1e-6, rtol=0)


# ---- torch.optim references ------------------------------------------------

@pytest.mark.parametrize("cls,plain,kwargs", [
    (NpuFusedAdadelta, torch.optim.Adadelta, dict(lr=0.5, rho=0.8, eps=1e-6, weight_decay=0.05)),
    (NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, eps=1e-3, weight_decay=1e-3)),
    (NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=0.01, momentum=0.5, centered=True)),
    (NpuFusedSGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.1)),
    (NpuFusedAdam, torch.optim.Adam, dict(lr=0.01, weight_decay=0.1)),
    (NpuFusedAdamW, torch.optim.AdamW, dict(lr=0.01, amsgrad=True)),
])
def test_matches_torch_optim(cls, plain, kwargs):
    m_fused, _ = train(cls, kwargs, "npu")
    m_plain, _ = train(plain, dict(kwargs, foreach=False), "cpu")
    for a, b in zip(cpu_params(m_fused), cpu_params(m_plain)):
        assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_defaults_follow_torch_npu():
    p = [torch.nn.Parameter(torch.ones(2))]
    assert NpuFusedAdadelta(p).defaults["lr"] == 1.0 and NpuFusedAdadelta(p).defaults["rho"] == 0.9
    assert NpuFusedRMSprop(p).defaults["alpha"] == 0.99
    d = NpuFusedRMSpropTF(p).defaults
    assert (d["lr"], d["alpha"], d["eps"], d["lr_in_momentum"], d["decoupled_decay"]) == (1e-2, 0.9, 1e-10, True, False)
    assert NpuFusedLamb(p).defaults["eps"] == 1e-6 and NpuFusedLamb(p).adam is False
    d = NpuFusedAdamP(p).defaults
    assert (d["delta"], d["wd_ratio"], d["weight_decay"], d["nesterov"]) == (0.1, 0.1, 0, False)
    d = NpuFusedBertAdam(p, lr=0.1).defaults
    assert (d["warmup"], d["t_total"], d["schedule"], d["e"], d["weight_decay"], d["max_grad_norm"]) == \
        (-1, -1, "warmup_linear", 1e-6, 0.01, 1.0)
    assert NpuFusedAdamW(p).defaults["weight_decay"] == 1e-2


# ---- numpy references of the published algorithms --------------------------
# Synthetic gradients: the same gradient sequence is fed to the optimizer and
# to the reference, which is written from the algorithms' definitions.

SHAPES = [(3, 4), (4,), (2, 2, 3)]


def synthetic(seed=0, steps=5):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s) for s in SHAPES]
    grads = [[rng.standard_normal(s) for s in SHAPES] for _ in range(steps)]
    return params, grads


def run_fused(cls, kwargs, params, grads, device="npu"):
    ps = [torch.nn.Parameter(torch.tensor(p, dtype=torch.float32, device=device)) for p in params]
    opt = cls(ps, **kwargs)
    for step_grads in grads:
        for p, g in zip(ps, step_grads):
            p.grad = torch.tensor(g, dtype=torch.float32, device=device)
        opt.step()
    return [p.detach().cpu().double().numpy() for p in ps]


def lamb_reference(params, grads, lr, betas, eps, weight_decay, adam=False, global_norm=False):
    b1, b2 = betas
    ps = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    for step_grads in grads:
        total = math.sqrt(sum(float((g * g).sum()) for g in step_grads))
        for i, g in enumerate(step_grads):
            if global_norm and total > 1:
                g = g / total
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            r = m[i] / (np.sqrt(v[i]) + eps) + weight_decay * ps[i]
            phi = min(float(np.linalg.norm(ps[i])), 10.0)  # the scaling function of the paper, clipped at 10
            r_norm = float(np.linalg.norm(r))
            ratio = 1.0 if adam or phi == 0 or r_norm == 0 else phi / r_norm
            ps[i] = ps[i] - lr * ratio * r
    return ps


@pytest.mark.parametrize("kwargs", [dict(lr=0.01, weight_decay=0.01), dict(lr=0.02, eps=1e-4, adam=True),
                                    dict(lr=0.01, betas=(0.8, 0.9), use_global_grad_norm=True)])
def test_lamb_reference(kwargs):
    params, grads = synthetic(1)
    got = run_fused(NpuFusedLamb, kwargs, params, grads)
    want = lamb_reference(params, grads, kwargs["lr"], kwargs.get("betas", (0.9, 0.999)), kwargs.get("eps", 1e-6),
                          kwargs.get("weight_decay", 0), kwargs.get("adam", False),
                          kwargs.get("use_global_grad_norm", False))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-5)


def adamp_reference(params, grads, lr, betas, eps, weight_decay, delta, wd_ratio, nesterov):
    b1, b2 = betas
    ps = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    for t, step_grads in enumerate(grads, start=1):
        for i, g in enumerate(step_grads):
            p = ps[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            denom = np.sqrt(v[i]) / math.sqrt(1 - b2 ** t) + eps
            d = (b1 * m[i] + (1 - b1) * g) / denom if nesterov else m[i] / denom
            ratio = 1.0
            if p.ndim > 1:
                for rows in (p.shape[0], 1):  # per output channel, then the whole tensor
                    P, G, D = p.reshape(rows, -1), g.reshape(rows, -1), d.reshape(rows, -1)
                    pn = np.linalg.norm(P, axis=1) + eps
                    cos = np.abs((P * G).sum(1)) / (np.linalg.norm(G, axis=1) + eps) / pn
                    if cos.max() < delta / math.sqrt(P.shape[1]):
                        U = P / pn[:, None]
                        d = (D - U * (U * D).sum(1, keepdims=True)).reshape(p.shape)
                        ratio = wd_ratio
                        break
            if weight_decay > 0:
                p = p * (1 - lr * weight_decay * ratio)
            ps[i] = p - lr / (1 - b1 ** t) * d
    return ps


@pytest.mark.parametrize("kwargs", [dict(lr=0.01, weight_decay=0.05), dict(lr=0.01, nesterov=True, eps=1e-5)])
def test_adamp_reference(kwargs):
    params, grads = synthetic(2)
    full = dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0, delta=0.1, wd_ratio=0.1, nesterov=False)
    full.update(kwargs)
    got = run_fused(NpuFusedAdamP, kwargs, params, grads)
    want = adamp_reference(params, grads, **full)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-5)


def test_adamp_projects_scale_invariant_weights():
    # Gradients orthogonal to each row of the weight (those of a scale-invariant
    # layer): the per-channel test fires, the step keeps ||row|| to first order
    # and the weight decay is scaled by wd_ratio.
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 5))
    grads = []
    for _ in range(4):
        g = rng.standard_normal((3, 5))
        g -= w * (g * w).sum(1, keepdims=True) / (w * w).sum(1, keepdims=True)
        grads.append([g])
    kwargs = dict(lr=0.01, weight_decay=0.1, delta=0.1, wd_ratio=0.1)
    got = run_fused(NpuFusedAdamP, kwargs, [w], grads)
    want = adamp_reference([w], grads, betas=(0.9, 0.999), eps=1e-8, nesterov=False, **kwargs)
    np.testing.assert_allclose(got[0], want[0], atol=2e-6, rtol=1e-5)
    # without the projection the result would differ
    plain = adamp_reference([w], grads, betas=(0.9, 0.999), eps=1e-8, nesterov=False, lr=0.01, weight_decay=0.1,
                            delta=0.0, wd_ratio=0.1)
    assert np.abs(got[0] - plain[0]).max() > 1e-4


def bert_schedule(name, x, warmup):
    if x < warmup:
        return x / warmup
    if name == "warmup_cosine":
        return 0.5 * (1 + math.cos(math.pi * x))
    if name == "warmup_constant":
        return 1.0
    if name == "warmup_linear":
        return max((x - 1) / (warmup - 1), 0.0)
    return max(1 - x, 0.0) ** 0.5


def bert_adam_reference(params, grads, lr, warmup=-1, t_total=-1, schedule="warmup_linear", b1=0.9, b2=0.999,
                        e=1e-6, weight_decay=0.01, max_grad_norm=1.0):
    ps = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    for step, step_grads in enumerate(grads):  # the step count is 0 at the first update
        step_grads = list(step_grads)
        if max_grad_norm > 0:  # all gradients of the group clipped together
            norm = math.sqrt(sum(float((g * g).sum()) for g in step_grads))
            coef = max_grad_norm / (norm + 1e-6)
            if coef < 1:
                step_grads = [g * coef for g in step_grads]
        lr_t = lr if t_total == -1 else lr * bert_schedule(schedule, step / t_total, warmup)
        for i, g in enumerate(step_grads):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            u = m[i] / (np.sqrt(v[i]) + e)
            if weight_decay > 0:
                u = u + weight_decay * ps[i]
            ps[i] = ps[i] - lr_t * u
    return ps


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.01),
    dict(lr=0.01, warmup=0.3, t_total=5, schedule="warmup_linear", max_grad_norm=-1),
    dict(lr=0.01, warmup=0.3, t_total=5, schedule="warmup_cosine", weight_decay=0.0),
    dict(lr=0.01, warmup=0.3, t_total=4, schedule="warmup_poly", b1=0.8, e=1e-4),
    dict(lr=0.01, warmup=0.2, t_total=6, schedule="warmup_constant", max_grad_norm=0.5),
])
def test_bert_adam_reference(kwargs):
    params, grads = synthetic(4)
    got = run_fused(NpuFusedBertAdam, kwargs, params, grads)
    want = bert_adam_reference(params, grads, **kwargs)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-5)


def rmsprop_tf_reference(params, grads, lr=1e-2, alpha=0.9, eps=1e-10, weight_decay=0, momentum=0.0,
                         centered=False, decoupled_decay=False, lr_in_momentum=True):
    ps = [p.copy() for p in params]
    ms = [np.ones_like(p) for p in ps]  # TensorFlow starts the mean square at 1
    mg = [np.zeros_like(p) for p in ps]
    mom = [np.zeros_like(p) for p in ps]
    for step_grads in grads:
        for i, g in enumerate(step_grads):
            if weight_decay:
                if decoupled_decay:
                    ps[i] = ps[i] - weight_decay * ps[i]
                else:
                    g = g + weight_decay * ps[i]
            ms[i] = alpha * ms[i] + (1 - alpha) * g * g
            if centered:
                mg[i] = alpha * mg[i] + (1 - alpha) * g
                denom = np.sqrt(ms[i] - mg[i] * mg[i] + eps)
            else:
                denom = np.sqrt(ms[i] + eps)
            if momentum > 0:
                if lr_in_momentum:
                    mom[i] = momentum * mom[i] + lr * g / denom
                    ps[i] = ps[i] - mom[i]
                else:
                    mom[i] = momentum * mom[i] + g / denom
                    ps[i] = ps[i] - lr * mom[i]
            else:
                ps[i] = ps[i] - lr * g / denom
    return ps


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(lr=0.02, momentum=0.9, weight_decay=0.01),
    dict(momentum=0.5, lr_in_momentum=False, centered=True, eps=1e-3),
    dict(weight_decay=0.05, decoupled_decay=True, alpha=0.8),
])
def test_rmsprop_tf_reference(kwargs):
    params, grads = synthetic(5)
    got = run_fused(NpuFusedRMSpropTF, kwargs, params, grads)
    want = rmsprop_tf_reference(params, grads, **kwargs)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-5)


# ---- torch.optim behaviour -------------------------------------------------

@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_round_trip(name):
    cls, kwargs = CASES[name]
    model, opt = train(cls, kwargs, "npu", steps=2)
    saved_model, saved_opt = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
    train(cls, kwargs, "npu", steps=2, model=model, opt=opt, first_step=2)

    resumed = tiny_model("npu", seed=7)
    resumed.load_state_dict(saved_model)
    opt2 = cls(resumed.parameters(), **kwargs)
    opt2.load_state_dict(saved_opt)
    assert opt2.state_dict()["param_groups"] == saved_opt["param_groups"]
    train(cls, kwargs, "npu", steps=2, model=resumed, opt=opt2, first_step=2)
    for a, b in zip(cpu_params(model), cpu_params(resumed)):
        assert_close(a, b, atol=0, rtol=0)


@pytest.mark.parametrize("name", BASE_DERIVED)
def test_deepcopy_continues(name):
    cls, kwargs = CASES[name]
    model, opt = train(cls, dict(kwargs), "npu", steps=2)
    model2, opt2 = copy.deepcopy((model, opt))
    train(cls, kwargs, "npu", steps=2, model=model, opt=opt, first_step=2)
    train(cls, kwargs, "npu", steps=2, model=model2, opt=opt2, first_step=2)
    for a, b in zip(cpu_params(model), cpu_params(model2)):
        assert_close(a, b, atol=0, rtol=0)


@pytest.mark.parametrize("name", BASE_DERIVED)
def test_closure(name):
    cls, kwargs = CASES[name]
    ref, _ = train(cls, kwargs, "npu", steps=1)
    model = tiny_model("npu")
    opt = cls(model.parameters(), **kwargs)
    x, y = batch("npu", 0)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.requires_grad and loss.device.type == "npu"
    for a, b in zip(cpu_params(model), cpu_params(ref)):
        assert_close(a, b, atol=0, rtol=0)


@pytest.mark.parametrize("name", list(CASES))
def test_grad_scaler(name):
    cls, kwargs = CASES[name]
    model, plain = tiny_model("npu"), tiny_model("npu")
    opt, opt_plain = cls(model.parameters(), **kwargs), cls(plain.parameters(), **kwargs)
    scaler = torch.npu.amp.GradScaler(init_scale=128.0)
    for step in range(2):
        x, y = batch("npu", step)
        opt.zero_grad()
        opt_plain.zero_grad()
        scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()
        torch.nn.functional.mse_loss(plain(x), y).backward()
        scaled = [p.grad.clone() for p in model.parameters()]
        scaler.unscale_(opt)
        for p, q, s in zip(model.parameters(), plain.parameters(), scaled):
            assert_close(p.grad, s / 128)
            assert_close(p.grad, q.grad, atol=1e-7, rtol=1e-6)
        scaler.step(opt)
        scaler.update()
        opt_plain.step()
    for a, b in zip(cpu_params(model), cpu_params(plain)):
        assert_close(a, b, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", [n for n in CASES if n != "sgd"])  # torch.optim.SGD takes sparse gradients
def test_sparse_gradient_refused(name):
    cls, kwargs = CASES[name]
    p = torch.nn.Parameter(torch.ones(3, 2))
    p.grad = torch.ones(3, 2).to_sparse()
    with pytest.raises(RuntimeError, match="does not support sparse gradients"):
        cls([p], **kwargs).step()


@pytest.mark.parametrize("cls,kwargs,message", [
    (NpuFusedSGD, dict(lr=-0.1), "Invalid learning rate: -0.1"),
    (NpuFusedSGD, dict(lr=0.1, momentum=-1), "Invalid momentum value: -1"),
    (NpuFusedSGD, dict(lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    (NpuFusedSGD, dict(), "required optimization parameter lr"),
    (NpuFusedAdam, dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    (NpuFusedAdamW, dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    (NpuFusedAdadelta, dict(rho=1.5), "Invalid rho value: 1.5"),
    (NpuFusedAdadelta, dict(eps=-1), "Invalid epsilon value: -1"),
    (NpuFusedRMSprop, dict(alpha=-0.5), "Invalid alpha value: -0.5"),
    (NpuFusedLamb, dict(lr=-1), "Invalid learning rate: -1"),
    (NpuFusedLamb, dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
    (NpuFusedLamb, dict(eps=-1e-6), "Invalid epsilon value: -1e-06"),
    (NpuFusedBertAdam, dict(lr=0.1, warmup=1.0), "Invalid warmup: 1.0"),
    (NpuFusedBertAdam, dict(lr=0.1, warmup=-0.5), "Invalid warmup: -0.5"),
    (NpuFusedBertAdam, dict(lr=0.1, schedule="warmup_step"), "Invalid schedule parameter: warmup_step"),
    (NpuFusedBertAdam, dict(lr=0.1, b1=1.0), "Invalid b1 parameter: 1.0"),
    (NpuFusedBertAdam, dict(lr=0.1, b2=-0.1), "Invalid b2 parameter: -0.1"),
    (NpuFusedBertAdam, dict(lr=0.1, e=-1.0), "Invalid epsilon value: -1.0"),
    (NpuFusedBertAdam, dict(lr=-0.1), "Invalid learning rate: -0.1"),
    (NpuFusedBertAdam, dict(), "required optimization parameter lr"),
    (NpuFusedRMSpropTF, dict(momentum=-0.1), "Invalid momentum value: -0.1"),
    (NpuFusedRMSpropTF, dict(weight_decay=-0.1), "Invalid weight_decay value: -0.1"),
])
def test_bad_arguments(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls([torch.nn.Parameter(torch.ones(2))], **kwargs)


def test_sgd_lr_from_groups():
    a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    opt = NpuFusedSGD([{"params": [a], "lr": 0.5}, {"params": [b], "lr": 0.25}])
    a.grad, b.grad = torch.ones(2), torch.ones(2)
    opt.step()
    assert a.tolist() == [0.5, 0.5] and b.tolist() == [0.75, 0.75]


@pytest.mark.parametrize("name", BASE_DERIVED)
def test_zero_grad_and_dtypes(name):
    cls, kwargs = CASES[name]
    p = torch.nn.Parameter(torch.ones(2, 2, device="npu"))
    p.grad = torch.ones(2, 2, device="npu")
    opt = cls([p], **kwargs)
    with pytest.raises(ValueError, match="set_to_none is not supported in fused optimizers"):
        opt.zero_grad(set_to_none=True)
    opt.zero_grad()
    assert p.grad is not None and p.grad.abs().sum().item() == 0
    q = torch.nn.Parameter(torch.ones(2, dtype=torch.bfloat16))
    q.grad = torch.ones(2, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="must be either float32 or float16"):
        cls([q], **kwargs).step()


@pytest.mark.parametrize("name", BASE_DERIVED)
def test_float16_bucket_matches_cpu(name):
    cls, kwargs = CASES[name]
    params, grads = synthetic(6, steps=3)
    results = []
    for device in ("npu", "cpu"):
        ps = [torch.nn.Parameter(torch.tensor(p, dtype=dt, device=device))
              for p, dt in zip(params, (torch.float32, torch.float16, torch.float16))]
        opt = cls(ps, **kwargs)
        for step_grads in grads:
            for p, g in zip(ps, step_grads):
                p.grad = torch.tensor(g, dtype=p.dtype, device=device)
            opt.step()
        assert [p.dtype for p in ps] == [torch.float32, torch.float16, torch.float16]
        results.append([p.detach().cpu() for p in ps])
    for a, b in zip(*results):
        assert_close(a, b, atol=1e-6, rtol=0)


def test_clip_grad_norm_fused():
    params, grads = synthetic(7, steps=1)
    for name in ("adam", "lamb", "rmsprop_tf"):
        cls, kwargs = CASES[name]
        fused = [torch.nn.Parameter(torch.tensor(p, dtype=torch.float32, device="npu")) for p in params]
        plain = [torch.nn.Parameter(torch.tensor(p, dtype=torch.float32)) for p in params]
        for a, b, g in zip(fused, plain, grads[0]):
            a.grad = torch.tensor(g, dtype=torch.float32, device="npu")
            b.grad = torch.tensor(g, dtype=torch.float32)
        norm = cls(fused, **kwargs).clip_grad_norm_fused_(2.0)
        want = torch.nn.utils.clip_grad_norm_(plain, 2.0)
        assert_close(norm.cpu(), want)
        for a, b in zip(fused, plain):
            assert_close(a.grad.cpu(), b.grad)


def test_lamb_global_grad_norm_is_all_groups():
    a = torch.nn.Parameter(torch.ones(2))
    b = torch.nn.Parameter(torch.ones(2))
    opt = NpuFusedLamb([{"params": [a]}, {"params": [b]}], use_global_grad_norm=True)
    a.grad, b.grad = torch.full((2,), 3.0), torch.full((2,), 4.0)
    opt.step()
    assert_close(opt.global_grad_norm, torch.tensor(math.sqrt(2 * 9 + 2 * 16)))


def test_rmsprop_tf_private_state_hooks():
    # real torch_npu's tests call these hooks directly
    p = torch.tensor([1.0, 2.0])
    opt = NpuFusedRMSpropTF([p], momentum=0.9, centered=True)
    opt._init_param_state(p, momentum=0.9, centered=True)
    assert set(opt.state[p]) == {"step", "square_avg", "momentum_buffer", "grad_avg"}
    assert torch.equal(opt.state[p]["square_avg"], torch.ones(2))
    q = torch.nn.Parameter(torch.ones(2))
    q.grad = torch.ones(2)
    opt2 = NpuFusedRMSpropTF([q])
    opt2._maybe_init_combined_params_and_grads()
    opt2._maybe_init_combined_states()
    assert opt2.is_states_combined
    assert opt2.combined_param_states_indexed_by_group[0][0]["square_avg"][0] is opt2.state[q]["square_avg"]
