"""Run under torchrun (MODE unset) or torch_npu.distributed.run (MODE=run):
torch_npu.distributed's submodules on 2 ranks over hccl. Prints "RANK r OK"."""

import copy
import os

import torch
import torch.distributed as dist
import torch.nn as nn

import torch_npu  # noqa: F401

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])

if os.environ.get("MODE") == "run":
    # launched by python -m torch_npu.distributed.run (parallel rendezvous, agent store)
    import torch_npu.distributed.rendezvous  # noqa: F401  ("parallel://")

    assert os.environ["ENABLE_TIERED_PARALLEL_TCPSTORE"] == "true", os.environ.get("ENABLE_TIERED_PARALLEL_TCPSTORE")
    assert os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True"
    url = f"parallel://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}?rank={rank}&world_size={world}"
    dist.init_process_group("hccl", init_method=url)
    torch.npu.set_device(rank)
    t = torch.full((2,), float(rank + 1), device="npu")
    dist.all_reduce(t)
    assert t.cpu().tolist() == [3.0, 3.0], t
    dist.destroy_process_group()
    print(f"RANK {rank} OK", flush=True)
    raise SystemExit(0)

dist.init_process_group("hccl")
torch.npu.set_device(rank)
import torch.distributed.nn.functional as F  # noqa: E402

import torch_npu.distributed.nn  # noqa: E402,F401  (hccl backward of the all-gathers)

# --- nn.functional: autograd through the collectives
x = torch.full((3, 4), float(rank), device="npu", requires_grad=True)
outs = F.all_gather(x)
sum((i + 1) * o.sum() for i, o in enumerate(outs)).backward()
assert torch.equal(x.grad.cpu(), torch.full((3, 4), float(world * (rank + 1)))), x.grad

x = torch.full((2, 3), float(rank), device="npu", requires_grad=True)
out = F._all_gather_base(torch.empty(2 * world, 3, device="npu"), x)
assert torch.equal(out.detach().cpu()[2:], torch.ones(2, 3))
c = torch.arange(2 * world * 3, dtype=torch.float32).view(2 * world, 3)
(out * c.npu()).sum().backward()
assert torch.equal(x.grad.cpu(), world * c[2 * rank:2 * rank + 2]), x.grad

ins = [torch.full((2,), float(10 * rank + j), device="npu", requires_grad=True) for j in range(world)]
red = F.reduce_scatter(torch.empty(2, device="npu"), ins)
assert torch.equal(red.detach().cpu(), torch.full((2,), float(sum(10 * r + rank for r in range(world)))))
(red * (rank + 1)).sum().backward()
for j in range(world):
    assert torch.equal(ins[j].grad.cpu(), torch.full((2,), float(j + 1))), (j, ins[j].grad)

ins = [torch.full((2,), float(10 * rank + j), device="npu", requires_grad=True) for j in range(world)]
got = F.all_to_all([torch.empty(2, device="npu") for _ in range(world)], ins)
assert [g[0].item() for g in got] == [float(10 * r + rank) for r in range(world)]
sum((r + 1) * g.sum() for r, g in enumerate(got)).backward()
for j in range(world):
    assert torch.equal(ins[j].grad.cpu(), torch.full((2,), float(rank + 1))), (j, ins[j].grad)

# --- fsdp.fully_shard: one 2-rank step equals the single-process step on the whole batch
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

from torch_npu.distributed.fsdp import fully_shard  # noqa: E402

assert fully_shard.__module__ == "torch_npu.distributed.fsdp" and hasattr(fully_shard, "state")
torch.manual_seed(0)
ref = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
model.load_state_dict(ref.state_dict())
model.npu()
mesh = init_device_mesh("npu", (world,))
for layer in (model[0], model[2]):
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
assert all(isinstance(p, DTensor) for p in model.parameters())
gen = torch.Generator().manual_seed(1)
xb, yb = torch.randn(4 * world, 8, generator=gen), torch.randn(4 * world, 2, generator=gen)
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
nn.functional.mse_loss(ref(xb), yb).backward()
ref_opt.step()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
mine = slice(4 * rank, 4 * rank + 4)
nn.functional.mse_loss(model(xb[mine].npu()), yb[mine].npu()).backward()
opt.step()
for (name, p), q in zip(model.named_parameters(), ref.parameters()):
    full = p.full_tensor().cpu()
    assert torch.allclose(full, q.detach(), rtol=1e-5, atol=1e-6), (name, (full - q).abs().max())

