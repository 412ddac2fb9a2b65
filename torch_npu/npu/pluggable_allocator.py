"""torch.npu.NPUPluggableAllocator / change_current_allocator.

Real torch_npu can swap its caching allocator for one loaded from a shared
library (alloc / free functions taking a size, device and aclrtStream). The
virtual NPU's device memory comes from its C++ caching allocator
(csrc/core), which no Python API replaces; a library written against
aclrtStream could not run here either. Both raise a RuntimeError that says
so; MemPool(allocator=None) and use_mem_pool work (memory.py).
"""

_WHY = ("vNPU's device memory comes from its built-in C++ caching allocator (csrc/core), which cannot be "
        "replaced at run time, and a pluggable allocator library is written against the Ascend runtime "
        "(aclrtStream), which the virtual NPU does not have. Tune the built-in allocator with "
        "PYTORCH_NPU_ALLOC_CONF instead.")


class NPUPluggableAllocator:
    """Not supported on vNPU (see the module docstring)."""

    def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
        raise RuntimeError("torch.npu.NPUPluggableAllocator is not supported on vNPU: " + _WHY)


def change_current_allocator(allocator):
    raise RuntimeError("torch.npu.change_current_allocator is not supported on vNPU: " + _WHY)
