"""torch.npu.memory.NPUPluggableAllocator / change_current_allocator.

As in torch_npu (and torch.cuda.memory.CUDAPluggableAllocator): npu tensor
memory from two C functions of a shared library,

    void* alloc(ssize_t size, int device, aclrtStream stream);
    void  free(void* ptr, ssize_t size, int device, aclrtStream stream);

which get device memory from the ACL runtime (aclrtMalloc / aclrtFree, vNPU's
own; build the library with torch_npu.utils.cpp_extension). Swap it in with
change_current_allocator before the first npu allocation. The C++ side is
csrc/core/npu_pluggable_allocator.h, which also says what stays on vNPU's
allocator (graph capture pools, kernel scratch memory).
"""
import ctypes

from torch_npu import _C


class _NPUAllocator:
    """Wraps the C++ allocator object (torch_npu's _NPUAllocator)."""

    def __init__(self, allocator):
        self._allocator = allocator

    def allocator(self):
        return self._allocator


class NPUPluggableAllocator(_NPUAllocator):
    """An allocator loaded from ``path_to_so_file``'s ``alloc_fn_name`` and
    ``free_fn_name`` functions."""

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str):
        library = ctypes.CDLL(path_to_so_file)
        alloc_fn = ctypes.cast(getattr(library, alloc_fn_name), ctypes.c_void_p).value
        free_fn = ctypes.cast(getattr(library, free_fn_name), ctypes.c_void_p).value
        if alloc_fn is None or free_fn is None:
            raise RuntimeError(f"NPUPluggableAllocator: {path_to_so_file} has no {alloc_fn_name} or {free_fn_name}")
        self._library = library  # the functions live as long as the allocator
        super().__init__(_C._npu_customAllocator(alloc_fn, free_fn))


def change_current_allocator(allocator: _NPUAllocator) -> None:
    """Makes ``allocator`` serve npu memory. Raises RuntimeError ("Can't swap
    an already initialized allocator") once npu memory was allocated."""
    if not isinstance(allocator, _NPUAllocator):
        raise TypeError(f"change_current_allocator expects an NPUPluggableAllocator, got {type(allocator).__name__}")
    _C._npu_changeCurrentAllocator(allocator.allocator())


def _get_current_allocator():
    """The current allocator: an _NPUAllocator around the pluggable one, or
    None while vNPU's caching allocator serves npu memory."""
    current = _C._npu_getAllocator()
    return None if current is None else _NPUAllocator(current)
