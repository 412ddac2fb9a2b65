"""Seed 002, "示例 1：基础推理": run a small MLP in eval mode under no_grad on
the NPU, and check the output against the same model on the CPU.

Run: python examples/inference.py
"""
import copy
import sys

import torch
import torch.nn as nn

import torch_npu  # noqa: F401  # registers the "npu" device and torch.backends.npu

print(f"NPU available: {torch.backends.npu.is_available()}")
# The seed's device switch: code that runs unchanged on machines without NPU.
device = "npu" if torch.backends.npu.is_available() else "cpu"

torch.manual_seed(0)
model_cpu = nn.Sequential(
    nn.Linear(784, 256),
    nn.ReLU(),
    nn.Linear(256, 10),
)
# deepcopy before .to(): .to() moves a module in place, and we keep the CPU
# copy as the reference.
model = copy.deepcopy(model_cpu).to(device)

x_cpu = torch.randn(32, 784)
x = x_cpu.to(device)

# eval() + no_grad(): no autograd graph is recorded, as in production serving.
model.eval()
with torch.no_grad():
    output = model(x)

print(f"Output shape: {output.shape}")
print(f"Output device: {output.device}")

with torch.no_grad():
    expected = model_cpu.eval()(x_cpu)
ok = output.device.type == device and torch.allclose(output.cpu(), expected, rtol=1e-5, atol=1e-5)
same_argmax = torch.equal(output.argmax(1).cpu(), expected.argmax(1))
print(f"matches CPU: {ok}, same predicted classes: {same_argmax}")
if not (ok and same_argmax):
    print("FAILED: NPU inference differs from CPU", file=sys.stderr)
    sys.exit(1)
print("OK")