# --- pipelining.pipeline: torch's splitter on an npu module, a 2-stage GPipe step over hccl
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, SplitPoint  # noqa: E402

from torch_npu.distributed.pipelining import pipeline  # noqa: E402

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).npu()
example = torch.randn(2, 4, device="npu")
pipe = pipeline(net, (example,), split_spec={"2": SplitPoint.BEGINNING})
assert pipe.num_stages == 2
stage = pipe.build_stage(rank, torch.device("npu", rank))
schedule = ScheduleGPipe(stage, n_microbatches=2)
batch = torch.randn(4, 4, generator=gen)
expected = net(batch.npu()).detach().cpu()
if rank == 0:
    schedule.step(batch.npu())
else:
    result = schedule.step()
    assert torch.allclose(result.cpu(), expected, rtol=1e-5, atol=1e-6), (result, expected)



# --- pipeline(mode="fx"): a model torch.export cannot capture (data-dependent
# Python in `gate`), traced with torch.fx and `gate` kept as a call; its None
# argument is specialised away. Two stages, 1F1B with a loss, against eager.
from torch.distributed.pipelining import Schedule1F1B  # noqa: E402


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, mask=None):
        assert mask is None
        y = self.lin(x)
        return y if float(y.abs().sum()) >= 0 else -y  # a Python branch on a value: export cannot trace it


class GatedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.gate = Gate()
        self.out = nn.Linear(8, 3)

    def forward(self, x, mask=None):
        return self.out(self.gate(torch.relu(self.inp(x)), mask))


torch.manual_seed(1)
gated = GatedNet().npu()
reference = copy.deepcopy(gated)
split = {"out": SplitPoint.BEGINNING}
try:
    pipeline(gated, (example, None), split_spec=split)
    raise AssertionError("torch.export traced a data-dependent branch")
except RuntimeError as e:
    assert "cannot capture your model as a full graph" in str(e), e
for bad, message in (({"atomic_units": ["no_such"]}, "does not have"), ({"atomic_units": "gate"}, "list of")):
    try:
        pipeline(gated, (example, None), split_spec=split, mode="fx", **bad)
        raise AssertionError(bad)
    except (ValueError, TypeError) as e:
        assert message in str(e), e
fx_pipe = pipeline(gated, (example, None), split_spec=split, mode="fx", atomic_units=["gate"])
assert fx_pipe.num_stages == 2
fx_stage = fx_pipe.build_stage(rank, torch.device("npu", rank))
loss_fn = nn.MSELoss(reduction="sum")
schedule = Schedule1F1B(fx_stage, 2, loss_fn=loss_fn, scale_grads=False)
batch = torch.randn(4, 4, generator=gen)
target = torch.randn(4, 3, generator=gen)
want = reference(batch.npu())
want_loss = loss_fn(want[:2], target[:2].npu()) + loss_fn(want[2:], target[2:].npu())
want_loss.backward()
losses = []
if rank == 0:
    schedule.step(batch.npu())
    mine, theirs = fx_pipe.get_stage_module(0), reference
    pairs = [(mine.get_submodule("inp").weight, theirs.inp.weight), (mine.get_submodule("gate").lin.weight,
                                                                     theirs.gate.lin.weight)]
else:
    out = schedule.step(target=target.npu(), losses=losses)
    assert torch.allclose(out.cpu(), want.detach().cpu(), rtol=1e-5, atol=1e-6), (out, want)
    assert torch.allclose(sum(losses).cpu(), want_loss.detach().cpu(), rtol=1e-5), (losses, want_loss)
    pairs = [(fx_pipe.get_stage_module(1).get_submodule("out").weight, reference.out.weight)]
for got, expected in pairs:
    assert torch.allclose(got.grad.cpu(), expected.grad.cpu(), rtol=1e-4, atol=1e-6), (got.grad, expected.grad)

dist.barrier()
dist.destroy_process_group()
print(f"RANK {rank} OK", flush=True)
