// Where the CPU allocator's memory comes from on the synchronous native path.
//
// ATen's CPU kernels allocate their results through c10::GetCPUAllocator().
// vNPU installs a CPU allocator that, on a thread inside a DeviceMemoryScope
// (sync_kernel.h, on the host), hands out blocks of an npu device's caching
// allocator instead, so results are born in device memory and are relabelled
// npu without a copy.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_npu {

// Also usable inside a stream task (stage 2): ATen kernels that only have a
// functional form then compute their result, before it is copied into the
// task's outputs, in device memory the allocator counts (memory_stats), taken
// without waiting and never from blocks queued work still uses.
class DeviceMemoryScope {
 public:
  explicit DeviceMemoryScope(c10::DeviceIndex device);
  ~DeviceMemoryScope();
  DeviceMemoryScope(const DeviceMemoryScope&) = delete;
  DeviceMemoryScope& operator=(const DeviceMemoryScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// The installed CPU allocator (for CPU storages that alias device memory and
// may be resized by out= kernels).
c10::Allocator* scoped_cpu_allocator();

// Installs the CPU allocator that honours the scopes (at import).
void install_device_memory_cpu_allocator();

}  // namespace torch_npu
