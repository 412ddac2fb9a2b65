"""Combined tensors: several npu tensors moved into one flat buffer, so that a
single kernel (a fused optimizer step, one all-reduce) covers them all while
each stays usable on its own (npu_combine_tensors, get_part_combined_tensor,
is_combined_tensor_valid; torch_npu.get_storage_size, npu_change_data_ptr).

A tensor moved into a buffer gets a storage of its own size whose memory
lies inside the buffer (torch._C._construct_storage_from_data_pointer makes a
storage over memory it does not own), so get_storage_size keeps answering
for the tensor itself, as on Ascend. The storage does not own the buffer, so
the tensor holds a reference to the buffer's storage (``_combined_storage``)
to keep it alive.
"""

import itertools

import torch


def get_storage_size(tensor) -> int:
    """How many elements of the tensor's dtype its storage holds (not the tensor's numel)."""
    return tensor.untyped_storage().nbytes() // tensor.element_size()


def npu_change_data_ptr(dst, src, offset) -> int:
    """Points dst at src's memory from element ``offset`` of src on (dst's view and storage size unchanged).

    What dst held before is not carried over. Returns 0, torch_npu's success code.
    """
    _check_can_move(dst, src, offset)
    storage = _borrowed_storage(src, offset, get_storage_size(dst))
    with torch.no_grad():
        dst.set_(storage, dst.storage_offset(), dst.size(), dst.stride())
    # The borrowed storage does not keep src's memory alive; this reference does.
    dst._combined_storage = src.untyped_storage()
    return 0


def npu_combine_tensors(list_of_tensor, require_copy_value=True):
    """Allocates one zeroed flat buffer and moves every tensor's storage into it, back to back in list order.

    Values survive the move unless ``require_copy_value`` is False (the tensors then read zeros).
    Returns the buffer, or None when the list is empty or holds no elements at all.
    """
    if not list_of_tensor:
        return None
    _check_combinable(list_of_tensor)
    sizes = [get_storage_size(tensor) for tensor in list_of_tensor]
    starts = [0, *itertools.accumulate(sizes)]
    if starts[-1] == 0:
        return None
    buffer = torch.zeros(starts[-1], dtype=list_of_tensor[0].dtype, device=list_of_tensor[0].device)
    move = _move_keeping_values if require_copy_value else npu_change_data_ptr
    for tensor, start in zip(list_of_tensor, starts):
        move(tensor, buffer, start)
    return buffer


def get_part_combined_tensor(combined_tensor, index, size):
    """A new 1-d tensor of ``size`` elements sharing combined_tensor's memory from element ``index``."""
    if combined_tensor is None or size == 0:
        return None
    end, available = index + size, get_storage_size(combined_tensor)
    if end > available:
        raise RuntimeError(f"(index + size) ({end}) > torch_npu.get_storage_size(combined_tensor) ({available})")
    part = torch.empty(size, dtype=combined_tensor.dtype, device=combined_tensor.device)
    npu_change_data_ptr(part, combined_tensor, index)
    return part


def is_combined_tensor_valid(combined_tensor, list_of_tensor) -> bool:
    """Whether each tensor of the list starts inside combined_tensor's memory (an empty list always does)."""
    if not list_of_tensor:
        return True
    if combined_tensor is None:
        return False
    low = combined_tensor.data_ptr()
    high = low + combined_tensor.element_size() * get_storage_size(combined_tensor)

    def inside(tensor):
        return tensor is not None and low <= tensor.data_ptr() < high

    return all(map(inside, list_of_tensor))


# ---------------------------------------------------------------------------------------------- helpers

def _check_can_move(dst, src, offset):
    if "npu" != dst.device.type or "npu" != src.device.type:
        raise RuntimeError(f"npu_change_data_ptr: both tensors should be on npu, got {dst.device} and {src.device}.")
    if dst.dtype != src.dtype:
        raise RuntimeError(f"npu_change_data_ptr: dst ({dst.dtype}) and src ({src.dtype}) should have the same dtype.")
    needed = get_storage_size(dst)
    room = get_storage_size(src) - src.storage_offset()
    if not 0 <= offset <= room - needed:
        raise RuntimeError(f"npu_change_data_ptr: offset {offset} + dst's storage size {needed} exceeds the "
                           f"{room} elements of src.")


def _borrowed_storage(src, offset, elements):
    """A storage of ``elements`` over src's memory from element ``offset`` on; it frees nothing when dropped."""
    itemsize = src.element_size()
    return torch._C._construct_storage_from_data_pointer(
        src.data_ptr() + itemsize * offset, src.device, itemsize * elements)


def _check_combinable(tensors):
    if any(tensor is None for tensor in tensors):
        raise RuntimeError("Tensors to combine must not have `None`.")
    expected_dtype = tensors[0].dtype
    for tensor in tensors:
        if tensor.dtype != expected_dtype:
            raise RuntimeError("Tensors to combine must have the same dtype.")
        if tensor.device.type != "npu":
            raise RuntimeError(f"Tensors to combine must be on NPU, got {tensor.device.type}.")


def _move_keeping_values(tensor, buffer, offset):
    saved = tensor.detach().clone()
    npu_change_data_ptr(tensor, buffer, offset)
    with torch.no_grad():
        tensor.copy_(saved)
