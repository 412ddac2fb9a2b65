"""Save a model trained on the NPU and load it back, onto the CPU
(map_location="cpu", e.g. for a machine without NPU) and onto the NPU.
All three copies must compute the same output.

Run: python examples/save_load.py
"""
import os
import sys
import tempfile

import torch
import torch.nn as nn

import torch_npu  # noqa: F401  # registers the "npu" device


def make_model():
    return nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(),
                         nn.BatchNorm1d(32), nn.Linear(32, 4))


torch.manual_seed(0)
model = make_model().to("npu")

# A few training steps, so the saved state is not just the initialisation
# (BatchNorm's running statistics change too).
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(5):
    x = torch.randn(8, 16, device="npu")
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()

inp = torch.randn(5, 16)
with torch.no_grad():
    out_npu = model(inp.to("npu")).cpu()

ok = True
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "model.pth")
    # Tensors are saved with their device ("npu:0") recorded.
    torch.save(model.state_dict(), path)
    print(f"saved state_dict ({os.path.getsize(path)} bytes) to {path}")

    # map_location="cpu": load an NPU checkpoint where no NPU is needed.
    state_cpu = torch.load(path, map_location="cpu")
    devices = {t.device.type for t in state_cpu.values()}
    print(f"loaded with map_location='cpu': tensors on {devices}")
    ok &= devices == {"cpu"}
    model_cpu = make_model()
    model_cpu.load_state_dict(state_cpu)
    model_cpu.eval()

    # map_location="npu" (and no map_location: back where it was saved).
    state_npu = torch.load(path, map_location="npu")
    devices_npu = {str(t.device) for t in state_npu.values()}
    print(f"loaded with map_location='npu': tensors on {devices_npu}")
    ok &= devices_npu == {"npu:0"}
    model_npu = make_model().to("npu")
    model_npu.load_state_dict(state_npu)
    model_npu.eval()

    state_default = torch.load(path)
    ok &= {str(t.device) for t in state_default.values()} == {"npu:0"}

with torch.no_grad():
    out_cpu = model_cpu(inp)
    out_npu2 = model_npu(inp.to("npu")).cpu()

for name, out in (("cpu-loaded model", out_cpu), ("npu-loaded model", out_npu2)):
    same = torch.allclose(out, out_npu, rtol=1e-5, atol=1e-5)
    print(f"{name} output matches the original: {same}")
    ok &= same

if not ok:
    print("FAILED: save/load round trip changed the model", file=sys.stderr)
    sys.exit(1)
print("OK")
