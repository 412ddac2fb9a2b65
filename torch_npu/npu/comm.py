"""The single-process multi-device collectives nn.DataParallel uses.

torch.nn.parallel.comm calls torch._C._broadcast, _broadcast_coalesced,
_scatter, _gather (and their ``_out`` forms), which only CUDA builds of torch
define. On npu they are device-to-device copies queued on the current (or the
given) streams, with the semantics and argument checks of
torch/csrc/cuda/comm.cpp: a chunk already on its device is a view, the
source device's broadcast output is the input itself, and gather to device
-1 gathers on the CPU. Devices are npu indices.
"""

import contextlib

import torch

__all__ = ["broadcast", "broadcast_out", "broadcast_coalesced", "scatter", "scatter_out", "gather", "gather_out"]


def _npu(index):
    return torch.device("npu", index)


def _check_devices(devices, what):
    if len(devices) == 0:
        raise RuntimeError(f"Expected at least one device to {what} to")


def broadcast(tensor, devices):
    _check_devices(devices, "broadcast")
    return [tensor if tensor.device == _npu(d) else tensor.to(_npu(d), copy=True) for d in devices]


def broadcast_out(tensor, out):
    for i, o in enumerate(out):
        if o.device.type != "npu":
            raise RuntimeError(f"Expected all output tensors to be npu tensors, but output tensor at index {i} "
                               f"has device '{o.device}'")
        if o.shape != tensor.shape:
            raise RuntimeError(f"Expected all output tensors to have same shape as the source (shape "
                               f"{list(tensor.shape)}) in order to broadcast, but output tensor at index {i} has "
                               f"shape {list(o.shape)}")
        o.copy_(tensor, non_blocking=True)
    return list(out)


def broadcast_coalesced(tensors, devices, buffer_size):
    _check_devices(devices, "broadcast")
    for t in tensors:
        if t.device != _npu(devices[0]):
            raise RuntimeError(f"All tensors must be on devices[0]: {devices[0]}")
    outputs = [list(tensors)]
    for d in devices[1:]:
        outputs.append([t.to(_npu(d), copy=True).detach() for t in tensors])
    return outputs


def _chunks(tensor, count, chunk_sizes, dim):
    if chunk_sizes is None:
        return tensor.chunk(count, dim)
    if len(chunk_sizes) != count:
        raise RuntimeError(f"Expected devices and chunk_sizes to be of same length, but got len(devices) = "
                           f"{count} and len(chunk_sizes) = {len(chunk_sizes)}")
    if any(size <= 0 for size in chunk_sizes):
        raise RuntimeError("Expected positive chunk sizes in scatter")
    if sum(chunk_sizes) != tensor.size(dim):
        raise RuntimeError(f"Expected chunk sizes to sum to {tensor.size(dim)}, but got total chunk size of "
                           f"{sum(chunk_sizes)} instead")
    return tensor.split_with_sizes(list(chunk_sizes), dim)


def _stream_context(streams, i):
    if streams and streams[i] is not None:
        return torch.npu.stream(streams[i])
    return contextlib.nullcontext()


def scatter(tensor, devices, chunk_sizes=None, dim=0, streams=None):
    _check_devices(devices, "scatter")
    if streams is not None and len(streams) != len(devices):
        raise RuntimeError(f"Expected devices and streams to be of same length, but got len(devices) = "
                           f"{len(devices)} and len(streams) = {len(streams)}")
    chunks = _chunks(tensor, len(devices), chunk_sizes, dim)
    out = []
    for i, (chunk, d) in enumerate(zip(chunks, devices)):
        with _stream_context(streams, i):
            out.append(chunk.to(_npu(d), non_blocking=True, copy=False, memory_format=torch.preserve_format))
    return tuple(out)


def scatter_out(tensor, out, dim=0, streams=None):
    if len(out) == 0:
        raise RuntimeError("Expected at least one output tensor to scatter to")
    sizes = [o.size(dim) for o in out]
    chunks = _chunks(tensor, len(out), sizes, dim)
    for i, (chunk, o) in enumerate(zip(chunks, out)):
        expected = list(tensor.shape)
        expected[dim] = o.size(dim)
        if list(o.shape) != expected:
            raise RuntimeError(f"Output tensor at index {i} has incorrect shape: {list(o.shape)}. Expected same "
                               f"shape except for scatter dim {dim} as the source tensor: {list(tensor.shape)}.")
        with _stream_context(streams, i):
            o.copy_(chunk, non_blocking=True)
    return tuple(out)


def _check_gather(tensors, dim):
    if len(tensors) == 0:
        raise RuntimeError("Expected at least one tensor to gather from")
    first = tensors[0]
    for i, t in enumerate(tensors):
        if t.device.type != "npu":
            raise RuntimeError(f"Expected all input tensors to be npu tensors, but tensor at index {i} has device "
                               f"{t.device}")
        if t.dim() != first.dim():
            raise RuntimeError(f"Expected all input tensors to have the same number of dimensions, but got tensor "
                               f"at index {i} with {t.dim()} dims")
        for k in range(first.dim()):
            if k != dim and t.size(k) != first.size(k):
                raise RuntimeError(f"Input tensor at index {i} has invalid shape {list(t.shape)}, but expected "
                                   f"{list(first.shape[:dim]) + ['*'] + list(first.shape[dim + 1:])}")


def gather(tensors, dim=0, destination=None):
    _check_gather(tensors, dim)
    dim = dim % max(tensors[0].dim(), 1)
    target = torch.device("cpu") if destination == -1 else _npu(
        torch.npu.current_device() if destination is None else destination)
    return torch.cat([_moved(t, target) for t in tensors], dim)


def gather_out(tensors, out, dim=0):
    _check_gather(tensors, dim)
    torch.cat([_moved(t, out.device) for t in tensors], dim, out=out)
    return out


def _moved(t, target):
    """`t` on `target`. Copies to the host are blocking, as CUDA's gather makes
    them: a non_blocking one lands in pinned memory that the host-side cat
    would read before the copy ran."""
    return t.to(target, non_blocking=target.type != "cpu")


def _install():
    """Publishes these as torch._C._broadcast, ... where torch lacks them (CPU builds)."""
    for name, fn in (("_broadcast", broadcast), ("_broadcast_out", broadcast_out),
                     ("_broadcast_coalesced", broadcast_coalesced), ("_scatter", scatter),
                     ("_scatter_out", scatter_out), ("_gather", gather), ("_gather_out", gather_out)):
        if not hasattr(torch._C, name):
            setattr(torch._C, name, fn)
