"""The allocator bindings of NPU graph trees, under real torch_npu's names.

Real torch_npu's ``_C`` has C++ bindings that its graph trees
(torch_npu/npu/_graph_tree.py) call, each the NPU twin of a CUDA one torch's
``cudagraph_trees`` calls. vNPU's allocator already does what they need
through other bindings (``_npu_begin_allocate_to_pool``, ``_memory_snapshot``)
or torch's device-agnostic ones, so they are defined here in Python and
installed on ``torch_npu._C`` at import (as ``torch_npu/_client_names.py``
installs its names). Each states where it differs from the CUDA one.

Pool (0, 0) is c10's null MempoolId: it names no pool. Routing to it leaves
allocations with the ordinary allocator, and it has no segments.

Not provided (vNPU's allocator cannot do them from Python), and not needed by
vNPU's graph trees (Note [Graph-tree outputs own their memory] in
_graph_tree.py): ``_npu_setCheckpointPoolState`` (restoring a pool's blocks
to a checkpoint), ``_free_And_Remove_DeleterFn`` and
``_set_storage_access_error_msg`` (freeing a live storage's memory and making
later access raise).
"""

import torch

from torch_npu import _C
from torch_npu.npu.device import _get_device_index

__all__ = []

_NO_POOL = (0, 0)


def _is_no_pool(pool):
    return tuple(pool) == _NO_POOL


def _npu_beginAllocateCurrentThreadToPool(device, pool):
    """This thread's allocations on ``device`` go to ``pool`` until
    ``_npu_endAllocateToPool``. Takes a use of the pool, as CUDA's does."""
    if not _is_no_pool(pool):
        _C._npu_begin_allocate_to_pool(_get_device_index(device, optional=True), tuple(pool))


def _npu_endAllocateToPool(device, pool):
    """Ends the routing ``_npu_beginAllocateCurrentThreadToPool`` began. vNPU's
    binding also gives back the use the routing took (CUDA's leaves that to
    ``_npu_releasePool``)."""
    if not _is_no_pool(pool):
        _C._npu_end_allocate_to_pool(_get_device_index(device, optional=True), tuple(pool))


def _npu_releasePool(device, pool):
    """Gives back the use of ``pool`` a routing took. The routing's end has
    already done so on vNPU (see ``_npu_endAllocateToPool``), so this call,
    which always follows it, has nothing left to do; a pool is freed when its
    last graph and routing are gone."""


def _pool_segments(pool):
    if _is_no_pool(pool):
        return []
    return torch.npu.memory.memory_snapshot(tuple(pool))


def blocks_by_address(segments):
    """(address, block) for every block of ``segments`` (as ``memory_snapshot``
    gives them), each segment's blocks in address order."""
    for segment in segments:
        address = segment["address"]
        for block in segment["blocks"]:
            yield address, block
            address += block["size"]


def _live_block_addresses(segments):
    return {address for address, block in blocks_by_address(segments) if block["state"] == "active_allocated"}


class AllocatorState:
    """A pool's blocks when it was checkpointed (``_npu_getCheckpointState``):
    the segments as ``memory_snapshot`` gives them. A record, for debugging and
    for ``live_block_addresses``; vNPU cannot restore a pool to it."""

    def __init__(self, device, pool, segments):
        self.device = device
        self.pool = pool
        self.segments = segments

    def live_block_addresses(self):
        return _live_block_addresses(self.segments)

    def __repr__(self):
        return f"AllocatorState(npu:{self.device}, pool {self.pool}, {len(self.live_block_addresses())} live blocks)"


def _npu_getCheckpointState(device, pool):
    """The state of ``pool``'s blocks now (an ``AllocatorState``)."""
    pool = tuple(pool)
    return AllocatorState(_get_device_index(device, optional=True), pool, _pool_segments(pool))


def _npu_checkPoolLiveAllocations(device, pool, expected_live_allocations):
    """Whether the blocks allocated in ``pool`` start exactly at the addresses
    ``expected_live_allocations`` (a set of data pointers)."""
    return _live_block_addresses(_pool_segments(pool)) == set(expected_live_allocations)


def _construct_NPU_Tensor_From_Storage_And_Metadata(metadata, storage):
    """A tensor over ``storage`` with the size, stride, storage offset and
    dtype of ``metadata`` (a graph tree's ``_tensor_metadata``), on npu, and
    its ``npu_format`` if it names one (vNPU's formats are labels on tensors)."""
    out = torch.empty(0, dtype=metadata["dtype"], device=storage.device)
    out.set_(storage, metadata["storage_offset"], metadata["size"], metadata["stride"])
    npu_format = metadata.get("npu_format")
    if npu_format is not None:
        torch.ops.npu.npu_format_cast_.acl_format(out, int(npu_format))
    return out


def _tensors_data_ptrs_at_indices_equal(tensors, data_ptrs, indices):
    """Whether ``tensors[i].data_ptr() == data_ptrs[i]`` at each of ``indices``
    (CUDA builds do this in C++, on the hot path)."""
    for i in indices:
        t = tensors[i]
        if not isinstance(t, torch.Tensor) or t.data_ptr() != data_ptrs[i]:
            return False
    return True


_NAMES = {
    "_npu_beginAllocateCurrentThreadToPool": _npu_beginAllocateCurrentThreadToPool,
    "_npu_endAllocateToPool": _npu_endAllocateToPool,
    "_npu_releasePool": _npu_releasePool,
    "_npu_getCheckpointState": _npu_getCheckpointState,
    "_npu_checkPoolLiveAllocations": _npu_checkPoolLiveAllocations,
    "_construct_NPU_Tensor_From_Storage_And_Metadata": _construct_NPU_Tensor_From_Storage_And_Metadata,
    "_tensors_data_ptrs_at_indices_equal": _tensors_data_ptrs_at_indices_equal,
}

# torch's own, device-agnostic: real torch_npu binds them on its _C too.
_TORCH_NAMES = ("_construct_storage_from_data_pointer", "_add_cached_tensor", "_remove_cached_tensor",
                "_is_cached_tensor", "_set_cached_tensors_enabled")


def install():
    for name, fn in _NAMES.items():
        if not hasattr(_C, name):
            setattr(_C, name, fn)
    for name in _TORCH_NAMES:
        if not hasattr(_C, name):
            setattr(_C, name, getattr(torch._C, name))
