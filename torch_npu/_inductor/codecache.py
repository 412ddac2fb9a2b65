"""Inductor's C++ kernel bindings, queued on npu streams.

``CppPythonBindingsCodeCache`` wraps each generated C++ kernel in a Python
binding that parses the arguments (tensors to data pointers, sizes) and calls
the kernel. Ours parses them the same way, packs them in a tuple, and hands
the call to torch_npu's launcher with the kernel's pointer arguments, which
queues it on the current stream of the device holding its buffers, or runs it
at once when it also touches host memory (the cpu part of a graph that mixes
devices: csrc/graph/host_kernel_launch.h).

Note [A compiled kernel's OpenMP team]: Inductor fixes a kernel's thread
count when it generates it (``cpp.threads``; one core fewer than torch's
threads for npu graphs, retarget.py). Plain loops name it in their
``omp parallel num_threads(N)``, but templates (FlexAttention's, the GEMM
ones) size per-thread scratch by it and then run ``at::parallel_for``, whose
team is the calling thread's OpenMP setting: on the stream worker that is
every core, so thread N would write past the scratch. The queued call runs
the kernel with the worker's team set to the count the kernel was generated for.
"""

import os

from torch._inductor.codecache import CppPythonBindingsCodeCache
from torch._inductor.utils import parallel_num_threads

from torch_npu import _C

_LAUNCHER_VARIABLE = "_TORCH_NPU_HOST_KERNEL_LAUNCH"


class NpuCppPythonBindingsCodeCache(CppPythonBindingsCodeCache):
    cache = {}  # its own: the same kernel source binds differently here
    entry_function = "kernel"
    # Helpers for the call below ({{ }}: the text is str.format'ed).
    extra_parse_arg = """
        #include <array>
        #include <cstddef>
        #include <tuple>
        #include <type_traits>
        #ifdef _OPENMP
        #include <omp.h>
        #endif
        struct TorchNpuOpenMPTeam {{  // Note [A compiled kernel's OpenMP team]
        #ifdef _OPENMP
            int saved = omp_get_max_threads();
            explicit TorchNpuOpenMPTeam(int threads) {{ if (threads != saved) omp_set_num_threads(threads); }}
            ~TorchNpuOpenMPTeam() {{ if (omp_get_max_threads() != saved) omp_set_num_threads(saved); }}
        #else
            explicit TorchNpuOpenMPTeam(int) {{}}
        #endif
        }};
        using TorchNpuLaunch = const char* (*)(void (*)(void*), void (*)(void*), void*, const void* const*, size_t);
        static TorchNpuLaunch torch_npu_launcher() {{
            static const TorchNpuLaunch launch = [] {{
                const char* text = std::getenv("_TORCH_NPU_HOST_KERNEL_LAUNCH");
                return reinterpret_cast<TorchNpuLaunch>(text ? std::strtoull(text, nullptr, 10) : 0);
            }}();
            if (launch == nullptr) throw std::runtime_error("torch_npu's kernel launcher is not set");
            return launch;
        }}
        template <typename Packed> struct TorchNpuBuffers {{  // the kernel's pointer arguments
            std::array<const void*, std::tuple_size_v<Packed> + 1> at{{}};
            size_t count = 0;
            explicit TorchNpuBuffers(const Packed& packed) {{
                auto pick = [&](const auto& x) {{
                    if constexpr (std::is_pointer_v<std::decay_t<decltype(x)>>) at[count++] = static_cast<const void*>(x);
                }};
                std::apply([&](const auto&... x) {{ (pick(x), ...); }}, packed);
            }}
        }};
    """
    # The kernel's arguments, parsed as Inductor's binding parses them, are
    # moved into a heap tuple that the stream task applies, then frees.
    call_entry_function = """
        auto* packed = new auto(std::make_tuple({}));
        using Packed = std::remove_pointer_t<decltype(packed)>;
        const TorchNpuBuffers<Packed> buffers(*packed);
        const char* error = torch_npu_launcher()(
            [](void* p) {{
                TorchNpuOpenMPTeam team(TORCH_NPU_KERNEL_THREADS);
                std::apply([](auto... a) {{ kernel(a...); }}, *static_cast<Packed*>(p));
            }},
            [](void* p) {{ delete static_cast<Packed*>(p); }},
            packed, buffers.at.data(), buffers.count);
        if (error != nullptr) throw std::runtime_error(error);
        Py_RETURN_NONE;
    """

    @classmethod
    def load_pybinding_async(cls, *args, **kwargs):
        # The thread count the kernel was just generated for (parallel_num_threads
        # reads the config the compilation patched), written into its binding.
        if "TORCH_NPU_KERNEL_THREADS" not in cls.call_entry_function:  # a class made below
            return super().load_pybinding_async(*args, **kwargs)
        threads = parallel_num_threads()
        bound = _BINDINGS_BY_THREADS.get(threads)
        if bound is None:
            entry = cls.call_entry_function.replace("TORCH_NPU_KERNEL_THREADS", str(threads))
            bound = type(f"{cls.__name__}_{threads}", (cls,), {"call_entry_function": entry})
            _BINDINGS_BY_THREADS[threads] = bound
        return bound.load_pybinding_async(*args, **kwargs)

    @classmethod
    def _load_library_inner(cls, path, key):
        os.environ[_LAUNCHER_VARIABLE] = str(_C._host_kernel_launcher_address())
        return super()._load_library_inner(path, key)


_BINDINGS_BY_THREADS = {}


def npu_cpp_pybinding(argtypes, source):
    """What the generated wrapper calls in place of ``async_compile.cpp_pybinding``."""
    return NpuCppPythonBindingsCodeCache.load_pybinding(argtypes, source, device_type="cpu")

