#include "csrc/core/npu_caching_allocator.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "runtime/include/vnpu/event.h"

namespace torch_npu {
namespace {

constexpr size_t kRoundBytes = 512;               // every block is a multiple of this
constexpr size_t kLargeBytes = 1024 * 1024;       // >= 1 MiB: large pool
// A cached large block may be reused for a smaller request if the waste is
// below this; otherwise a fresh reservation is made.
constexpr size_t kMaxReuseWasteBytes = 2 * 1024 * 1024;

size_t round_size(size_t bytes) {
  return bytes < kRoundBytes ? kRoundBytes : (bytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
}

struct Block {
  void* ptr = nullptr;
  size_t size = 0;           // reserved (rounded) size
  size_t requested = 0;      // what the caller asked for
  c10::DeviceIndex device = 0;
  int stream_index = 0;      // the stream it was allocated on
  std::vector<int> used_on;  // other streams recorded with record_stream
};

struct PendingFree {
  Block* block;
  std::vector<std::unique_ptr<vnpu::Event>> events;
};

class DeviceCache {
 public:
  explicit DeviceCache(c10::DeviceIndex device) : device_(device) {}

  Block* allocate(size_t requested, int stream_index) {
    const size_t size = round_size(requested);
    std::unique_lock<std::mutex> lock(mutex_);
    process_pending_frees();
    Block* block = take_cached(size, stream_index);
    if (block == nullptr) block = reserve(size);
    if (block == nullptr) {
      // Free the cache and retry once, as torch does before reporting OOM.
      // Cached blocks may still be read by queued work: synchronise first.
      stats_.num_alloc_retries += 1;
      lock.unlock();
      try {
        vnpu::Runtime::instance().device(device_).synchronize();
      } catch (const vnpu::Error&) {
        // A sticky kernel error is reported at the next sync point, not here.
      }
      lock.lock();
      process_pending_frees();
      release_cached_locked();
      block = reserve(size);
    }
    if (block == nullptr) {
      stats_.num_ooms += 1;
      const std::string message = oom_message(requested);
      lock.unlock();
      NPU_CHECK_WITH(OutOfMemoryError, ErrCode::kMemory, false, message);
    }
    block->requested = requested;
    block->stream_index = stream_index;
    stats_.allocated_bytes += block->size;
    stats_.active_bytes += block->size;
    stats_.requested_bytes += requested;
    stats_.allocation_count += 1;
    update_peaks();
    return block;
  }

  void free(Block* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.allocated_bytes -= block->size;
    stats_.active_bytes -= block->size;
    stats_.requested_bytes -= block->requested;
    stats_.allocation_count -= 1;
    if (!block->used_on.empty()) {
      PendingFree pending{block, {}};
      for (int stream_index : block->used_on) {
        auto event = std::make_unique<vnpu::Event>(false);
        event->record(stream_for(stream_index));
        pending.events.push_back(std::move(event));
      }
      block->used_on.clear();
      pending_.push_back(std::move(pending));
      return;
    }
    cache_or_release(block);
  }

  void record_stream(Block* block, int stream_index) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stream_index == block->stream_index) return;
    if (std::find(block->used_on.begin(), block->used_on.end(), stream_index) == block->used_on.end()) {
      block->used_on.push_back(stream_index);
    }
  }

  // Caller must have synchronised the device: cached blocks may still be
  // read by queued work until then.
  void release_cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    process_pending_frees();
    release_cached_locked();
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peaks() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.allocated_bytes_peak = stats_.allocated_bytes;
    stats_.reserved_bytes_peak = stats_.reserved_bytes;
    stats_.active_bytes_peak = stats_.active_bytes;
    stats_.requested_bytes_peak = stats_.requested_bytes;
  }

