"""torch.multiprocessing reducers for npu tensors, storages and events (see
this package's docstring for why they refuse).

torch's reducers are wrapped, not replaced: a CPU tensor still goes through
shared memory exactly as without torch_npu. Without these wrappers an npu
tensor put on a queue failed inside torch with "_share_fd_: only available on
CPU", which does not say what to do.
"""

import multiprocessing.reduction

import torch
import torch.multiprocessing.reductions as _torch_reductions

__all__ = ["rebuild_npu_event", "rebuild_npu_tensor"]

_NO_IPC = ("the virtual NPU's device memory belongs to the process that allocated it and has no IPC handle "
           "another process could open.")
_WHAT_TO_DO = ("Send tensor.cpu() (shared memory, as torch does for CPU tensors) and call .npu() in the receiving "
               "process.")

# torch's reducers, captured before _add_reductions_methods() swaps in the wrappers.
_torch_reduce_tensor = _torch_reductions.reduce_tensor
_torch_reduce_storage = _torch_reductions.reduce_storage


def rebuild_npu_event(device, handle):
    """Receiving side of an npu event sent through IPC: there are none on vNPU."""
    raise RuntimeError(f"torch_npu.multiprocessing.reductions.rebuild_npu_event is not supported on vNPU: {_NO_IPC} "
                       "Use a torch.multiprocessing.Event or a queue message to signal between processes.")


def rebuild_npu_tensor(tensor_cls, tensor_size, tensor_stride, tensor_offset, storage_cls, dtype, storage_device,
                       storage_handle, storage_size_bytes, storage_offset_bytes, requires_grad, ref_counter_handle,
                       ref_counter_offset, event_handle, event_sync_required):
    """Receiving side of an npu tensor sent through IPC: no process produces one on vNPU."""
    raise RuntimeError(f"torch_npu.multiprocessing.reductions.rebuild_npu_tensor is not supported on vNPU: {_NO_IPC} "
                       f"{_WHAT_TO_DO}")


def _npu_reduce_tensor(tensor):
    if tensor.device.type == "npu":
        raise RuntimeError(f"Cannot share an npu tensor with another process on vNPU: {_NO_IPC} {_WHAT_TO_DO}")
    return _torch_reduce_tensor(tensor)


def _npu_reduce_storage(storage):
    if storage.device.type == "npu":
        raise RuntimeError(f"Cannot pickle an npu storage for another process on vNPU: {_NO_IPC} {_WHAT_TO_DO}")
    return _torch_reduce_storage(storage)


def _npu_reduce_event(event):
    raise RuntimeError(f"Cannot share a torch.npu.Event with another process on vNPU: {_NO_IPC} "
                       "Use a torch.multiprocessing.Event or a queue message to signal between processes.")


def _add_reductions_methods():
    """Registers the npu-aware reducers with torch.multiprocessing's pickler
    (init_reductions reads the module's reduce_tensor/reduce_storage names)."""
    import torch_npu.npu  # noqa: F401  (torch.npu.Event)

    multiprocessing.reduction.ForkingPickler.register(torch.npu.Event, _npu_reduce_event)
    _torch_reductions.reduce_tensor = _npu_reduce_tensor
    _torch_reductions.reduce_storage = _npu_reduce_storage
    _torch_reductions.init_reductions()
