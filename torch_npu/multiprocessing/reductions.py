"""torch.multiprocessing reducers for npu tensors, storages and events.

An npu tensor put on a ``torch.multiprocessing`` queue (or sent with
``ForkingPickler``, as RL frameworks pass weights between trainer and
rollout processes) travels as an IPC handle of its storage, as CUDA tensors
do: the receiver's tensor aliases the sender's device memory (Note [Sharing
npu tensors between processes] in csrc/python/ipc_bindings.cpp). That needs
the sender's device memory in its shared arena (VNPU_SHARED_DEVICE_MEMORY=1
before the device is first used; on by default under torchrun with several
local ranks); without it the reducer says so. As with CUDA, the sender must
keep the tensor alive while receivers use it.

The handle is ``storage._share_npu_()``'s tuple and the receiver rebuilds
with ``torch.UntypedStorage._new_shared_npu(...)``, the names and argument
orders of torch's CUDA reducers and of real torch_npu. CPU tensors and
storages take torch's own paths (shared memory by file descriptor or file
name). An npu storage pickled alone, and npu events, are refused.

torch's reduce_tensor does the checks and takes the view's geometry; only
the storage part of an npu tensor's reduction is ours.
"""

import multiprocessing.reduction
from typing import NamedTuple

import torch
import torch.multiprocessing.reductions as _torch_reductions
from torch.multiprocessing.reductions import (  # noqa: F401  (the names real torch_npu's module re-exports)
    StorageWeakRef,
    fd_id,
    rebuild_meta_tensor,
    rebuild_storage_empty,
    rebuild_storage_fd,
    rebuild_storage_filename,
    rebuild_tensor,
    shared_cache,
    storage_from_cache,
)

from torch_npu import _C

__all__ = ["rebuild_npu_event", "rebuild_npu_tensor"]

# torch's reducers, kept before _add_reductions_methods() puts ours in their place.
_torch_reduce_tensor = _torch_reductions.reduce_tensor
_torch_reduce_storage = _torch_reductions.reduce_storage


class _NpuIpcHandle(NamedTuple):
    """What ``_share_npu_`` returns: the fields (and order) of torch's ``_share_cuda_``.
    vNPU fills no reference counter and no event: the sender keeps its
    memory alive, and the device is synchronised before the handle leaves."""
    device: int
    handle: object               # (arena address, arena bytes, offset), or None for an empty storage
    storage_size_bytes: int
    storage_offset_bytes: int
    ref_counter_handle: object = None
    ref_counter_offset: int = 0
    event_handle: object = None
    event_sync_required: bool = False


# ---------------------------------------------------------------- events

_EVENTS_STAY_HOME = ("the virtual NPU's events live in the process that made them and have no IPC handle another "
                     "process could open. Use a torch.multiprocessing.Event or a queue message to signal between "
                     "processes.")


def rebuild_npu_event(device, handle):
    """Receiving side of an npu event sent through IPC: there are none on vNPU."""
    raise RuntimeError(f"torch_npu.multiprocessing.reductions.rebuild_npu_event is not supported on vNPU: "
                       f"{_EVENTS_STAY_HOME}")


def _npu_reduce_event(event):
    raise RuntimeError(f"Cannot share a torch.npu.Event with another process on vNPU: {_EVENTS_STAY_HOME}")


# ---------------------------------------------------------------- npu storages' IPC handles

def _untyped(storage):
    return storage._untyped_storage if isinstance(storage, torch.TypedStorage) else storage


def _share_npu_(self):
    """``storage._share_npu_()``: the _NpuIpcHandle another process opens this storage's memory with."""
    storage = _untyped(self)
    if storage.device.type != "npu":
        raise RuntimeError("_share_npu_: only available on NPU")  # _share_cuda_'s words
    index, nbytes = storage.device.index, storage.nbytes()
    if nbytes == 0:
        return _NpuIpcHandle(index, None, 0, 0)
    handle = _C._npu_ipc_handle(storage.data_ptr(), nbytes)
    if handle is None:
        raise RuntimeError(
            "Cannot share an npu tensor with another process (shareIpcHandle: its device memory is not in vNPU's "
            "shared arena). "
            "Set VNPU_SHARED_DEVICE_MEMORY=1 in the sending process before it first uses the device (torchrun "
            "with several local ranks turns it on), or send tensor.cpu() and call .npu() in the receiver.")
    # The receiver may read the memory as soon as the handle arrives, so the
    # work queued on it must be done (what CUDA's IPC event is for).
    torch.npu.synchronize(index)
    return _NpuIpcHandle(index, handle, nbytes, 0)


def _new_shared_npu(cls, device, handle, storage_size_bytes, storage_offset_bytes, ref_counter_handle,
                    ref_counter_offset, event_handle, event_sync_required):
    """``UntypedStorage._new_shared_npu(*ipc_handle)``: an UntypedStorage over the sender's memory."""
    arena_address, arena_bytes, offset = handle
    if isinstance(device, (str, torch.device)):
        device = torch.device(device).index
    view = _C._npu_storage_bytes_from_ipc_handle(int(device), arena_address, arena_bytes,
                                                 offset + storage_offset_bytes, storage_size_bytes)
    return view.untyped_storage()


def _typed_new_shared_npu(cls, *args, **kwargs):
    return torch.UntypedStorage._new_shared_npu(*args, **kwargs)


def _release_ipc_counter_npu(cls, ref_counter_handle, ref_counter_offset, device=None):
    """Nothing to release: vNPU keeps no cross-process reference counts."""