  void set_fraction(double fraction) {
    std::lock_guard<std::mutex> lock(mutex_);
    fraction_ = fraction;
  }
  double fraction() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fraction_;
  }

 private:
  vnpu::Stream& stream_for(int stream_index) {
    return runtime_stream(c10::Stream(c10::Stream::UNSAFE, npu_device(device_), stream_index));
  }

  vnpu::DeviceMemory& memory() { return vnpu::Runtime::instance().device(device_).memory(); }

  Block* take_cached(size_t size, int stream_index) {
    auto& pool = cache_[stream_index];
    auto it = pool.lower_bound(size);
    if (it == pool.end()) return nullptr;
    const size_t waste = it->first - size;
    if (size < kLargeBytes ? waste != 0 : waste > kMaxReuseWasteBytes) return nullptr;
    Block* block = it->second;
    pool.erase(it);
    return block;
  }

  uint64_t allowed_bytes() { return static_cast<uint64_t>(fraction_ * memory().capacity()); }

  // A new device reservation of `size` bytes, or nullptr when the device
  // (or the per-process fraction) has no room.
  Block* reserve(size_t size) {
    void* ptr = try_reserve(size);
    if (ptr == nullptr) return nullptr;
    auto* block = new Block();
    block->ptr = ptr;
    block->size = size;
    block->device = device_;
    stats_.reserved_bytes += size;
    stats_.segment_count += 1;
    stats_.num_device_alloc += 1;
    return block;
  }

  void* try_reserve(size_t size) {
    if (static_cast<uint64_t>(stats_.reserved_bytes) + size > allowed_bytes()) return nullptr;
    try {
      return memory().allocate(size);
    } catch (const vnpu::Error& e) {
      if (e.code() == vnpu::ErrorCode::kOutOfMemory) return nullptr;
      throw_runtime_error(e);
    }
  }

  std::string oom_message(size_t requested) {
    const uint64_t capacity = memory().capacity();
    std::string allowed;
    if (fraction_ < 1.0) allowed = format_size(allowed_bytes()) + " allowed; ";
    return "NPU out of memory. Tried to allocate " + format_size(requested) + " (NPU " +
           std::to_string(device_) + "; " + format_size(capacity) + " total capacity; " +
           format_size(stats_.allocated_bytes) + " already allocated; " +
           format_size(stats_.active_bytes) + " current active; " + format_size(memory().free_bytes()) +
           " free; " + allowed + format_size(stats_.reserved_bytes) + " reserved in total by PyTorch)." +
           "If reserved memory is >> allocated memory try setting max_split_size_mb to avoid "
           "fragmentation.";
  }

  void cache_or_release(Block* block) {
    if (vnpu::environment().no_memory_caching) {
      // Queued work on the block's stream may still touch it.
      vnpu::Stream& stream = stream_for(block->stream_index);
      stream.wait_completed(stream.last_enqueued());
      release_block(block);
      return;
    }
    cache_[block->stream_index].emplace(block->size, block);
  }

  void release_block(Block* block) {
    memory().release(block->ptr);
    stats_.reserved_bytes -= block->size;
    stats_.segment_count -= 1;
    stats_.num_device_free += 1;
    delete block;
  }

  void release_cached_locked() {
    for (auto& [stream_index, pool] : cache_) {
      for (auto& [size, block] : pool) release_block(block);
      pool.clear();
    }
  }

  void process_pending_frees() {
    auto done = [](const PendingFree& p) {
      return std::all_of(p.events.begin(), p.events.end(), [](const auto& e) { return e->query(); });
    };
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (done(*it)) {
        cache_or_release(it->block);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void update_peaks() {
    stats_.allocated_bytes_peak = std::max(stats_.allocated_bytes_peak, stats_.allocated_bytes);
    stats_.reserved_bytes_peak = std::max(stats_.reserved_bytes_peak, stats_.reserved_bytes);
    stats_.active_bytes_peak = std::max(stats_.active_bytes_peak, stats_.active_bytes);
    stats_.requested_bytes_peak = std::max(stats_.requested_bytes_peak, stats_.requested_bytes);
  }

  const c10::DeviceIndex device_;
  std::mutex mutex_;
  std::unordered_map<int, std::multimap<size_t, Block*>> cache_;  // stream -> size -> block
  std::vector<PendingFree> pending_;
  MemoryStats stats_;
  double fraction_ = 1.0;
};

DeviceCache& cache_for(c10::DeviceIndex device) {
  static std::array<std::unique_ptr<DeviceCache>, kMaxDevices> caches;
  static std::once_flag once;
  std::call_once(once, [] {
    for (int d = 0; d < kMaxDevices; ++d) caches[d] = std::make_unique<DeviceCache>(d);
  });
  return *caches[device];
}

void delete_block(void* context) {
  auto* block = static_cast<Block*>(context);
  cache_for(block->device).free(block);
}

class NpuCachingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    const c10::DeviceIndex device = current_device();
    check_device_index(device);
    if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &delete_block, npu_device(device));
    const c10::Stream stream = current_stream(device);
    Block* block = cache_for(device).allocate(bytes, static_cast<int>(stream.id()));
    return c10::DataPtr(block->ptr, block, &delete_block, npu_device(device));
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    // Both live in host RAM; callers (clone of storages) expect a plain copy
    // once queued work has finished.
    synchronize_device(-1);
    std::memcpy(dest, src, count);
  }
};

