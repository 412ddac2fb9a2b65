#include "csrc/core/host_allocator.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <vnpu/alloc_config.h>
#include <vnpu/runtime.h>
#include <vnpu/stream.h>

#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"

namespace torch_npu {
namespace {

constexpr size_t kHostAlignmentBytes = 512;
constexpr size_t kReservePageBytes = 4096;  // torch's PinnedReserveSegment step

// The event torch's allocator records when a block used by a stream is freed:
// the stream's last enqueued task then. The block is free for reuse once the
// stream has completed it; no runtime event object is needed for that.
struct StreamPosition {
  vnpu::Stream* stream;
  uint64_t seq;
};

using Block = at::HostBlock<c10::Stream>;

class NpuHostAllocatorImpl final : public at::CachingHostAllocatorImpl<c10::Stream, StreamPosition> {
 public:
  // Start of the block (cached or in use) that contains `ptr`, or nullptr.
  // torch's allocator maps only block starts; tensors and copies see
  // interior pointers (views, storage offsets).
  void* block_start(const void* ptr) const {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(ranges_mutex_);
    auto it = ranges_.upper_bound(p);
    if (it == ranges_.begin()) return nullptr;
    --it;
    return p < it->first + it->second ? reinterpret_cast<void*>(it->first) : nullptr;
  }

 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    // pinned_reserve_segment_size_mb: carved out of the reserve while it
    // lasts (torch's PinnedReserveSegment rounds to 4 KiB), as torch_npu's.
    at::PinnedReserveSegment& reserve = reserve_segment();
    if (reserve.initialized()) {
      if (void* carved = reserve.allocate(size)) {
        add_range(carved, (size + kReservePageBytes - 1) / kReservePageBytes * kReservePageBytes);
        *ptr = carved;
        return;
      }
    }
    const auto start = std::chrono::steady_clock::now();
    *ptr = allocate_from_system(size);
    record_time(stats_.host_alloc_time, start);
  }

  void free_block(Block* block) override {
    {
      std::lock_guard<std::mutex> lock(ranges_mutex_);
      ranges_.erase(reinterpret_cast<uintptr_t>(block->ptr_));
    }
    // The reserve is never given back: a block carved from it is dropped
    // with the cache, and its bytes stay reserved (as in torch's allocator).
    if (reserve_segment().owns(block->ptr_)) return;
    const auto start = std::chrono::steady_clock::now();
    std::free(block->ptr_);
    record_time(stats_.host_free_time, start);
  }

  void* allocate_from_system(size_t size) {
    const size_t rounded = (size + kHostAlignmentBytes - 1) / kHostAlignmentBytes * kHostAlignmentBytes;
    void* memory = nullptr;
    NPU_CHECK_WITH(OutOfMemoryError, ErrCode::kMemory, posix_memalign(&memory, kHostAlignmentBytes, rounded) == 0,
                   "Failed to allocate ", size, " bytes of pinned host memory");
    add_range(memory, rounded);
    return memory;
  }

  void add_range(void* start, size_t bytes) {
    std::lock_guard<std::mutex> lock(ranges_mutex_);
    ranges_[reinterpret_cast<uintptr_t>(start)] = bytes;
  }

  // Made at the first pinned allocation from the options then in force; an
  // invalid environment fails that allocation and the next one tries again.
  at::PinnedReserveSegment& reserve_segment() {
    static at::PinnedReserveSegment* reserve = [this] {
      const size_t bytes = config().pinned_reserve_segment_bytes;
      if (bytes == 0) return new at::PinnedReserveSegment();
      void* memory = nullptr;
      NPU_CHECK_WITH(OutOfMemoryError, ErrCode::kMemory, posix_memalign(&memory, kReservePageBytes, bytes) == 0,
                     "Failed to reserve ", bytes, " bytes of pinned host memory (pinned_reserve_segment_size_mb)");
      return new at::PinnedReserveSegment(memory, bytes);
    }();
    return *reserve;
  }

  void record_stream(std::optional<std::vector<StreamPosition>>& events, c10::Stream stream) override {
    vnpu::Stream& runtime = runtime_stream(stream);
    events->push_back(StreamPosition{&runtime, runtime.last_enqueued()});
  }

  bool query_event(StreamPosition& position) override {
    return position.stream->last_completed() >= position.seq;
  }

  c10::Stream get_current_stream() const override { return current_stream(); }

  bool stream_is_capturing(c10::Stream stream) const override { return runtime_stream(stream).capturing(); }

  // pinned_use_background_threads:True: torch's helper thread polls the
  // freed blocks' streams every 100 us and collects them as they complete
  // (it keeps a core busy; by default they are collected on the next
  // allocation and in host_empty_cache). Read when torch's allocator asks,
  // at each allocation; the thread, once started, runs for the process.
  bool pinned_use_background_threads() override { return config().pinned_use_background_threads; }

  // PYTORCH_NPU_ALLOC_CONF's (and _set_allocator_settings') pinned_max_*,
  // not torch's PYTORCH_ALLOC_CONF: real torch_npu reads them there. A bad
  // environment value fails the allocation that reads it, as the device
  // allocator's first allocation does.
  size_t pinned_max_round_threshold() const override { return config().pinned_max_round_threshold_bytes; }
  size_t pinned_max_cached_size() const override { return config().pinned_max_cached_size_bytes; }

  static vnpu::AllocConfig config() {
    return with_torch_errors([] { return vnpu::Runtime::instance().alloc_settings().get(); });
  }

  void record_time(c10::CachingAllocator::DurationStat& stat, std::chrono::steady_clock::time_point start) {
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard<std::mutex> lock(stats_.timing_mutex_);
    stat.increase(micros);
  }

  mutable std::mutex ranges_mutex_;
  std::map<uintptr_t, size_t> ranges_;  // start -> bytes of every block, guarded by ranges_mutex_
};

void free_pinned(void* ctx);

struct NpuHostAllocator final : public at::CachingHostAllocatorInterface<NpuHostAllocatorImpl, free_pinned> {
  // Copies between pinned tensors (torch's copy_ of two cpu tensors asks).
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

// Leaked on purpose, as the runtime is: pinned tensors that Python frees
// during interpreter shutdown must find it alive.
NpuHostAllocator& g_pinned = *new NpuHostAllocator();

void free_pinned(void* ctx) { g_pinned.free(ctx); }

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_pinned)

}  // namespace

c10::Allocator* pinned_host_allocator() { return &g_pinned; }

at::HostAllocator* pinned_host_caching_allocator() { return &g_pinned; }

bool is_pinned_host_pointer(const void* ptr) { return g_pinned.impl_->block_start(ptr) != nullptr; }

void record_pinned_use(const void* ptr, const c10::Stream& stream) {
  void* start = g_pinned.impl_->block_start(ptr);
  if (start != nullptr) g_pinned.record_event(start, nullptr, stream);
}

}  // namespace torch_npu
