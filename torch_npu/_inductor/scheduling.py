"""Kernel generation for npu: Inductor's C++ (CPU) scheduling, unchanged.

The kernels read and write device memory directly (it is host memory); the
wrapper (wrapper.py) makes them run in stream order.
"""

from torch._inductor.codegen.cpp import CppScheduling


class NpuScheduling(CppScheduling):
    pass
