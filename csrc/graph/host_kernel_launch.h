// Launching compiled host kernels (Inductor's C++ kernels) on npu streams.
//
// Inductor generates C++ kernels for npu as for the CPU (device memory is
// host memory), each with a small Python binding that extracts its
// arguments (data pointers, sizes). On npu the binding does not call the
// kernel: it packs the arguments and hands them to launch_host_kernel(),
// which queues the call on the current stream of the device that holds the
// kernel's first buffer, in order with the eager kernels around it. So a
// compiled graph runs like eager npu code: asynchronously, on the current
// stream, its buffers from the caching allocator (torch_npu/_inductor/).
//
// The bindings are compiled without torch headers; they find the launcher
// through the address in _TORCH_NPU_HOST_KERNEL_LAUNCH (host_kernel_launcher_address).
#pragma once

#include <cstddef>
#include <cstdint>

namespace torch_npu {

// `run(args)` on the stream, then `discard(args)`; also `discard(args)`
// when the launch fails, whose message is returned (nullptr: done).
// `buffers` are the kernel's `count` pointer arguments: the first in npu
// memory picks the device (none: the current device). A kernel that also
// reads or writes host memory (the cpu tensors of a graph that mixes
// devices) runs at once on the caller, after the device's current stream
// drained: queued, it could run after the wrapper freed those tensors.
extern "C" const char* torch_npu_launch_host_kernel(void (*run)(void*), void (*discard)(void*), void* args,
                                                    const void* const* buffers, size_t count) noexcept;

// The address of torch_npu_launch_host_kernel, for the bindings.
uintptr_t host_kernel_launcher_address();

}  // namespace torch_npu
