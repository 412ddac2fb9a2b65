"""Seed 000, "2.2 TorchScript": a BERT-style Linear + LayerNorm block run
three ways on the NPU (eager, torch.jit.script, torch.jit.trace), the
compiled ones inside a side stream as in the seed, each checked against
the CPU.

Run: python examples/bert_layer_script.py
"""
import copy
import sys

import torch

import torch_npu  # noqa: F401  # registers the "npu" device


class BERTModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(1024, 1024)
        self.norm = torch.nn.LayerNorm(1024)

    def forward(self, x):
        return self.norm(self.linear(x))


torch.manual_seed(0)
model_cpu = BERTModel().eval()
model = copy.deepcopy(model_cpu).npu()

# The seed draws a fresh random input for each run; we draw one on the CPU
# and reuse it so the three results are comparable.
x_cpu = torch.randn(1, 1024)
x = x_cpu.npu()
with torch.no_grad():
    expected = model_cpu(x_cpu)

results = {}

# Method 1: eager.
with torch.no_grad():
    results["eager"] = model(x)

# Method 2: torch.jit.script compiles the Python forward into a static graph;
# the graph's ops still dispatch to NPU kernels because the weights and input
# live on the NPU.
scripted_model = torch.jit.script(model)

# Method 3: torch.jit.trace records one execution of forward.
traced_model = torch.jit.trace(model, (x,))

# As in the seed, run the compiled models on a non-default stream. Work on a
# side stream is not ordered with the default stream, so the side stream
# first waits for everything queued so far (the input copy), and the default
# stream waits for the side stream before the results are read.
side = torch.npu.Stream()
side.wait_stream(torch.npu.current_stream())
with torch.npu.stream(side), torch.no_grad():
    results["script"] = scripted_model(x)
    results["trace"] = traced_model(x)
torch.npu.current_stream().wait_stream(side)

ok = True
for name, out in results.items():
    same = out.device.type == "npu" and torch.allclose(out.cpu(), expected, rtol=1e-4, atol=1e-4)
    print(f"{name:6s}: shape {tuple(out.shape)} on {out.device}, matches CPU: {same}")
    ok &= same

if not ok:
    print("FAILED: an NPU run differs from the CPU", file=sys.stderr)
    sys.exit(1)
print("OK")
