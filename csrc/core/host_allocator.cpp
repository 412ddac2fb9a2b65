#include "csrc/core/host_allocator.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "csrc/core/npu_error.h"

namespace torch_npu {
namespace {

constexpr size_t kHostAlignmentBytes = 512;

std::mutex g_mutex;
std::map<uintptr_t, size_t> g_blocks;  // start -> size

void free_pinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_blocks.erase(reinterpret_cast<uintptr_t>(ptr));
  }
  std::free(ptr);
}

class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &free_pinned, c10::Device(c10::kCPU));
    void* ptr = nullptr;
    const size_t rounded = (bytes + kHostAlignmentBytes - 1) / kHostAlignmentBytes * kHostAlignmentBytes;
    NPU_CHECK_WITH(OutOfMemoryError, ErrCode::kMemory,
                   posix_memalign(&ptr, kHostAlignmentBytes, rounded) == 0,
                   "Failed to allocate ", bytes, " bytes of pinned host memory");
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_blocks[reinterpret_cast<uintptr_t>(ptr)] = rounded;
    }
    return c10::DataPtr(ptr, ptr, &free_pinned, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

PinnedHostAllocator g_pinned;

}  // namespace

c10::Allocator* pinned_host_allocator() { return &g_pinned; }

bool is_pinned_host_pointer(const void* ptr) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_blocks.upper_bound(p);
  if (it == g_blocks.begin()) return false;
  --it;
  return p < it->first + it->second;
}

}  // namespace torch_npu
