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

import torch


def get_storage_size(tensor) -> int:
    """The number of elements of the tensor's storage."""
    return tensor.untyped_storage().nbytes() // tensor.element_size()


def npu_change_data_ptr(dst, src, offset) -> int:
    """Moves dst's storage to ``src.data_ptr() + offset`` elements, keeping
    dst's shape, strides and storage size; dst's old contents are not copied."""
    if dst.device.type != "npu" or src.device.type != "npu":
        raise RuntimeError(f"npu_change_data_ptr: both tensors should be on npu, got {dst.device} and {src.device}.")
    if dst.dtype != src.dtype:
        raise RuntimeError(f"npu_change_data_ptr: dst ({dst.dtype}) and src ({src.dtype}) should have the same dtype.")
    size = get_storage_size(dst)
    available = get_storage_size(src) - src.storage_offset()
    if offset < 0 or offset + size > available:
        raise RuntimeError(f"npu_change_data_ptr: offset {offset} + dst's storage size {size} exceeds the "
                           f"{available} elements of src.")
    storage = torch._C._construct_storage_from_data_pointer(
        src.data_ptr() + offset * src.element_size(), src.device, size * src.element_size())
    with torch.no_grad():
        dst.set_(storage, dst.storage_offset(), dst.size(), dst.stride())
    dst._combined_storage = src.untyped_storage()
    return 0


def npu_combine_tensors(list_of_tensor, require_copy_value=True):
    """One zero-initialised flat npu buffer holding every tensor's storage, in
    order; each tensor is moved into it (values kept unless
    require_copy_value=False). None for an empty list or no elements."""
    if len(list_of_tensor) == 0:
        return None
    if any(t is None for t in list_of_tensor):
        raise RuntimeError("Tensors to combine must not have `None`.")
    dtype = list_of_tensor[0].dtype
    for tensor in list_of_tensor:
        if tensor.dtype != dtype:
            raise RuntimeError("Tensors to combine must have the same dtype.")
        if tensor.device.type != "npu":
            raise RuntimeError(f"Tensors to combine must be on NPU, got {tensor.device.type}.")
    sizes = [get_storage_size(t) for t in list_of_tensor]
    if sum(sizes) == 0:
        return None
    combined = torch.zeros(sum(sizes), dtype=dtype, device=list_of_tensor[0].device)
    offset = 0
    for tensor, size in zip(list_of_tensor, sizes):
        values = tensor.detach().clone() if require_copy_value else None
        npu_change_data_ptr(tensor, combined, offset)
        if values is not None:
            with torch.no_grad():
                tensor.copy_(values)
        offset += size
    return combined


def get_part_combined_tensor(combined_tensor, index, size):
    """A flat tensor of ``size`` elements over combined_tensor from element ``index``."""
    if combined_tensor is None or size == 0:
        return None
    total = get_storage_size(combined_tensor)
    if index + size > total:
        raise RuntimeError(f"(index + size) ({index + size}) > torch_npu.get_storage_size(combined_tensor) ({total})")
    part = torch.empty(size, dtype=combined_tensor.dtype, device=combined_tensor.device)
    npu_change_data_ptr(part, combined_tensor, index)
    return part


def is_combined_tensor_valid(combined_tensor, list_of_tensor) -> bool:
    """True when every tensor's data lies inside combined_tensor."""
    if len(list_of_tensor) == 0:
        return True
    if combined_tensor is None:
        return False
    start = combined_tensor.data_ptr()
    end = start + get_storage_size(combined_tensor) * combined_tensor.element_size()
    return all(t is not None and start <= t.data_ptr() < end for t in list_of_tensor)
