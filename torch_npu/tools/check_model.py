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
from torch.utils import _pytree as pytree

from torch_npu import _C
from torch_npu.npu.device import _is_pre_910b

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
    # strict=True: per op the model ran on npu: calls, dtypes, whether real
    # torch_npu runs it natively on the chip, and its numeric risk.
    chip: str = ""
    ops: dict = dataclasses.field(default_factory=dict)
    strict_findings: list = dataclasses.field(default_factory=list)

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
        if self.chip:
            lines.append(f"strict check for {self.chip}:")
            for f in self.strict_findings:
                lines.append(f"  {f['kind']}: {f['op']} x{f['count']}")
            for name, op in self.ops.items():
                if not op["native"] or op["risk"]:
                    lines.append(f"  {name}: native on the chip: {op['native']}, dtypes {sorted(op['dtypes'])}"
                                 + (f", risk: {op['risk']}" if op["risk"] else ""))
        return "\n".join(lines)


def _max_diff(a, b):
    worst = 0.0
    for x, y in zip(pytree.tree_flatten(a)[0], pytree.tree_flatten(b)[0]):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.is_floating_point():
            worst = max(worst, (x.detach().cpu().double() - y.detach().double()).abs().max().item()
                        if x.numel() else 0.0)
    return worst


def _backward(outputs):
    tensors = [o for o in pytree.tree_flatten(outputs)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
    if tensors:
        sum(t.float().sum() for t in tensors).backward()
    return bool(tensors)


_FP16_MAX = 65504.0


class _OpLog(torch.utils._python_dispatch.TorchDispatchMode):
    """The aten ops a run reaches, with their dtypes and largest magnitudes."""

    def __init__(self, chip):
        super().__init__()
        self.chip = chip
        self.ops = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "is_view", False):
            return out
        from torch_npu.npu.check_mode import native_on_chip
        name = func.overloadpacket._qualified_op_name  # "aten::addmm"
        entry = self.ops.setdefault(name, {"calls": 0, "dtypes": set(), "native": native_on_chip(func.name()),
                                           "risk": ""})
        entry["calls"] += 1
        for t in pytree.tree_flatten((args, kwargs))[0]:
            if isinstance(t, torch.Tensor):
                entry["dtypes"].add(str(t.dtype).replace("torch.", ""))
        for t in pytree.tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() and t.device.type != "meta":
                biggest = t.detach().abs().max().item()
                low = t.dtype == torch.float16 or (t.dtype == torch.float32 and _is_pre_910b(self.chip))
                if low and biggest > _FP16_MAX / 2:
                    entry["risk"] = (f"values up to {biggest:.3g} near float16's limit {_FP16_MAX:.0f}"
                                     + (" (fp32 runs in fp16 on this chip)" if t.dtype == torch.float32 else ""))
        return out


def check_model(model, example_inputs, device="npu", backward=True, strict=False, chip=None):
    """Runs ``model(*example_inputs)`` on ``device`` and on cpu; returns a
    CompatibilityReport. ``strict=True`` (or a ``chip``) also runs the npu side
    in strict chip mode and reports, per op, whether the real chip runs it
    natively, the dtypes it rejects, its fp16 range risk and the fallbacks."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"check_model expects a torch.nn.Module, got {type(model).__name__}")
    if isinstance(example_inputs, torch.Tensor) or not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    report = CompatibilityReport(compatible=False)
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        if tensor.dtype in _WEAK_DTYPES:
            report.dtype_issues.append(f"{name}: {_WEAK_DTYPES[tensor.dtype]}")
    for i, t in enumerate(pytree.tree_flatten(example_inputs)[0]):
        if isinstance(t, torch.Tensor) and t.dtype in _WEAK_DTYPES:
            report.dtype_issues.append(f"input {i}: {_WEAK_DTYPES[t.dtype]}")

    cpu_model = copy.deepcopy(model).cpu()
    npu_model = copy.deepcopy(model).to(device)
    cpu_inputs = pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, example_inputs)
    npu_inputs = pytree.tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, example_inputs)

    strict = strict or chip is not None
    before_fallback = _C._fallback_counts()
    before_sync = _C._sync_native_counts()
    log = None
    if strict:
        from torch_npu.npu import check_mode
        was_on = check_mode.get_check_mode()
        report.chip = chip or torch.npu.get_device_name()
        check_mode.check_mode_report(clear=True)
        check_mode.set_check_mode(True, chip=report.chip)
        log = _OpLog(report.chip)
    try:
        if log is not None:
            with log:
                npu_out = npu_model(*npu_inputs)
                if backward:
                    _backward(npu_out)
        else:
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
        if strict:
            report.strict_findings = check_mode.check_mode_report(clear=True)
            report.ops = log.ops
            check_mode.set_check_mode(was_on)
    report.compatible = True
    first = pytree.tree_flatten(npu_out)[0]
    report.output_shape = tuple(first[0].shape) if first and isinstance(first[0], torch.Tensor) else ()

    cpu_out = cpu_model(*cpu_inputs)
    report.max_output_diff = _max_diff(npu_out, cpu_out)
    if backward and _backward(cpu_out):
        npu_grads = [p.grad for p in npu_model.parameters() if p.grad is not None]
        cpu_grads = [p.grad for p in cpu_model.parameters() if p.grad is not None]
        report.max_grad_diff = _max_diff(npu_grads, cpu_grads)
    return report


def check_compatibility(model, input_shape, strict=False, chip=None):
    """The seeds' helper: forward a random input of ``input_shape`` on npu:0.
    Returns {'compatible': True, 'output_shape': ...} or {'compatible': False, 'error': ...};
    with ``strict`` (or a ``chip``) the forward runs in strict chip mode, a
    rejected dtype makes it incompatible, and 'findings' lists what it found."""
    device = torch.device("npu:0")
    strict = strict or chip is not None
    if strict:
        from torch_npu.npu import check_mode
        was_on = check_mode.get_check_mode()
        check_mode.check_mode_report(clear=True)
        check_mode.set_check_mode(True, chip=chip)
    try:
        model = model.to(device)
        dummy = torch.randn(*input_shape).to(device)
        with torch.no_grad():
            output = model(dummy)
        result = {"compatible": True, "output_shape": tuple(output.shape)}
    except Exception as e:
        result = {"compatible": False, "error": str(e)[:200]}
    if strict:
        result["findings"] = check_mode.check_mode_report(clear=True)
        check_mode.set_check_mode(was_on)
    return result


def _delta(before, after):
    return {k: v - before.get(k, 0) for k, v in sorted(after.items()) if v - before.get(k, 0) > 0}
