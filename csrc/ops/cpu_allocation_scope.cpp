#include "csrc/ops/cpu_allocation_scope.h"

#include <c10/core/CPUAllocator.h>

#include "csrc/ops/npu_empty.h"

namespace torch_npu {
namespace {

thread_local c10::DeviceIndex t_device_memory = -1;  // DeviceMemoryScope

// The block comes from the npu caching allocator; its DataPtr claims CPU so
// the CPU kernel accepts it (sync_native_kernel relabels results npu).
class ScopedCpuAllocator final : public c10::Allocator {
 public:
  explicit ScopedCpuAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t bytes) override {
    if (t_device_memory >= 0) {
      c10::DataPtr ptr = device_allocator(t_device_memory)->allocate(bytes);
      ptr.unsafe_set_device(c10::Device(c10::kCPU));
      return ptr;
    }
    return base_->allocate(bytes);
  }
  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }
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
  g_scoped_cpu_allocator = new ScopedCpuAllocator(c10::GetCPUAllocator());
  c10::SetCPUAllocator(g_scoped_cpu_allocator, /*priority=*/1);
}

}  // namespace torch_npu
