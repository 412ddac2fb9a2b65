"""torch_npu.contrib.transfer_to_npu: an unchanged CUDA script runs on npu
(in a fresh interpreter: the patches are process-wide), and trains exactly
as the same script does on cpu."""

import json

import torch

from conftest import run_python

CUDA_SCRIPT = """
import io, json, warnings
import torch
import torch.nn as nn
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch_npu
    from torch_npu.contrib import transfer_to_npu  # noqa: F401
    import torch_npu.contrib.transfer_to_npu  # a second import prints nothing more
notices = [str(w.message) for w in caught if "transfer_to_npu" in str(w.message)]

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).cuda()
params = list(model.parameters())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 8).cuda()
y = torch.randn(32, 1).to(torch.device("cuda:0"))
losses = []
for _ in range(4):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():
    half = model(x)
with torch.autocast("cuda", dtype=torch.bfloat16):
    bf16 = model(x)
stream = torch.cuda.Stream()
with torch.cuda.stream(stream):
    doubled = x * 2
torch.cuda.synchronize()
buf = io.BytesIO()
torch.save(model.state_dict(), buf)
buf.seek(0)
loaded = torch.load(buf, map_location="cuda:0")
gen = torch.Generator("cuda")
gen.manual_seed(1)
print(json.dumps(dict(
    notices=len(notices), losses=losses, same_params=all(a is b for a, b in zip(params, model.parameters())),
    devices=sorted({str(t.device) for t in (x, y, half, doubled, loaded["0.weight"],
                                           torch.zeros(2, device="cuda"), torch.rand(2, device="cuda", generator=gen),
                                           next(model.parameters()))}),
    is_cuda=x.is_cuda, half=str(half.dtype), bf16=str(bf16.dtype), available=torch.cuda.is_available(),
    name=torch.cuda.get_device_name(0), allocated=torch.cuda.memory_allocated() > 0,
    nccl=torch.distributed.is_nccl_available())))
"""


def test_unchanged_cuda_script_runs_on_npu_like_cpu():
    proc = run_python(CUDA_SCRIPT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["notices"] == 1
    assert got["devices"] == ["npu:0"] and got["is_cuda"] and got["available"] and got["allocated"]
    assert got["same_params"]
    assert (got["half"], got["bf16"]) == ("torch.float16", "torch.bfloat16")
    assert got["name"].startswith("Ascend")
    assert got["nccl"] is True  # is_nccl_available answers for hccl
    # The same steps on cpu, in this process.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    want = []
    for _ in range(4):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        want.append(loss.item())
    torch.testing.assert_close(got["losses"], want, rtol=1e-5, atol=1e-6)


def test_nccl_becomes_hccl_and_jit_script_is_disabled():
    proc = run_python("""
        import warnings
        import torch, torch_npu
        from torch_npu.contrib import transfer_to_npu
        import torch.distributed as dist
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
        t = torch.ones(2).cuda()
        dist.all_reduce(t)
        print("backend", dist.get_backend(), t.cpu().tolist())
        from torch.distributed import DeviceMesh
        from torch.distributed.device_mesh import init_device_mesh
        meshes = [DeviceMesh.from_group(dist.group.WORLD, "cuda"), init_device_mesh("cuda", (1,)),
                  DeviceMesh("cuda", [0])]
        print("meshes", [m.device_type for m in meshes])
        dist.destroy_process_group()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            f = torch.jit.script(len)
        print(f is len, any(issubclass(x.category, RuntimeWarning) for x in w))
        """, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "backend hccl [1.0, 1.0]" in proc.stdout  # "nccl" became hccl, which ran the all_reduce
    assert "meshes ['npu', 'npu', 'npu']" in proc.stdout  # FSDP2 over a "cuda" mesh (Megatron) runs on npu
    assert proc.stdout.strip().splitlines()[-1] == "True True"
