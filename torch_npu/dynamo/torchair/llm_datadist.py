"""torchair.llm_datadist: npu tensors over device memory that another
component allocated (LLM-DataDist's KV-cache buffers, passed between
prefill and decode instances by address).

``create_npu_tensors(shape, dtype, addresses)`` makes one contiguous tensor
of ``shape`` and ``dtype`` per address, on the current npu device, viewing
the memory there without owning it: the caller keeps the memory alive while
the tensors are used, as with real torchair. An address must lie in npu
memory of the current device (an npu tensor's ``data_ptr()`` or
``aclrtMalloc``'s), with room for the tensor; anything else is refused
(ValueError) rather than handed out as a tensor over arbitrary memory.
"""

from typing import List

import torch

__all__ = ["create_npu_tensors"]

# The dtypes torchair maps to GE data types (its _TORCH_DTYPE_TO_GE_TYPE).
_SUPPORTED_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bfloat16,
                     torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128)


def _check_list_of(name, value, inner):
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} only support ['list', 'tuple'], but got {type(value)}.")
    for item in value:
        if not isinstance(item, inner) or isinstance(item, bool):
            raise TypeError(f"{name} inner type only support [{inner}], but got {type(item)}.")


def create_npu_tensors(shape: List[int], dtype: torch.dtype, addresses: List[int]) -> List[torch.Tensor]:
    _check_list_of("shape", shape, int)
    _check_list_of("addresses", addresses, int)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype only support ['dtype'], but got {type(dtype)}.")
    if dtype not in _SUPPORTED_DTYPES:
        raise ValueError(f"unsupported dtype: {dtype}, supported = {list(_SUPPORTED_DTYPES)}")
    from torch_npu import _C

    tensors = []
    for address in addresses:
        try:
            tensors.append(_C._npu_tensor_over_memory(address, list(shape), dtype, -1))
        except (ValueError, OverflowError) as e:
            raise ValueError(f"create_npu_tensors: address {address:#x}: {e}") from None
    return tensors
