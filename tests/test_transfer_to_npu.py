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
        # torch 2.13's broadcast indexes torch.cuda.get_device_capability() of an is_cuda tensor (Megatron's
        # first collective): the npu answers (8, 0) unless TORCH_NPU_DEVICE_CAPABILITY says otherwise
        dist.broadcast(t, 0)
        print("capability", torch.cuda.get_device_capability(), torch.npu.get_device_capability())
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
    assert "capability (8, 0) None" in proc.stdout
    assert "meshes ['npu', 'npu', 'npu']" in proc.stdout  # FSDP2 over a "cuda" mesh (Megatron) runs on npu
    assert proc.stdout.strip().splitlines()[-1] == "True True"


def test_cuda_devices_reach_torch_cuda_functions_contexts_and_the_generator_and_event_types():
    result = run_python("""
        import warnings
        warnings.simplefilter("ignore")
        import torch, torch_npu
        from torch_npu.contrib import transfer_to_npu  # noqa: F401
        from torch.utils.data import RandomSampler
        g0, g1 = torch.Generator(), torch.Generator(device=torch.device("cuda"))
        print("generator", isinstance(g0, torch.Generator), isinstance(g1, torch.Generator), g1.device.type)
        e = torch.Event("cuda:0", enable_timing=True)
        print("event", isinstance(e, torch.Event), e.device.type)
        with torch.device("cuda"):
            inside = torch.zeros(2)
        print("context", inside.device.type, torch.zeros(1).device.type)
        cuda0 = torch.device("cuda:0")
        torch.cuda.set_device(cuda0)
        print("functions", torch.cuda.current_stream(cuda0) == torch.npu.current_stream(0),
              torch.cuda.memory_allocated(cuda0) == torch.npu.memory_allocated(0),
              torch.get_device_module("cuda:0") is torch.get_device_module("npu:0"),
              torch.fft.fftfreq(4, device=cuda0).device.type,
              torch.autograd.profiler_util.Kernel("k", "cuda", 1).device)
        torch.randn(1).cuda()
        print("generators", torch.cuda.default_generators == torch.npu.default_generators,
              len(torch.cuda.default_generators))
        print("sampler", len(list(RandomSampler(range(5), generator=g0))))
        from torch.distributed import ProcessGroupNCCL
        print("extras", ProcessGroupNCCL is torch_npu._C._distributed_c10d.ProcessGroupHCCL,
              ProcessGroupNCCL.Options() is not None,
              torch.utils.cpp_extension.include_paths(device_type="cuda")
              == torch.utils.cpp_extension.include_paths(device_type="npu"),
              torch._C._host_emptyCache is torch_npu._C._npu_hostEmptyCache)
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "generator True True npu"
    assert lines[1] == "event True npu"
    assert lines[2] == "context npu cpu"
    assert lines[3] == "functions True True True npu npu"
    assert lines[4] == "generators True 8"
    assert lines[5] == "sampler 5"
    assert lines[6] == "extras True True True True"


def test_the_environment_variable_applies_it_at_import():
    code = """
        import torch
        print(torch.randn(2, device="cuda").device, torch.cuda.current_device())
    """
    result = run_python(code, TORCH_TRANSFER_TO_NPU="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["npu:0", "0"]
    bad = run_python("import torch, torch_npu", TORCH_TRANSFER_TO_NPU="yes")
    assert bad.returncode != 0 and "Invalid value for TORCH_TRANSFER_TO_NPU: yes" in bad.stderr


def test_libraries_see_cudas_own_availability_and_the_private_helpers_behave():
    # Library functions that choose CUDA-only paths (transformers' is_torch_cuda_available,
    # peft's infer_device, ...) answer as on a machine without CUDA, while the script's own
    # torch.cuda.is_available() is the npu's; the helpers real torch_npu's tests call.
    proc = run_python("""
        import json, os, tempfile, logging
        import torch, torch_npu
        from torch_npu.contrib import transfer_to_npu as t2n
        import torch.distributed as dist
        from transformers.utils import import_utils
        out = {"script": torch.cuda.is_available(), "library": import_utils.is_torch_cuda_available(),
               "after": torch.cuda.is_available()}
        with tempfile.TemporaryDirectory() as d:
            good = os.path.join(d, "apis.json")
            with open(good, "w") as f:
                json.dump({"torch": {"version": "1.0", "apis": {"torch.npu.utils.get_device_name": "function"}}}, f)
            bad = os.path.join(d, "bad.json")
            with open(bad, "w") as f:
                f.write("[1, 2]")
            link = os.path.join(d, "link.json")
            os.symlink(good, link)
            out["valid"] = [t2n._check_input_file_valid(p) for p in (good, link, os.path.join(d, "missing"))]
            out["loaded"] = [sorted(t2n._load_json_file(p)) for p in (good, bad, link)]
        out["dict"] = t2n._replace_cuda_to_npu_in_dict({"cuda:0": "cuda:1", "cuda_version": 2, 3: "x"})
        out["device_map"] = str(t2n._to_npu({"cuda:0": torch.device("cuda", 1)}))  # map_location of devices
        out["hccl"] = t2n._wrapper_hccl(lambda *a, **k: (a, k))("nccl", "cpu", backend="cpu:gloo,cuda:nccl")
        out["ids"] = [t2n._wrapper_cuda(lambda **k: k)(device_ids=ids)["device_ids"]
                      for ids in (("cuda:0", 1), ["cuda:0"])]
        out["map"] = "cuda" in dist.Backend.default_device_backend_map
        seen = []
        logging.warning = lambda msg, *a: seen.append(msg)
        kept = t2n._wrapper_profiler(lambda **k: k)(experimental_config="cuda's", record_shapes=True)
        npu_cfg = torch_npu.profiler._ExperimentalConfig()
        out["profiler"] = [sorted(kept), len(seen),
                           t2n._wrapper_profiler(lambda **k: k)(experimental_config=npu_cfg)["experimental_config"] is npu_cfg]
        print(json.dumps(out, default=repr))
        """, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["script"] is True and out["after"] is True
    assert out["library"] is False  # CUDA's own answer: this machine has no CUDA
    assert out["valid"] == [True, False, False]  # links and missing files are refused
    assert out["loaded"] == [["torch"], [], []]  # a JSON list is not a configuration
    assert out["dict"] == {"npu:0": "npu:1", "npu_version": 2, "3": "x"}
    assert out["device_map"] == "{'npu:0': device(type='npu', index=1)}"
    assert out["hccl"] == [["hccl", "cpu"], {"backend": "cpu:gloo,npu:hccl"}]
    assert out["ids"] == [["npu:0", 1], ["npu:0"]]
    assert out["map"] is False  # process groups made without a backend do not look for NCCL
    assert out["profiler"] == [["record_shapes"], 1, True]


def test_every_name_of_torch_npu_all_is_on_torch_cuda():
    # Real torch_npu's patch sets each name of torch.npu.__all__ on torch.cuda,
    # npu-only ones included; CUDA code migrated by it may call them there.
    out = run_python("""
import json, torch, torch_npu
from torch_npu.contrib import transfer_to_npu  # noqa: F401
# get_device_capability is the one wrapped: (8, 0) where torch.npu's gives None (torch's own CUDA paths index it)
missing = [n for n in torch.npu.__all__ if getattr(torch.cuda, n, None) is not getattr(torch.npu, n)
           and n != "get_device_capability"]
s = torch.cuda.SyncLaunchStream()
print(json.dumps(dict(missing=missing, sync=s.is_sync_launch, graph=torch.cuda.NPUGraph is torch.npu.NPUGraph)))
""")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"missing": [], "sync": True, "graph": True}
