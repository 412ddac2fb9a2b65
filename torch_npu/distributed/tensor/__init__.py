"""torch_npu.distributed.tensor: DTensor on npu.

torch.distributed.tensor (DTensor, distribute_tensor, DeviceMesh on "npu")
runs on vNPU with torch's own sharding rules, plus vNPU's for the npu_* fused
operators and npu SDPA (_rules, registered when torch.distributed.tensor is
imported). ``context_parallel`` is torch's, with npu attention in its ring
(torch_npu.distributed.tensor.experimental), imported when first used: the
context-parallel modules import torch's debug tools, which must not load
while torch.distributed.fsdp itself is loading DTensor.
"""

__all__ = ["context_parallel"]


def __getattr__(name):
    if name == "context_parallel":
        from torch_npu.distributed.tensor.experimental._context_parallel import context_parallel

        return context_parallel
    if name == "experimental":
        import importlib

        return importlib.import_module("torch_npu.distributed.tensor.experimental")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