def _install_storage_methods():
    """The storage methods torch names for CUDA (``_share_cuda_`` ...), in their npu form."""
    for storage_cls in (torch.UntypedStorage, torch.TypedStorage):
        storage_cls._share_npu_ = _share_npu_
        storage_cls._release_ipc_counter_npu = classmethod(_release_ipc_counter_npu)
    torch.UntypedStorage._new_shared_npu = classmethod(_new_shared_npu)
    torch.TypedStorage._new_shared_npu = classmethod(_typed_new_shared_npu)


# ---------------------------------------------------------------- tensors

def _open_shared_storage(storage_cls, storage_device, storage_handle, storage_size_bytes, storage_offset_bytes,
                         *counter_and_event):
    """The storage an IPC handle names, opened once per process: every later
    tensor over the same storage finds it in torch's shared_cache."""
    if storage_handle is None or storage_size_bytes == 0:
        if isinstance(storage_device, int):
            storage_device = torch.device("npu", storage_device)
        return torch.UntypedStorage(0, device=storage_device)
    key = (storage_handle, storage_offset_bytes)
    storage = storage_from_cache(storage_cls, key)
    if storage is None:
        torch.npu._lazy_init()
        storage = storage_cls._new_shared_npu(storage_device, storage_handle, storage_size_bytes,
                                              storage_offset_bytes, *counter_and_event)
        shared_cache[key] = StorageWeakRef(storage)
    return storage


def rebuild_npu_tensor(tensor_cls, tensor_size, tensor_stride, tensor_offset, storage_cls, dtype, storage_device,
                       storage_handle, storage_size_bytes, storage_offset_bytes, requires_grad, ref_counter_handle,
                       ref_counter_offset, event_handle, event_sync_required):
    """Receiving side of an npu tensor sent through IPC: a tensor over the sender's memory."""
    storage = _open_shared_storage(storage_cls, storage_device, storage_handle, storage_size_bytes,
                                   storage_offset_bytes, ref_counter_handle, ref_counter_offset, event_handle,
                                   event_sync_required)
    typed = torch.TypedStorage(wrap_storage=_untyped(storage), dtype=dtype, _internal=True)
    return rebuild_tensor(tensor_cls, typed, (tensor_offset, tensor_size, tensor_stride, requires_grad))


def _npu_reduce_tensor(tensor):
    """torch's reduce_tensor, with an npu tensor's storage sent as an IPC handle.

    torch's reducer refuses what cannot cross processes and, for a device it
    does not know, returns ``rebuild_tensor`` with the view's geometry and the
    storage itself, which a pickler could not send: that storage is swapped
    for its handle here."""
    reduced = _torch_reduce_tensor(tensor)
    if tensor.device.type != "npu" or reduced[0] is not rebuild_tensor:
        return reduced  # CPU, meta, sparse (its parts come back here) and nested tensors
    cls, storage, (offset, size, stride, requires_grad) = reduced[1]
    shared = _NpuIpcHandle(*storage._share_npu_())
    shared_cache[shared.handle] = StorageWeakRef(storage)  # the sender's storage stays findable by its handle
    return (rebuild_npu_tensor,
            (cls, size, stride, offset, type(storage), tensor.dtype, shared.device, shared.handle,
             shared.storage_size_bytes, shared.storage_offset_bytes, requires_grad, shared.ref_counter_handle,
             shared.ref_counter_offset, shared.event_handle, shared.event_sync_required))


# ---------------------------------------------------------------- storages alone

def _share_by_file_name(storage):
    """The "file_system" strategy: the receiver maps a named shared-memory file."""
    metadata = storage._share_filename_cpu_()
    storage._shared_incref()  # the file outlives this process's last reference until the receiver has it
    shared_cache[metadata[1]] = StorageWeakRef(storage)
    if isinstance(storage, torch.TypedStorage):
        metadata += (storage.dtype,)
    return rebuild_storage_filename, (type(storage),) + metadata


def _share_by_file_descriptor(storage):
    """The "file_descriptor" strategy: the descriptor itself is duplicated into the receiver."""
    fd, size = storage._share_fd_cpu_()
    shared_cache[fd_id(fd)] = StorageWeakRef(storage)
    return rebuild_storage_fd, (type(storage), multiprocessing.reduction.DupFd(fd), size)


def _npu_reduce_storage(storage):
    """torch's reduce_storage; an npu storage alone cannot be pickled (as a CUDA one cannot)."""
    device_type = storage.device.type
    if device_type == "npu":
        raise RuntimeError("Cannot pickle NPU storage; try pickling a NPU tensor instead")
    if device_type != "cpu":
        return _torch_reduce_storage(storage)  # its refusals of CUDA and meta storages
    if torch.multiprocessing.get_sharing_strategy() == "file_system":
        return _share_by_file_name(storage)
    if storage.size() == 0:
        return rebuild_storage_empty, (type(storage),)  # nothing to map
    return _share_by_file_descriptor(storage)


def _add_reductions_methods():
    """Makes torch.multiprocessing's pickler send npu tensors as IPC handles
    (init_reductions registers whatever the module's reduce_tensor and
    reduce_storage are when it runs)."""
    import torch_npu.npu  # noqa: F401  (torch.npu.Event)

    _install_storage_methods()
    _torch_reductions.reduce_tensor = _npu_reduce_tensor
    _torch_reductions.reduce_storage = _npu_reduce_storage
    _torch_reductions.init_reductions()
    multiprocessing.reduction.ForkingPickler.register(torch.npu.Event, _npu_reduce_event)
