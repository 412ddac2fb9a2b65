#include "csrc/launch/cpu_allocation_scope.h"

#include <c10/core/CPUAllocator.h>

#include "csrc/core/npu_caching_allocator.h"

namespace torch_npu {
namespace {

thread_local c10::DeviceIndex t_device_memory = -1;  // DeviceMemoryScope

c10::DeleterFnPtr g_base_raw_deleter = nullptr;

// raw_deallocate of either kind of block: the scopes' or the base's.
void raw_delete_either(void* ptr) {
  if (!free_if_npu_block(ptr)) g_base_raw_deleter(ptr);
}

// In a scope the block comes from the npu caching allocator; its DataPtr
// claims CPU so the CPU kernel accepts it (sync_native_kernel relabels
// results npu).
class ScopedCpuAllocator final : public c10::Allocator {
 public:
  explicit ScopedCpuAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t bytes) override {
    if (t_device_memory >= 0) return allocate_for_cpu_kernel(t_device_memory, bytes);
    return base_->allocate(bytes);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &raw_delete_either; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    base_->copy_data(dest, src, count);
  }

 private:
  c10::Allocator* base_;
};

ScopedCpuAllocator* g_scoped_cpu_allocator = nullptr;

}  // namespace

DeviceMemoryScope::DeviceMemoryScope(c10::DeviceIndex device) : previous_(t_device_memory) {
  t_device_memory = device;
}
DeviceMemoryScope::~DeviceMemoryScope() { t_device_memory = previous_; }

c10::Allocator* scoped_cpu_allocator() { return g_scoped_cpu_allocator; }

void install_device_memory_cpu_allocator() {
  if (g_scoped_cpu_allocator != nullptr) return;
  c10::Allocator* base = c10::GetCPUAllocator();
  g_base_raw_deleter = base->raw_deleter();
  g_scoped_cpu_allocator = new ScopedCpuAllocator(base);
  c10::SetCPUAllocator(g_scoped_cpu_allocator, /*priority=*/1);
}

}  // namespace torch_npu
