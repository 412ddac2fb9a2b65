#include "csrc/core/host_allocator.h"

#include <ATen/core/CachingHostAllocator.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include <vnpu/stream.h>

namespace torch_npu {
namespace {

constexpr size_t kHostAlignmentBytes = 512;

struct PinnedBlock {
  size_t bytes = 0;
  // (stream, last task that may use the block): pairs recorded by copies.
  std::vector<std::pair<vnpu::Stream*, uint64_t>> uses;
  bool released = false;  // its tensor died; freed once `uses` have passed
};

std::mutex g_pinned_mutex;
std::map<uintptr_t, PinnedBlock> g_blocks;  // start -> block, guarded by g_pinned_mutex
size_t g_deferred = 0;                       // released blocks still in use

bool uses_passed(const PinnedBlock& block) {
  for (const auto& [stream, seq] : block.uses) {
    if (stream->last_completed() < seq) return false;
  }
  return true;
}

// Frees released blocks whose uses have all passed. Called with g_pinned_mutex
// held; returns the pointers to free once the lock is dropped.
std::vector<void*> collect_passed_blocks() {
  std::vector<void*> done;
  if (g_deferred == 0) return done;
  for (auto it = g_blocks.begin(); it != g_blocks.end();) {
    if (it->second.released && uses_passed(it->second)) {
      done.push_back(reinterpret_cast<void*>(it->first));
      it = g_blocks.erase(it);
      --g_deferred;
    } else {
      ++it;
    }
  }
  return done;
}

void free_all(const std::vector<void*>& pointers) {
  for (void* p : pointers) std::free(p);
}

void free_pinned(void* ptr) {
  if (ptr == nullptr) return;
  std::vector<void*> done;
  bool free_now = false;
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    auto it = g_blocks.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != g_blocks.end()) {
      if (uses_passed(it->second)) {
        g_blocks.erase(it);
        free_now = true;
      } else {
        it->second.released = true;
        ++g_deferred;
      }
    }
    done = collect_passed_blocks();
  }
  if (free_now) std::free(ptr);
  free_all(done);
}

PinnedBlock* find_block(uintptr_t p) {
  auto it = g_blocks.upper_bound(p);
  if (it == g_blocks.begin()) return nullptr;
  --it;
  return p < it->first + it->second.bytes ? &it->second : nullptr;
}

// Also torch's host allocator of the npu device (at::getHostAllocator, which
// torch.accelerator.memory.empty_host_cache and pinned-memory code reach):
// it keeps no cache (a block is freed once its tensor died and the copies
// that used it ran), so emptying the cache frees what has become free, and
// it records no statistics (torch.npu.host_memory_stats says so).
class PinnedHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &free_pinned, c10::Device(c10::kCPU));
    std::vector<void*> done;
    {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      done = collect_passed_blocks();
    }
    free_all(done);
    void* ptr = nullptr;
    const size_t rounded = (bytes + kHostAlignmentBytes - 1) / kHostAlignmentBytes * kHostAlignmentBytes;
    NPU_CHECK_WITH(OutOfMemoryError, ErrCode::kMemory,
                   posix_memalign(&ptr, kHostAlignmentBytes, rounded) == 0,
                   "Failed to allocate ", bytes, " bytes of pinned host memory");
    {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_blocks[reinterpret_cast<uintptr_t>(ptr)].bytes = rounded;
    }
    return c10::DataPtr(ptr, ptr, &free_pinned, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    if (stream.device_type() != c10::DeviceType::PrivateUse1) return false;
    record_pinned_use(ptr, runtime_stream(stream));
    return true;
  }
  void empty_cache() override {
    std::vector<void*> done;
    {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      done = collect_passed_blocks();
    }
    free_all(done);
  }
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

PinnedHostAllocator g_pinned;
REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_pinned)

}  // namespace

c10::Allocator* pinned_host_allocator() { return &g_pinned; }

bool is_pinned_host_pointer(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  const PinnedBlock* block = find_block(reinterpret_cast<uintptr_t>(ptr));
  return block != nullptr && !block->released;
}

void record_pinned_use(const void* ptr, vnpu::Stream& stream) {
  const uint64_t seq = stream.last_enqueued();
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  PinnedBlock* block = find_block(reinterpret_cast<uintptr_t>(ptr));
  if (block == nullptr) return;
  for (auto& [used_stream, used_seq] : block->uses) {
    if (used_stream == &stream) {
      used_seq = std::max(used_seq, seq);
      return;
    }
  }
  block->uses.emplace_back(&stream, seq);
}

size_t deferred_pinned_blocks() {
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  return g_deferred;
}

}  // namespace torch_npu
