"""Model compatibility check: does a model run on npu, natively, and agree with cpu?

    report = torch_npu.tools.check_model(model, example_inputs)
    print(report)            # readable summary
    report.compatible        # ran forward and backward on npu without error

It runs the model's forward and backward on npu and on a cpu copy, and reports
the ops that fell back to the CPU, the ops that ran on the synchronous native
path, dtypes an Ascend chip handles poorly, and the largest differences of
outputs and gradients against cpu.
"""

import copy
import dataclasses

import torch
from torch.utils._pytree import tree_flatten, tree_map

from torch_npu import _C

# Dtypes that real Ascend chips do not compute natively (or only slowly).
_WEAK_DTYPES = {torch.float64: "float64 is not supported by the cube units of Ascend chips",
                torch.complex64: "complex types have limited support on Ascend chips",
                torch.complex128: "complex types have limited support on Ascend chips"}


@dataclasses.dataclass
class CompatibilityReport:
    compatible: bool
    error: str = ""
    output_shape: tuple = ()
    fallback_ops: dict = dataclasses.field(default_factory=dict)
    synchronous_ops: dict = dataclasses.field(default_factory=dict)
    dtype_issues: list = dataclasses.field(default_factory=list)
    max_output_diff: float = 0.0
    max_grad_diff: float = 0.0

    def __str__(self):
        lines = [f"compatible: {self.compatible}"]
        if self.error:
            lines.append(f"error: {self.error}")
        lines.append(f"output shape: {self.output_shape}")
        lines.append("ops falling back to the CPU: " + (", ".join(f"{k} x{v}" for k, v in self.fallback_ops.items())
                                                      or "none"))
        lines.append("ops on the synchronous native path: " +
                     (", ".join(f"{k} x{v}" for k, v in self.synchronous_ops.items()) or "none"))
        lines.extend(f"dtype: {issue}" for issue in self.dtype_issues)
        lines.append(f"max |npu - cpu| output: {self.max_output_diff:.3g}, gradients: {self.max_grad_diff:.3g}")
        return "\n".join(lines)


def _max_diff(a, b):
    worst = 0.0
    for x, y in zip(tree_flatten(a)[0], tree_flatten(b)[0]):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.is_floating_point():
            worst = max(worst, (x.detach().cpu().double() - y.detach().double()).abs().max().item()
                        if x.numel() else 0.0)
    return worst


def _backward(outputs):
    tensors = [o for o in tree_flatten(outputs)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
    if tensors:
        sum(t.float().sum() for t in tensors).backward()
    return bool(tensors)


def check_model(model, example_inputs, device="npu", backward=True):
    """Runs ``model(*example_inputs)`` on ``device`` and on cpu; returns a CompatibilityReport."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"check_model expects a torch.nn.Module, got {type(model).__name__}")
    if isinstance(example_inputs, torch.Tensor) or not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    report = CompatibilityReport(compatible=False)
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        if tensor.dtype in _WEAK_DTYPES:
            report.dtype_issues.append(f"{name}: {_WEAK_DTYPES[tensor.dtype]}")
    for i, t in enumerate(tree_flatten(example_inputs)[0]):
        if isinstance(t, torch.Tensor) and t.dtype in _WEAK_DTYPES:
            report.dtype_issues.append(f"input {i}: {_WEAK_DTYPES[t.dtype]}")

    cpu_model = copy.deepcopy(model).cpu()
    npu_model = copy.deepcopy(model).to(device)
    cpu_inputs = tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, example_inputs)
    npu_inputs = tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, example_inputs)

    before_fallback = _C._fallback_counts()
    before_sync = _C._sync_native_counts()
    try:
        npu_out = npu_model(*npu_inputs)
        if backward:
            _backward(npu_out)
        torch.npu.synchronize()
    except Exception as e:  # report, do not raise: this is a diagnosis tool
        report.error = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        return report
    finally:
        report.fallback_ops = _delta(before_fallback, _C._fallback_counts())
        report.synchronous_ops = _delta(before_sync, _C._sync_native_counts())
    report.compatible = True
    first = tree_flatten(npu_out)[0]
    report.output_shape = tuple(first[0].shape) if first and isinstance(first[0], torch.Tensor) else ()

    cpu_out = cpu_model(*cpu_inputs)
    report.max_output_diff = _max_diff(npu_out, cpu_out)
    if backward and _backward(cpu_out):
        npu_grads = [p.grad for p in npu_model.parameters() if p.grad is not None]
        cpu_grads = [p.grad for p in cpu_model.parameters() if p.grad is not None]
        report.max_grad_diff = _max_diff(npu_grads, cpu_grads)
    return report


def check_compatibility(model, input_shape):
    """The seeds' helper: forward a random input of ``input_shape`` on npu:0.
    Returns {'compatible': True, 'output_shape': ...} or {'compatible': False, 'error': ...}."""
    device = torch.device("npu:0")
    try:
        model = model.to(device)
        dummy = torch.randn(*input_shape).to(device)
        with torch.no_grad():
            output = model(dummy)
        return {"compatible": True, "output_shape": tuple(output.shape)}
    except Exception as e:
        return {"compatible": False, "error": str(e)[:200]}


def _delta(before, after):
    return {k: v - before.get(k, 0) for k, v in sorted(after.items()) if v - before.get(k, 0) > 0}
