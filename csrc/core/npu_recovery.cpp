#include "csrc/core/npu_recovery.h"

#include <mutex>
#include <unordered_set>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_error.h"

namespace torch_npu {

namespace detail {
std::atomic<bool> g_unsafe_data_checked{false};
}  // namespace detail

namespace {

std::mutex g_mutex;
bool g_check_on = false;                    // guarded by g_mutex
std::unordered_set<const void*> g_unsafe;   // storage starts; guarded by g_mutex
std::atomic<bool> g_any_unsafe{false};      // !g_unsafe.empty(), for frees

// Under g_mutex: publish whether launches must check.
void publish_locked() {
  g_any_unsafe.store(!g_unsafe.empty());
  detail::g_unsafe_data_checked.store(g_check_on && !g_unsafe.empty());
}

}  // namespace

void set_unsafe_data_check(bool on) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_check_on = on;
  publish_locked();
}

bool unsafe_data_check() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_check_on;
}

void mark_all_device_data_unsafe(c10::DeviceIndex device) {
  const std::vector<vnpu::SegmentInfo> segments = memory_snapshot(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const vnpu::SegmentInfo& segment : segments) {
    for (const vnpu::BlockInfo& block : segment.blocks) {
      if (block.allocated) g_unsafe.insert(reinterpret_cast<const void*>(block.address));
    }
  }
  publish_locked();
}

bool is_device_data_safe(const void* storage_data) {
  if (!g_any_unsafe.load()) return true;
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_unsafe.count(storage_data) == 0;
}

void mark_device_data_safe(const void* storage_data) {
  if (!g_any_unsafe.load()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_unsafe.erase(storage_data) != 0) publish_locked();
}

void forget_device_data(const void* block) { mark_device_data_safe(block); }

void check_npu_tensor_is_safe(const at::Tensor& tensor) {
  if (!tensor.has_storage()) return;
  NPU_CHECK_WITH(Error, ErrCode::kValue, is_device_data_safe(tensor.storage().data()),
                 "There is unsafe data in the input tensor.");
}

}  // namespace torch_npu
