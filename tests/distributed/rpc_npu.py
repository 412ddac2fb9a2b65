"""Run under torchrun, 3 ranks: torch.distributed.rpc over the NPU_TENSORPIPE
backend with npu tensors, each answer compared with the same computation done
locally. worker{r} uses npu:r; worker0 maps npu:0 to worker1's npu:1 and to
worker2's npu:2, worker1 maps npu:1 to worker2's npu:2. Prints "RANK r OK"."""

import os

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import nn
from torch.distributed.nn.api.remote_module import RemoteModule

import torch_npu
from torch_npu.distributed.rpc import NPUTensorPipeRpcBackendOptions


def where(x):
    """What the callee saw: the argument's device, and the argument itself."""
    return str(x.device), x


def on_device(index):
    return torch.arange(4.0, device=f"npu:{index}")


@torch.jit.script
def scaled(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


def add_chained(to, x, y):
    # runs on worker1 and asks worker2, replying when worker2 has
    return rpc.rpc_async(to, torch.add, args=(x, y)).then(lambda fut: fut.wait())


add_chained = rpc.functions.async_execution(add_chained)


def expect_error(fn, text):
    try:
        fn()
    except RuntimeError as e:
        assert text in str(e), e
    else:
        raise AssertionError(f"expected an error naming {text!r}")


def drive():
    x = torch.randn(3, 5, device="npu:0", requires_grad=True)
    y = torch.randn(3, 5, device="npu:0")

    # a Python call: the argument lands on npu:1, the reply back on npu:0
    seen, back = rpc.rpc_sync("worker1", where, args=(x.detach(),))
    assert seen == "npu:1" and back.device == torch.device("npu:0"), (seen, back.device)
    assert torch.equal(back, x.detach())
    seen, back = rpc.rpc_async("worker2", where, args=(y,)).wait()
    assert seen == "npu:2" and torch.equal(back, y)

    # a builtin operator, sync and as an RRef
    assert torch.equal(rpc.rpc_sync("worker1", torch.add, args=(x.detach(), y)), x.detach() + y)
    rref = rpc.remote("worker1", torch.mul, args=(y, 3))
    assert torch.equal(rref.to_here(), y * 3)
    assert rref.rpc_sync().size() == y.size() and rref.rpc_async().size().wait() == y.size()
    assert rref.remote().size().to_here() == y.size()
    assert rref.owner_name() == "worker1" and not rref.is_owner() and rref.confirmed_by_owner()

    # a TorchScript function: torch serializes it in C++, the agent places its tensors
    assert torch.equal(rpc.rpc_sync("worker1", scaled, args=(y, 2.0)), y * 2.0)

    # worker1 forwards to worker2 (its own map: npu:1 -> npu:2) and replies
    assert torch.equal(rpc.rpc_sync("worker1", add_chained, args=("worker2", y, y)), y + y)

    # distributed autograd through the copies equals local autograd
    w = torch.randn(3, 5, device="npu:0", requires_grad=True)
    with dist_autograd.context() as context_id:
        z = rpc.rpc_sync("worker1", torch.add, args=(x, w))
        loss = (z * y).sum()
        dist_autograd.backward(context_id, [loss])
        grads = dist_autograd.get_gradients(context_id)
    assert torch.equal(grads[x], y) and torch.equal(grads[w], y) and grads[x].device == x.device

    # a module living on worker1's npu:1
    remote_linear = RemoteModule("worker1/npu:1", nn.Linear, args=(5, 2))
    weight, bias = (p.to_here() for p in remote_linear.remote_parameters())
    assert weight.device == torch.device("npu:0")  # fetched through the reverse map
    out = remote_linear.forward(y)
    assert out.device == torch.device("npu:0")
    torch.testing.assert_close(out, torch.nn.functional.linear(y, weight, bias))

    # no mapping for npu:1 to worker1, no way back from worker2's npu:1
    expect_error(lambda: rpc.rpc_sync("worker1", where, args=(torch.ones(2, device="npu:1"),)),
                 "Request device mapping is not available for destination worker1")
    expect_error(lambda: rpc.rpc_sync("worker2", on_device, args=(1,)),
                 "Response device mapping is not available for destination worker0")
    assert torch.equal(rpc.rpc_sync("worker2", on_device, args=(2,)), torch.arange(4.0, device="npu:0"))
    # CPU tensors stay CPU tensors
    assert rpc.rpc_sync("worker1", where, args=(torch.ones(2),))[0] == "cpu"


def main():
    rank = int(os.environ["RANK"])
    torch.npu.set_device(rank)
    maps = {0: {"worker1": {"npu:0": "npu:1"}, "worker2": {"npu:0": "npu:2"}},
            1: {"worker2": {"npu:1": "npu:2"}}, 2: {}}[rank]
    options = NPUTensorPipeRpcBackendOptions(num_worker_threads=8, device_maps=maps, rpc_timeout=60)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=int(os.environ["WORLD_SIZE"]),
                 backend=rpc.BackendType.NPU_TENSORPIPE, rpc_backend_options=options)
    if rank == 0:
        drive()
    rpc.shutdown()
    print(f"RANK {rank} OK", flush=True)


if __name__ == "__main__":
    main()
