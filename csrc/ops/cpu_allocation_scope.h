// Where the CPU allocator's memory comes from while npu kernels run.
//
// ATen's CPU kernels allocate their results and intermediates through
// c10::GetCPUAllocator(). vNPU installs a CPU allocator that, on a thread
// inside one of these scopes, hands out device memory instead, so memory a
// kernel uses is counted by torch.npu.memory_stats like on a real device:
//
//   DeviceMemoryScope     the synchronous native path (sync_kernel.h), on the
//                         host: blocks of the device's caching allocator (may
//                         wait for streams when memory is short); results are
//                         relabelled npu without a copy.
//   TemporaryMemoryScope  stage 2 of a launched kernel (launch.cpp): the CPU
//                         kernel's intermediates, from the device's pool of
//                         temporaries when a block is free without waiting
//                         (a stream worker must not wait), else host memory.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_npu {

class DeviceMemoryScope {
 public:
  explicit DeviceMemoryScope(c10::DeviceIndex device);
  ~DeviceMemoryScope();
  DeviceMemoryScope(const DeviceMemoryScope&) = delete;
  DeviceMemoryScope& operator=(const DeviceMemoryScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

class TemporaryMemoryScope {
 public:
  explicit TemporaryMemoryScope(c10::DeviceIndex device);
  ~TemporaryMemoryScope();
  TemporaryMemoryScope(const TemporaryMemoryScope&) = delete;
  TemporaryMemoryScope& operator=(const TemporaryMemoryScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// The installed CPU allocator (for CPU storages that alias device memory and
// may be resized by out= kernels).
c10::Allocator* scoped_cpu_allocator();

// Installs the CPU allocator that honours the scopes (at import).
void install_device_memory_cpu_allocator();

}  // namespace torch_npu
