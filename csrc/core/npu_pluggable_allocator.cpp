#include "csrc/core/npu_pluggable_allocator.h"

#include <atomic>
#include <utility>

#include <c10/util/Exception.h>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_stream.h"
#include <vnpu/device_allocator.h>
#include <vnpu/runtime.h>
#include <vnpu/stream.h>

namespace torch_npu {
namespace {

std::mutex g_current_mutex;
std::shared_ptr<PluggableAllocator> g_current;  // guarded by g_current_mutex; never reset once set
std::atomic<PluggableAllocator*> g_current_raw{nullptr};

// The aclrtStream of a torch stream: its runtime stream's address (what
// NPUStream::stream() and torch.npu.Stream.npu_stream hand out).
void* acl_handle(const c10::Stream& stream) { return &runtime_stream(stream); }

template <typename Fn>
Fn copy_under(std::mutex& mutex, const Fn& fn) {
  std::lock_guard<std::mutex> lock(mutex);
  return fn;
}

bool builtin_allocator_used() {
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    if (vnpu::Runtime::instance().device(d).allocator().ordinary_if_created() != nullptr) return true;
  }
  return false;
}

}  // namespace

void PluggableAllocator::set_init_fn(std::function<void(int)> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  init_fn_ = std::move(fn);
}
void PluggableAllocator::set_reset_fn(std::function<void(bool)> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  reset_fn_ = std::move(fn);
}
void PluggableAllocator::set_memory_fraction_fn(std::function<void(double, int)> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_fraction_fn_ = std::move(fn);
}
void PluggableAllocator::set_record_stream_fn(std::function<void(void*, c10::Stream)> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  record_stream_fn_ = std::move(fn);
}
void PluggableAllocator::set_erase_stream_fn(std::function<void(void*, c10::Stream)> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  erase_stream_fn_ = std::move(fn);
}
void PluggableAllocator::set_get_device_stats_fn(
    std::function<c10::CachingDeviceAllocator::DeviceStats(c10::DeviceIndex)> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  get_device_stats_fn_ = std::move(fn);
}
void PluggableAllocator::set_reset_peak_status_fn(std::function<void(c10::DeviceIndex)> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  reset_peak_status_fn_ = std::move(fn);
}

void* PluggableAllocator::malloc(size_t bytes, c10::DeviceIndex device, const c10::Stream& stream) {
  run_deferred_frees();
  void* handle = acl_handle(stream);
  // The user's function runs without our lock: it may call back into the
  // ACL runtime, or allocate from another thread meanwhile.
  void* ptr = alloc_(static_cast<ssize_t>(bytes), device, handle);
  TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr, "NPU out of memory. The pluggable allocator's alloc function "
                   "returned NULL for ", bytes, " bytes on npu:", static_cast<int>(device), ".");
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_[ptr] = Allocation{bytes, device, handle};
  return ptr;
}

bool PluggableAllocator::free(void* ptr) {
  Allocation allocation{};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocations_.find(ptr);
    if (it == allocations_.end()) return false;
    allocation = it->second;
    allocations_.erase(it);
    if (vnpu::Stream::running_on_this_thread() != nullptr) {
      deferred_frees_.emplace_back(ptr, allocation);
      return true;
    }
  }
  free_(ptr, static_cast<ssize_t>(allocation.size), allocation.device, allocation.stream);
  run_deferred_frees();
  return true;
}

bool PluggableAllocator::owns(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocations_.count(ptr) > 0;
}

void PluggableAllocator::run_deferred_frees() {
  if (vnpu::Stream::running_on_this_thread() != nullptr) return;
  std::vector<std::pair<void*, Allocation>> frees;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (deferred_frees_.empty()) return;
    frees.swap(deferred_frees_);
  }
  for (const auto& [ptr, a] : frees) free_(ptr, static_cast<ssize_t>(a.size), a.device, a.stream);
}

void PluggableAllocator::init(int device_count) {
  auto fn = copy_under(mutex_, init_fn_);
  if (fn) fn(device_count);
  std::lock_guard<std::mutex> lock(mutex_);
  initialized_ = true;
}

bool PluggableAllocator::initialized() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return initialized_;
}

bool PluggableAllocator::empty_cache() {
  run_deferred_frees();
  auto fn = copy_under(mutex_, reset_fn_);
  if (fn) fn(true);
  return static_cast<bool>(fn);
}

bool PluggableAllocator::set_memory_fraction(double fraction, c10::DeviceIndex device) {
  auto fn = copy_under(mutex_, memory_fraction_fn_);
  if (fn) fn(fraction, device);
  return static_cast<bool>(fn);
}

bool PluggableAllocator::record_stream(void* ptr, const c10::Stream& stream) {
  auto fn = copy_under(mutex_, record_stream_fn_);
  if (fn) fn(ptr, stream);
  return static_cast<bool>(fn);
}

bool PluggableAllocator::erase_stream(void* ptr, const c10::Stream& stream) {
  auto fn = copy_under(mutex_, erase_stream_fn_);
  if (fn) fn(ptr, stream);
  return static_cast<bool>(fn);
}

std::optional<c10::CachingDeviceAllocator::DeviceStats> PluggableAllocator::device_stats(c10::DeviceIndex device) {
  auto fn = copy_under(mutex_, get_device_stats_fn_);
  if (!fn) return std::nullopt;
  return fn(device);
}

bool PluggableAllocator::reset_peak_stats(c10::DeviceIndex device) {
  auto fn = copy_under(mutex_, reset_peak_status_fn_);
  if (fn) fn(device);
  return static_cast<bool>(fn);
}

PluggableAllocator* current_pluggable_allocator() { return g_current_raw.load(std::memory_order_acquire); }

std::shared_ptr<PluggableAllocator> current_pluggable_allocator_shared() {
  std::lock_guard<std::mutex> lock(g_current_mutex);
  return g_current;
}

void change_current_allocator(std::shared_ptr<PluggableAllocator> allocator) {
  TORCH_CHECK(allocator != nullptr, "change_current_allocator: expected an allocator, got None");
  std::lock_guard<std::mutex> lock(g_current_mutex);
  const bool initialized = g_current != nullptr ? g_current->initialized() : builtin_allocator_used();
  TORCH_CHECK(!initialized, "Can't swap an already initialized allocator");
  allocator->init(device_count());
  g_current = allocator;  // kept for the process: its memory may outlive a later swap attempt
  g_current_raw.store(allocator.get(), std::memory_order_release);
}

const char* allocator_backend() { return current_pluggable_allocator() != nullptr ? "pluggable" : "native"; }

}  // namespace torch_npu
