"""torch._foreach_* on npu against cpu (Note [One task per foreach call], csrc/launch/foreach_kernel.cpp).

Every foreach op of PyTorch's OpInfo database (its own sample inputs: lists of several shapes,
scalars, scalar lists, 0-dim tensors, int and bool scalars) runs functional and in place on cpu
and on npu: results bit for bit equal, errors of the same type and message. A call whose lists
are uniform takes one task; the profile shows it.
"""

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile
from torch.testing._internal.common_methods_invocations import (
    foreach_binary_op_db,
    foreach_other_op_db,
    foreach_pointwise_op_db,
    foreach_unary_op_db,
)

import torch_npu  # noqa: F401

OPS = [op for db in (foreach_unary_op_db, foreach_binary_op_db, foreach_pointwise_op_db, foreach_other_op_db)
       for op in db if op.name != "_foreach_mm"]


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.detach().clone().to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


def _run(fn, tensors, args, kwargs):
    try:
        return fn(tensors, *args, **kwargs), None
    except Exception as e:  # noqa: BLE001 - compared across devices
        return None, e


def _same(cpu, npu):
    if isinstance(cpu, (list, tuple)):
        assert len(cpu) == len(npu)
        for c, n in zip(cpu, npu):
            _same(c, n)
    elif isinstance(cpu, torch.Tensor):
        assert npu.device.type == "npu"
        torch.testing.assert_close(npu.cpu(), cpu, rtol=0, atol=0, equal_nan=True)
    else:
        assert cpu == npu


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_foreach_op_matches_cpu(op, dtype):
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip(f"{op.name} has no {dtype} kernel on cpu")
    variants = [("functional", op.op), ("in place", op.inplace_variant)]
    samples = list(op.sample_inputs("cpu", dtype, num_input_tensors=[4]))
    assert samples
    for sample in samples:
        for kind, fn in variants:
            if fn is None:
                continue
            cpu_in, npu_in = _to(sample.input, "cpu"), _to(sample.input, "npu")
            cpu_args, npu_args = _to(sample.args, "cpu"), _to(sample.args, "npu")
            # A 0-dim tensor argument stays where the sample put it (cpu) as well as on npu.
            cpu_out, cpu_err = _run(fn, cpu_in, cpu_args, sample.kwargs)
            npu_out, npu_err = _run(fn, npu_in, npu_args, sample.kwargs)
            where = f"{op.name} {kind} {dtype} args={sample.args!r} kwargs={sample.kwargs!r}"
            if cpu_err is not None:
                assert npu_err is not None, f"{where}: cpu raised {cpu_err!r}, npu did not"
                assert type(npu_err) is type(cpu_err) and str(cpu_err) in str(npu_err), where
                continue
            assert npu_err is None, f"{where}: npu raised {npu_err!r}"
            _same(cpu_out, npu_out)
            _same(cpu_in, npu_in)  # what the in-place variant wrote, and that the functional one wrote nothing


def test_uniform_lists_take_one_task_and_others_one_per_tensor(tmp_path):
    params = [torch.randn(s, device="npu") for s in [(64, 64), (64,)] * 6]
    grads = [torch.randn_like(p) for p in params]
    halves = [torch.full((1,), 0.5, device="npu")] * len(params)  # broadcast: ATen's loop
    torch._foreach_add_(params, grads, alpha=-0.1)  # first launches run on the caller
    torch._foreach_mul_(params, halves)
    torch.npu.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch._foreach_add_(params, grads, alpha=-0.1)
        torch._foreach_mul_(params, halves)
        torch.npu.synchronize()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    kernels = [e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels.count("_foreach_add_") == 1 and not any(k.startswith("add") for k in kernels), kernels
    assert kernels.count("mul_.Tensor") == len(params) and "_foreach_mul_" not in kernels, kernels


def test_an_sgd_step_equals_cpu_and_keeps_version_counters():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    npu_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).npu()
    npu_model.load_state_dict(model.state_dict())
    steps = []
    for m, device in ((model, "cpu"), (npu_model, "npu")):
        opt = torch.optim.Adam(m.parameters(), lr=1e-2, foreach=True)
        x = torch.randn(5, 8, generator=torch.Generator().manual_seed(1)).to(device)
        for _ in range(3):
            m(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
        steps.append([p.detach().cpu() for p in m.parameters()])
    for c, n in zip(*steps):
        torch.testing.assert_close(n, c, rtol=0, atol=0)
    p = next(npu_model.parameters())
    before = p._version
    with torch.no_grad():
        torch._foreach_add_([p], [torch.ones_like(p)])
    assert p._version == before + 1


def test_an_inference_tensor_outside_inference_mode_is_refused_as_on_cpu():
    outcomes = []
    for device in ("cpu", "npu"):
        with torch.inference_mode():
            p, g = [torch.ones(3, device=device)], [torch.ones(3, device=device)]
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
            torch._foreach_add_(p, g)
        outcomes.append(p[0].cpu())
    torch.testing.assert_close(outcomes[1], outcomes[0])
