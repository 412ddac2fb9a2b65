"""Differentiable collectives on hccl groups.

torch.distributed.nn.functional computes the backward of ``all_gather`` and
``_all_gather_base`` with a reduce-scatter only on the NCCL/XCCL backends:
``_all_gather_base``'s backward refuses any other ("Backend not supported!")
and ``all_gather``'s falls back to an all-to-all plus a sum. hccl has a
reduce-scatter of its own, so on hccl groups both backwards use it, as on
NCCL. Importing this module installs that (once); the forward functions are
torch's, re-exported here.

Both gradients are the same sum: every rank holds a gradient for every rank's
slot of the gathered result, and rank r's input gradient is the sum over
ranks of slot r, which is what a reduce-scatter computes.
"""

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as _torch_functional
from torch.distributed import ReduceOp
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


def _gradient_of_all_gather(ctx, *slot_grads):
    """all_gather's input gradient: the list of per-rank gradients, reduce-scattered."""
    own = torch.empty_like(slot_grads[dist.get_rank(group=ctx.group)])
    # Through torch's differentiable reduce-scatter, so that double backward works.
    own = _torch_functional._Reduce_Scatter.apply(ReduceOp.SUM, ctx.group, own, *slot_grads)
    return None, own


def _one_slot(stacked, world):
    """The shape of one rank's slot of ``stacked``, which stacks ``world`` of them on dimension 0."""
    rows, *rest = stacked.shape
    if rows % world:
        raise RuntimeError(f"Tensor with dimensions: {list(stacked.shape)} does not have first dimension "
                           f"divisible by world_size: {world}")
    return [rows // world, *rest]


def _gradient_of_all_gather_base(ctx, stacked_grad):
    """_all_gather_base's input gradient: its one gathered gradient, whose first
    dimension stacks the ranks' slots, reduce-scattered."""
    own = stacked_grad.new_empty(_one_slot(stacked_grad, dist.get_world_size(group=ctx.group)))
    dist.reduce_scatter_tensor(own, stacked_grad.contiguous(), ReduceOp.SUM, group=ctx.group)
    return None, own, None


def _hccl_aware(torch_backward, hccl_backward):
    """A backward that runs ``hccl_backward`` on hccl groups and torch's own elsewhere."""

    def backward(ctx, *grads):
        on_hccl = dist.get_backend(group=ctx.group) == "hccl"
        return (hccl_backward if on_hccl else torch_backward)(ctx, *grads)

    backward.hccl_backward = hccl_backward
    return staticmethod(backward)


for _function, _gradient in ((_torch_functional._AllGather, _gradient_of_all_gather),
                             (_torch_functional._AllGatherBase, _gradient_of_all_gather_base)):
    # A second import (a reload) finds the class already patched.
    if not hasattr(_function.backward, "hccl_backward"):
        _function.backward = _hccl_aware(_function.backward, _gradient)