NpuCachingAllocator g_allocator;

}  // namespace

c10::Allocator* npu_caching_allocator() { return &g_allocator; }

MemoryStats memory_stats(c10::DeviceIndex device) {
  check_device_index(device);
  return cache_for(device).stats();
}

void reset_peak_memory_stats(c10::DeviceIndex device) {
  check_device_index(device);
  cache_for(device).reset_peaks();
}

void empty_cache() {
  if (!is_initialized()) return;
  synchronize_device(-1);
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) cache_for(d).release_cached();
}

void set_memory_fraction(double fraction, c10::DeviceIndex device) {
  check_device_index(device);
  NPU_CHECK_WITH(ValueError, ErrCode::kValue, fraction >= 0.0 && fraction <= 1.0,
                 "Invalid fraction value: ", fraction, ". Allowed range: 0~1");
  cache_for(device).set_fraction(fraction);
}

double get_memory_fraction(c10::DeviceIndex device) {
  check_device_index(device);
  return cache_for(device).fraction();
}

bool is_npu_block(const c10::DataPtr& data_ptr) { return data_ptr.get_deleter() == &delete_block; }

void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream) {
  if (data_ptr.get() == nullptr || data_ptr.get_deleter() != &delete_block) return;
  auto* block = static_cast<Block*>(data_ptr.get_context());
  if (block == nullptr) return;
  cache_for(block->device).record_stream(block, static_cast<int>(stream.id()));
}

namespace {
std::mutex g_raw_mutex;
std::unordered_map<void*, Block*> g_raw_blocks;
}  // namespace

void* raw_alloc(size_t bytes, const c10::Stream& stream) {
  if (bytes == 0) return nullptr;
  Block* block = cache_for(stream.device_index()).allocate(bytes, static_cast<int>(stream.id()));
  std::lock_guard<std::mutex> lock(g_raw_mutex);
  g_raw_blocks[block->ptr] = block;
  return block->ptr;
}

void raw_delete(void* ptr) {
  if (ptr == nullptr) return;
  Block* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_raw_mutex);
    auto it = g_raw_blocks.find(ptr);
    NPU_CHECK_WITH(ValueError, ErrCode::kPtr, it != g_raw_blocks.end(),
                   "caching_allocator_delete: pointer was not allocated by caching_allocator_alloc");
    block = it->second;
    g_raw_blocks.erase(it);
  }
  cache_for(block->device).free(block);
}

std::string format_size(uint64_t bytes) {
  char buffer[64];
  if (bytes < 1024) {
    std::snprintf(buffer, sizeof(buffer), "%llu bytes", static_cast<unsigned long long>(bytes));
  } else if (bytes < 1024ull * 1024) {
    std::snprintf(buffer, sizeof(buffer), "%.2f KiB", bytes / 1024.0);
  } else if (bytes < 1024ull * 1024 * 1024) {
    std::snprintf(buffer, sizeof(buffer), "%.2f MiB", bytes / 1048576.0);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.2f GiB", bytes / 1073741824.0);
  }
  return buffer;
}

}  // namespace torch_npu
