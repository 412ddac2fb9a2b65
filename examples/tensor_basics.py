"""Seed 000, first snippets: find the NPU, move tensors there, multiply them,
bring the result back, and ask which operators run natively.

Run: python examples/tensor_basics.py
Exits non-zero if the NPU result differs from the same computation on CPU.
"""
import sys

import torch
import torch_npu  # noqa: F401  # registers the "npu" device and torch.npu

print(f"NPU available: {torch.npu.is_available()}")
print(f"NPU count:     {torch.npu.device_count()}")
print(f"Current NPU:   {torch.npu.current_device()}")
print(f"Device name:   {torch.npu.get_device_name()}")

# Make the inputs on the CPU first so the reference and the NPU run see the
# very same numbers: .npu() is a copy, equivalent to .to("npu").
torch.manual_seed(0)
x_cpu = torch.randn(3, 3)
y_cpu = torch.randn(3, 3)
x = x_cpu.npu()
y = y_cpu.npu()

# Both inputs live on the NPU, so matmul is dispatched to the NPU kernel. It
# is queued asynchronously; .cpu() waits for it and copies the result back.
z = torch.matmul(x, y)
print(z.device)
print(z.cpu())

ok = torch.allclose(z.cpu(), torch.matmul(x_cpu, y_cpu), rtol=1e-5, atol=1e-6)
print(f"matches CPU: {ok}")

# A bigger product, as in the second snippet of the seed.
a_cpu, b_cpu = torch.randn(1024, 1024), torch.randn(1024, 1024)
result = torch.matmul(a_cpu.npu(), b_cpu.npu())
big_ok = torch.allclose(result.cpu(), a_cpu @ b_cpu, rtol=1e-4, atol=1e-3)
print(f"1024x1024 matmul matches CPU: {big_ok}")

# is_support tells whether an operator has an NPU implementation; an
# unsupported one would fall back to the CPU (slow: NPU->CPU->NPU copies).
print(torch.npu.is_support("matmul"))          # True
print(torch.npu.is_support("some_custom_op"))  # False
supported_ok = torch.npu.is_support("matmul") and not torch.npu.is_support("some_custom_op")

# Debug mode: every CPU fallback is reported, not just the first warning.
torch.npu.set_option("enable_debug", True)
torch.npu.set_option("enable_debug", False)  # off again: it costs time in production

if not (ok and big_ok and supported_ok):
    print("FAILED: NPU and CPU disagree", file=sys.stderr)
    sys.exit(1)
print("OK")
