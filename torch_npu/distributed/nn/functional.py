"""Differentiable collectives on hccl groups.

torch.distributed.nn.functional computes the backward of ``all_gather`` and
``_all_gather_base`` with a reduce-scatter only on the NCCL/XCCL backends:
``_all_gather_base``'s backward refuses any other ("Backend not supported!")
and ``all_gather``'s falls back to an all-to-all plus a sum. hccl has a
reduce-scatter of its own, so on hccl groups both backwards use it, as on
NCCL. Importing this module installs that (once); the forward functions are
torch's, re-exported here.
"""

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp
import torch.distributed.nn.functional as _tf
from torch.distributed.nn.functional import (  # noqa: F401  (re-exported)
    all_gather,
    all_reduce,
    all_to_all,
    all_to_all_single,
    broadcast,
    gather,
    reduce,
    reduce_scatter,
    scatter,
)

__all__ = []

_PATCHED = "_vnpu_hccl_backward"


def _is_hccl(group):
    return dist.get_backend(group=group) == "hccl"


def _wrap_all_gather_backward(original):
    def backward(ctx, *grad_outputs):
        if not _is_hccl(ctx.group):
            return original(ctx, *grad_outputs)
        # d(all_gather) = reduce-scatter of the gathered gradients (summed
        # over ranks), this rank keeping its own slot
        rank = dist.get_rank(group=ctx.group)
        gx = torch.empty_like(grad_outputs[rank])
        gx = _tf._Reduce_Scatter.apply(ReduceOp.SUM, ctx.group, gx, *grad_outputs)
        return (None, gx)
    setattr(backward, _PATCHED, True)
    return staticmethod(backward)


def _wrap_all_gather_base_backward(original):
    def backward(ctx, grad_output):
        if not _is_hccl(ctx.group):
            return original(ctx, grad_output)
        world = dist.get_world_size(group=ctx.group)
        size = list(grad_output.size())
        if size[0] % world != 0:
            raise RuntimeError(f"Tensor with dimensions: {size} does not have first dimension divisible by "
                               f"world_size: {world}")
        size[0] //= world
        gx = torch.empty(size, device=grad_output.device, dtype=grad_output.dtype)
        dist.reduce_scatter_tensor(gx, grad_output.contiguous(), ReduceOp.SUM, group=ctx.group)
        return (None, gx, None)
    setattr(backward, _PATCHED, True)
    return staticmethod(backward)


def _install():
    if not getattr(_tf._AllGather.backward, _PATCHED, False):
        _tf._AllGather.backward = _wrap_all_gather_backward(_tf._AllGather.backward)
    if not getattr(_tf._AllGatherBase.backward, _PATCHED, False):
        _tf._AllGatherBase.backward = _wrap_all_gather_base_backward(_tf._AllGatherBase.backward)


_install()
