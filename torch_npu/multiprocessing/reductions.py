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
"""

import multiprocessing.reduction

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

_NO_EVENT_IPC = ("the virtual NPU's events live in the process that made them and have no IPC handle another "
                 "process could open. Use a torch.multiprocessing.Event or a queue message to signal between "
                 "processes.")


def rebuild_npu_event(device, handle):
    """Receiving side of an npu event sent through IPC: there are none on vNPU."""
    raise RuntimeError(f"torch_npu.multiprocessing.reductions.rebuild_npu_event is not supported on vNPU: "
                       f"{_NO_EVENT_IPC}")


def _npu_reduce_event(event):
    raise RuntimeError(f"Cannot share a torch.npu.Event with another process on vNPU: {_NO_EVENT_IPC}")


# ---------------------------------------------------------------- storages' IPC handles

def _share_npu_(self):
    """UntypedStorage._share_npu_(): (device, handle, storage_size_bytes,
    storage_offset_bytes, ref_counter_handle, ref_counter_offset,
    event_handle, event_sync_required), as torch's _share_cuda_."""
    storage = self._untyped_storage if isinstance(self, torch.TypedStorage) else self
    if storage.device.type != "npu":  # torch's words for its CPU and CUDA forms
        raise RuntimeError("_share_npu_: only available on NPU")
    nbytes = storage.nbytes()
    device = storage.device.index
    if nbytes == 0:
        return device, None, 0, 0, None, 0, None, False
    handle = _C._npu_ipc_handle(storage.data_ptr(), nbytes)
    if handle is None:
        raise RuntimeError(
            "Cannot share an npu tensor with another process (shareIpcHandle: its device memory is not in vNPU's "
            "shared arena). "
            "Set VNPU_SHARED_DEVICE_MEMORY=1 in the sending process before it first uses the device (torchrun "
            "with several local ranks turns it on), or send tensor.cpu() and call .npu() in the receiver.")
    # The receiver reads the memory as soon as it has it: the writes queued
    # before the send complete first (CUDA passes an IPC event for this).
    torch.npu.synchronize(device)
    return device, handle, nbytes, 0, None, 0, None, False


def _new_shared_npu(cls, device, handle, storage_size_bytes, storage_offset_bytes, ref_counter_handle,
                    ref_counter_offset, event_handle, event_sync_required):
    """UntypedStorage._new_shared_npu(...): the storage an IPC handle names, aliasing the sender's memory."""
    address, arena_bytes, offset = handle
    index = torch.device(device).index if isinstance(device, (str, torch.device)) else int(device)
    data = _C._npu_storage_bytes_from_ipc_handle(index, address, arena_bytes, offset + storage_offset_bytes,
                                                 storage_size_bytes)
    return data.untyped_storage()


def _release_ipc_counter_npu(cls, ref_counter_handle, ref_counter_offset, device=None):
    """No cross-process reference counts on vNPU (the sender keeps its tensor alive, as documented)."""


def _typed_share_npu_(self, *args, **kwargs):
    return self._untyped_storage._share_npu_(*args, **kwargs)


def _typed_new_shared_npu(cls, *args, **kwargs):
    return torch.UntypedStorage._new_shared_npu(*args, **kwargs)


def _install_storage_methods():
    torch.UntypedStorage._share_npu_ = _share_npu_
    torch.UntypedStorage._new_shared_npu = classmethod(_new_shared_npu)
    torch.UntypedStorage._release_ipc_counter_npu = classmethod(_release_ipc_counter_npu)
    torch.TypedStorage._share_npu_ = _typed_share_npu_
    torch.TypedStorage._new_shared_npu = classmethod(_typed_new_shared_npu)
    torch.TypedStorage._release_ipc_counter_npu = classmethod(_release_ipc_counter_npu)


# ---------------------------------------------------------------- tensors

