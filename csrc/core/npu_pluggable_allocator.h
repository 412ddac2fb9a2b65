// torch.npu.memory.NPUPluggableAllocator: npu tensor memory from functions a
// user loaded from a shared library (torch_npu's NPUPluggableAllocator, as
// torch.cuda.memory.CUDAPluggableAllocator):
//   void* alloc(ssize_t size, int device, aclrtStream stream)
//   void  free(void* ptr, ssize_t size, int device, aclrtStream stream)
// plus optional hooks (init, reset, memory fraction, record/erase stream,
// device statistics, peak reset). The user's functions get device memory
// through vNPU's ACL runtime (aclrtMalloc / aclrtFree).
//
// Once change_current_allocator() installed one, every npu tensor's memory
// (and torch.npu.caching_allocator_alloc's) comes from it, except what NPU
// graph captures and use_mem_pool route to vNPU's private pools, and the
// scratch memory of kernels (workspace, CPU kernels' temporaries).
//
// A free on a stream worker (a task released the last reference) is
// deferred to the next allocation or free on a host thread: the user's free
// usually calls aclrtFree, which waits for the device, and a stream task
// must never wait for its own stream.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>

namespace torch_npu {

class PluggableAllocator {
 public:
  using AllocFn = void* (*)(ssize_t size, int device, void* stream);
  using FreeFn = void (*)(void* ptr, ssize_t size, int device, void* stream);

  PluggableAllocator(AllocFn alloc, FreeFn free) : alloc_(alloc), free_(free) {}
  PluggableAllocator(const PluggableAllocator&) = delete;
  PluggableAllocator& operator=(const PluggableAllocator&) = delete;

  // The optional hooks; settable at any time (also once current).
  void set_init_fn(std::function<void(int)> fn);
  void set_reset_fn(std::function<void(bool)> fn);
  void set_memory_fraction_fn(std::function<void(double, int)> fn);
  void set_record_stream_fn(std::function<void(void*, c10::Stream)> fn);
  void set_erase_stream_fn(std::function<void(void*, c10::Stream)> fn);
  void set_get_device_stats_fn(std::function<c10::CachingDeviceAllocator::DeviceStats(c10::DeviceIndex)> fn);
  void set_reset_peak_status_fn(std::function<void(c10::DeviceIndex)> fn);

  // Memory for work on `stream` (an npu stream of `device`). Throws
  // torch.OutOfMemoryError when the user's alloc returns NULL.
  void* malloc(size_t bytes, c10::DeviceIndex device, const c10::Stream& stream);
  // False when `ptr` was not allocated here.
  bool free(void* ptr);
  bool owns(const void* ptr) const;

  void init(int device_count);
  bool initialized() const;
  // Each returns false when its hook is not set (the caller says so).
  bool empty_cache();
  bool set_memory_fraction(double fraction, c10::DeviceIndex device);
  bool record_stream(void* ptr, const c10::Stream& stream);
  bool erase_stream(void* ptr, const c10::Stream& stream);
  std::optional<c10::CachingDeviceAllocator::DeviceStats> device_stats(c10::DeviceIndex device);
  bool reset_peak_stats(c10::DeviceIndex device);

  // Frees deferred from stream workers; call on a host thread.
  void run_deferred_frees();

 private:
  struct Allocation {
    size_t size;
    int device;
    void* stream;
  };
  const AllocFn alloc_;
  const FreeFn free_;

  mutable std::mutex mutex_;  // guards what follows
  std::function<void(int)> init_fn_;
  std::function<void(bool)> reset_fn_;
  std::function<void(double, int)> memory_fraction_fn_;
  std::function<void(void*, c10::Stream)> record_stream_fn_;
  std::function<void(void*, c10::Stream)> erase_stream_fn_;
  std::function<c10::CachingDeviceAllocator::DeviceStats(c10::DeviceIndex)> get_device_stats_fn_;
  std::function<void(c10::DeviceIndex)> reset_peak_status_fn_;
  std::unordered_map<const void*, Allocation> allocations_;
  std::vector<std::pair<void*, Allocation>> deferred_frees_;
  bool initialized_ = false;
};

// The installed allocator, or nullptr while vNPU's caching allocator serves
// npu memory. One atomic load.
PluggableAllocator* current_pluggable_allocator();
std::shared_ptr<PluggableAllocator> current_pluggable_allocator_shared();

// torch.npu.memory.change_current_allocator. Raises "Can't swap an already
// initialized allocator" once npu memory was allocated (by either).
void change_current_allocator(std::shared_ptr<PluggableAllocator> allocator);

// "native" or "pluggable" (torch.npu.get_allocator_backend).
const char* allocator_backend();

}  // namespace torch_npu
