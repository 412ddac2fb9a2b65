"""torch_npu.distributed's own collectives and group controls (real torch_npu's
torch_npu/distributed/distributed_c10d.py): the uneven reduce-scatter and
all-gather MindSpeed calls, reinit_process_group, is_hccl_available.

The uneven collectives are composed from the even ones of the hccl backend:
each rank's slice is padded to the largest, the even collective runs, and
the valid rows are copied out on the current stream (ordered after the
collective by the work's wait, which only makes the stream wait).
"""
import warnings

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import GroupMember, _get_default_group, _rank_not_in_group, _warn_not_in_group

# Real torch_npu's __all__ (the uneven collectives are torch_npu.distributed's).
__all__ = ["is_hccl_available", "reinit_process_group"]


def is_hccl_available():
    return "hccl" in dist.Backend.backend_list


def _split_sizes(name, sizes, total, world):
    if not sizes:
        if total % world != 0:
            raise ValueError(f"{name}: the tensor's first dimension ({total}) does not divide by the world size "
                             f"({world}); pass the split sizes")
        return [total // world] * world
    sizes = [int(s) for s in sizes]
    if len(sizes) != world or any(s < 0 for s in sizes):
        raise ValueError(f"{name}: expected {world} non-negative split sizes (one per rank), got {sizes}")
    if sum(sizes) != total:
        raise ValueError(f"{name}: the split sizes {sizes} add up to {sum(sizes)}, but the tensor's first "
                         f"dimension is {total}")
    return sizes


def _uneven_layout(name, output, input, split_sizes, group, part_name):
    """(group, rank's rows, all ranks' rows) of an uneven collective, whose
    ``part_name`` tensor (output or input) holds this rank's rows of the
    other; None when it does nothing here (rank not in the group, not npu)."""
    if _rank_not_in_group(group):
        _warn_not_in_group(name)
        return None
    if output.device.type != "npu" or input.device.type != "npu":
        warnings.warn("Support for Tensors is limited to those of type npu")
        return None
    if output.dtype != input.dtype:
        raise TypeError(f"{name}: output and input must have the same dtype, got {output.dtype} and {input.dtype}")
    group = _get_default_group() if group is None or group is GroupMember.WORLD else group
    whole, part = (input, output) if part_name == "output" else (output, input)
    rank = group.rank()
    sizes = _split_sizes(name, split_sizes, whole.shape[0], group.size())
    want = [sizes[rank]] + list(whole.shape[1:])
    if list(part.shape) != want:
        raise ValueError(f"{name}: {part_name} should have shape {want} on rank {rank}, got {list(part.shape)}")
    return group, sizes[rank], sizes


def _padded(tensor, rows):
    if tensor.shape[0] == rows:
        return tensor.contiguous()
    padded = tensor.new_zeros((rows,) + tuple(tensor.shape[1:]))
    padded[:tensor.shape[0]].copy_(tensor)
    return padded


def _reduce_scatter_tensor_uneven(output, input, input_split_sizes=None, op=dist.ReduceOp.SUM, group=None,
                                  async_op=False):
    """Reduces ``input`` across the group and gives rank r the rows
    ``input_split_sizes[r]`` of it (equal splits when None)."""
    layout = _uneven_layout("reduce_scatter_tensor_uneven", output, input, input_split_sizes, group, "output")
    if layout is None:
        return None
    group, mine, sizes = layout
    rows = max(sizes)
    stacked = torch.cat([_padded(chunk, rows) for chunk in torch.split(input, sizes)])
    result = output.new_empty((rows,) + tuple(input.shape[1:]))
    work = dist.reduce_scatter_tensor(result, stacked, op=op, group=group, async_op=True)
    work.wait()
    output.copy_(result[:mine])
    return work if async_op else None


def _all_gather_into_tensor_uneven(output, input, output_split_sizes=None, group=None, async_op=False):
    """Gathers each rank's ``input`` (``output_split_sizes[r]`` rows on rank
    r; equal when None) into ``output``, in rank order."""
    layout = _uneven_layout("all_gather_into_tensor_uneven", output, input, output_split_sizes, group, "input")
    if layout is None:
        return None
    group, _, sizes = layout
    rows = max(sizes)
    gathered = output.new_empty((len(sizes) * rows,) + tuple(output.shape[1:]))
    work = dist.all_gather_into_tensor(gathered, _padded(input, rows), group=group, async_op=True)
    work.wait()
    offset = 0
    for r, size in enumerate(sizes):
        output[offset:offset + size].copy_(gathered[r * rows:r * rows + size])
        offset += size
    return work if async_op else None


def reinit_process_group(group=None, rebuild_link=True):
    """torch_npu's recovery after an HCCL failure: rebuilds the group's
    communicators (rebuild_link=True, returns the group) or resumes them
    (False, returns None). vNPU's groups need neither while they are healthy;
    one aborted by the watchdog cannot be rebuilt and raises."""
    if group is None:
        group = _get_default_group()
    backend = group._get_backend(torch.device("npu"))
    if getattr(backend, "_aborted", False):
        raise RuntimeError("reinit_process_group is not supported on vNPU for a group the HCCL watchdog aborted: "
                           "its peers are gone. Destroy it and create a new group (dist.new_group).")
    return group if rebuild_link else None
