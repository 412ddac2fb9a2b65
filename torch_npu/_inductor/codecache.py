"""Inductor's C++ kernel bindings, queued on npu streams.

``CppPythonBindingsCodeCache`` wraps each generated C++ kernel in a Python
binding that parses the arguments (tensors to data pointers, sizes) and calls
the kernel. Ours parses them the same way, packs them in a tuple, and hands
the call to torch_npu's launcher, which queues it on the current stream of
the device holding the kernel's first buffer (csrc/graph/host_kernel_launch.h).
"""

import os

from torch._inductor.codecache import CppPythonBindingsCodeCache

from torch_npu import _C

_LAUNCHER_VARIABLE = "_TORCH_NPU_HOST_KERNEL_LAUNCH"


class NpuCppPythonBindingsCodeCache(CppPythonBindingsCodeCache):
    cache = {}  # its own: the same kernel source binds differently here
    entry_function = "kernel"
    # Helpers for the call below ({{ }}: the text is str.format'ed).
    extra_parse_arg = """
        #include <tuple>
        #include <type_traits>
        using TorchNpuLaunch = const char* (*)(void (*)(void*), void (*)(void*), void*, const void*);
        static TorchNpuLaunch torch_npu_launcher() {{
            static const TorchNpuLaunch launch = [] {{
                const char* text = std::getenv("_TORCH_NPU_HOST_KERNEL_LAUNCH");
                return reinterpret_cast<TorchNpuLaunch>(text ? std::strtoull(text, nullptr, 10) : 0);
            }}();
            if (launch == nullptr) throw std::runtime_error("torch_npu's kernel launcher is not set");
            return launch;
        }}
        template <typename Packed> static const void* torch_npu_first_buffer(const Packed& packed) {{
            const void* found = nullptr;
            auto pick = [&](const auto& x) {{
                if constexpr (std::is_pointer_v<std::decay_t<decltype(x)>>) {{
                    if (found == nullptr) found = static_cast<const void*>(x);
                }}
            }};
            std::apply([&](const auto&... x) {{ (pick(x), ...); }}, packed);
            return found;
        }}
    """
    # The kernel's arguments, parsed as Inductor's binding parses them, are
    # moved into a heap tuple that the stream task applies, then frees.
    call_entry_function = """
        auto* packed = new auto(std::make_tuple({}));
        using Packed = std::remove_pointer_t<decltype(packed)>;
        const char* error = torch_npu_launcher()(
            [](void* p) {{ std::apply([](auto... a) {{ kernel(a...); }}, *static_cast<Packed*>(p)); }},
            [](void* p) {{ delete static_cast<Packed*>(p); }},
            packed, torch_npu_first_buffer(*packed));
        if (error != nullptr) throw std::runtime_error(error);
        Py_RETURN_NONE;
    """

    @classmethod
    def _load_library_inner(cls, path, key):
        os.environ[_LAUNCHER_VARIABLE] = str(_C._host_kernel_launcher_address())
        return super()._load_library_inner(path, key)


def npu_cpp_pybinding(argtypes, source):
    """What the generated wrapper calls in place of ``async_compile.cpp_pybinding``."""
    return NpuCppPythonBindingsCodeCache.load_pybinding(argtypes, source, device_type="cpu")