def rebuild_npu_tensor(tensor_cls, tensor_size, tensor_stride, tensor_offset, storage_cls, dtype, storage_device,
                       storage_handle, storage_size_bytes, storage_offset_bytes, requires_grad, ref_counter_handle,
                       ref_counter_offset, event_handle, event_sync_required):
    """Receiving side of an npu tensor sent through IPC: a tensor over the sender's memory."""
    if storage_handle is None or storage_size_bytes == 0:
        storage = torch.UntypedStorage(0, device=torch.device("npu", storage_device)
                                       if isinstance(storage_device, int) else storage_device)
    else:
        key = (storage_handle, storage_offset_bytes)
        storage = storage_from_cache(storage_cls, key)
        if storage is None:
            torch.npu._lazy_init()
            storage = storage_cls._new_shared_npu(storage_device, storage_handle, storage_size_bytes,
                                                  storage_offset_bytes, ref_counter_handle, ref_counter_offset,
                                                  event_handle, event_sync_required)
            shared_cache[key] = StorageWeakRef(storage)
    untyped = storage if isinstance(storage, torch.UntypedStorage) else storage._untyped_storage
    t = torch._utils._rebuild_tensor(torch.TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True),
                                     tensor_offset, tensor_size, tensor_stride)
    if tensor_cls == torch.nn.parameter.Parameter:
        # an integer Parameter must be made with requires_grad=False
        return torch.nn.parameter.Parameter(t, requires_grad=requires_grad)
    t.requires_grad = requires_grad
    return t


def _npu_reduce_tensor(tensor):
    """torch's reduce_tensor, with npu tensors sent as IPC handles of their storage."""
    if tensor.device.type != "npu":
        return _torch_reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not support "
            "crossing process boundaries.  If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue).")
    torch.utils.hooks.warn_if_has_hooks(tensor)
    storage = tensor._typed_storage()
    (device, handle, storage_size_bytes, storage_offset_bytes, ref_counter_handle, ref_counter_offset,
     event_handle, event_sync_required) = storage._share_npu_()
    shared_cache[handle] = StorageWeakRef(storage)
    return (rebuild_npu_tensor,
            (type(tensor), tensor.size(), tensor.stride(), tensor.storage_offset(), type(storage), tensor.dtype,
             device, handle, storage_size_bytes, storage_offset_bytes, tensor.requires_grad, ref_counter_handle,
             ref_counter_offset, event_handle, event_sync_required))


def _npu_reduce_storage(storage):
    """torch's reduce_storage; an npu storage alone cannot be pickled (as a CUDA one cannot)."""
    if storage.device.type == "npu":
        raise RuntimeError("Cannot pickle NPU storage; try pickling a NPU tensor instead")
    if torch.multiprocessing.get_sharing_strategy() == "file_system":
        metadata = storage._share_filename_cpu_()
        cache_key = metadata[1]
        rebuild = rebuild_storage_filename
        if isinstance(storage, torch.TypedStorage):
            metadata += (storage.dtype,)
        storage._shared_incref()
    elif storage.size() == 0:
        return (rebuild_storage_empty, (type(storage),))  # an empty storage cannot be mmapped
    else:
        fd, size = storage._share_fd_cpu_()
        cache_key = fd_id(fd)
        metadata = (multiprocessing.reduction.DupFd(fd), size)
        rebuild = rebuild_storage_fd
    shared_cache[cache_key] = StorageWeakRef(storage)
    return (rebuild, (type(storage),) + metadata)


# torch's reducers, captured before _add_reductions_methods() swaps in ours.
_torch_reduce_tensor = _torch_reductions.reduce_tensor


def _add_reductions_methods():
    """Registers the npu-aware reducers with torch.multiprocessing's pickler
    (init_reductions reads the module's reduce_tensor/reduce_storage names)."""
    import torch_npu.npu  # noqa: F401  (torch.npu.Event)

    _install_storage_methods()
    multiprocessing.reduction.ForkingPickler.register(torch.npu.Event, _npu_reduce_event)
    _torch_reductions.reduce_tensor = _npu_reduce_tensor
    _torch_reductions.reduce_storage = _npu_reduce_storage
    _torch_reductions.init_reductions()
