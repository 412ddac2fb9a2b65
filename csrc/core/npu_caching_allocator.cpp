#include "csrc/core/npu_caching_allocator.h"

#include <ATen/core/Tensor.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/COW.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_mem_pool.h"
#include "csrc/core/npu_stream.h"
#include <vnpu/environment.h>
#include <vnpu/runtime.h>

namespace torch_npu {
namespace {

// The device's allocator, created at its first use and never destroyed:
// tensors freed during interpreter shutdown still return their blocks.
vnpu::AllocConfig current_settings();

// nullptr when `create` is false and the device never allocated.
vnpu::CachingAllocator* allocator_for(c10::DeviceIndex device, bool create = true) {
  static std::array<std::atomic<vnpu::CachingAllocator*>, kMaxDevices> allocators{};
  vnpu::CachingAllocator* allocator = allocators[device].load(std::memory_order_acquire);
  if (allocator != nullptr || !create) return allocator;

  static std::mutex creation;
  std::lock_guard<std::mutex> lock(creation);
  allocator = allocators[device].load(std::memory_order_relaxed);
  if (allocator == nullptr) {
    const vnpu::AllocConfig config = current_settings();
    allocator = new vnpu::CachingAllocator(runtime_device(device).memory(), config,
                                           !vnpu::environment().no_memory_caching);
    if (config.per_process_memory_fraction >= 0.0) allocator->set_memory_fraction(config.per_process_memory_fraction);
    allocators[device].store(allocator, std::memory_order_release);
  }
  return allocator;
}

template <typename F>
auto with_config_errors(F&& parse) {
  try {
    return parse();
  } catch (const vnpu::Error& e) {
    const ErrCode code = e.code() == vnpu::ErrorCode::kNotSupported ? ErrCode::kNotSupport : ErrCode::kValue;
    NPU_CHECK_WITH(Error, code, false, e.what());
  }
  __builtin_unreachable();
}

// The allocator options: PYTORCH_NPU_ALLOC_CONF's, then what
// _set_allocator_settings changed. Guarded by settings_mutex().
std::mutex& settings_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::optional<vnpu::AllocConfig>& settings() {
  static std::optional<vnpu::AllocConfig> config;
  return config;
}

// expandable_segments:True is accepted, as CUDA accepts it on platforms
// that cannot map memory: one warning, then ordinary segments.
void warn_if_expandable(const vnpu::AllocConfig& config) {
  if (!config.expandable_segments) return;
  TORCH_WARN_ONCE("expandable_segments:True is not supported by the virtual NPU (its device memory cannot be "
                  "remapped to grow a segment); the caching allocator uses ordinary segments, as with "
                  "expandable_segments:False");
}

// Errors surface here, at the first allocation (not when the environment is
// read), and again at each allocation until the variable is fixed.
vnpu::AllocConfig current_settings() {
  std::lock_guard<std::mutex> lock(settings_mutex());
  if (!settings()) {
    settings() = with_config_errors([] { return vnpu::alloc_config_from(vnpu::environment()); });
    warn_if_expandable(*settings());
  }
  return *settings();
}

vnpu::Block* allocate_block(c10::DeviceIndex device, size_t bytes, vnpu::Stream& stream) {
  vnpu::CachingAllocator* allocator = allocator_for(device);
  // kOutOfMemory becomes torch.OutOfMemoryError.
  return with_torch_errors([&] { return allocator->allocate(bytes, stream); });
}

// torch.profiler(profile_memory=True): each allocation and free of npu
// memory, with the device's totals after it. Off, it costs a thread-local
// lookup (frees on stream workers are not seen: the profiler state is the
// host thread's).
void report_to_profiler(vnpu::CachingAllocator& allocator, void* address, int64_t signed_bytes) {
  const auto device = static_cast<c10::DeviceIndex>(allocator.memory().device_index());
  const vnpu::AllocatorStats stats = allocator.stats();
  c10::reportMemoryUsageToProfiler(address, signed_bytes, stats.allocated_bytes[vnpu::kAggregateStat].current,
                                   stats.reserved_bytes[vnpu::kAggregateStat].current, npu_device(device));
}

void delete_block(void* context) {
  auto* block = static_cast<vnpu::Block*>(context);
  if (block == nullptr) return;
  vnpu::CachingAllocator& owner = vnpu::CachingAllocator::owner(block);
  if (!c10::memoryProfilingEnabled()) {
    owner.free(block);
    return;
  }
  // The block may be merged away by the free: read it first.
  void* address = vnpu::CachingAllocator::address(block);
  const auto bytes = static_cast<int64_t>(vnpu::CachingAllocator::size(block));
  owner.free(block);
  report_to_profiler(owner, address, -bytes);
}

// Blocks known by their address: caching_allocator_alloc's, and the memory
// CPU kernels get inside a DeviceMemoryScope (Allocator::raw_allocate, which
// oneDNN uses, requires a DataPtr's context to be its address).
std::mutex g_addressed_mutex;
std::unordered_map<void*, vnpu::Block*> g_addressed_blocks;

void* remember_address(vnpu::Block* block) {
  void* ptr = vnpu::CachingAllocator::address(block);
  std::lock_guard<std::mutex> lock(g_addressed_mutex);
  g_addressed_blocks[ptr] = block;
  return ptr;
}

vnpu::Block* find_addressed(void* ptr) {
  std::lock_guard<std::mutex> lock(g_addressed_mutex);
  auto it = g_addressed_blocks.find(ptr);
  return it != g_addressed_blocks.end() ? it->second : nullptr;
}

vnpu::Block* forget_address(void* ptr) {
  std::lock_guard<std::mutex> lock(g_addressed_mutex);
  auto it = g_addressed_blocks.find(ptr);
  if (it == g_addressed_blocks.end()) return nullptr;
  vnpu::Block* block = it->second;
  g_addressed_blocks.erase(it);
  return block;
}

}  // namespace

bool free_if_cpu_kernel_block(void* ptr) {
  vnpu::Block* block = forget_address(ptr);
  if (block == nullptr) return false;
  vnpu::CachingAllocator::owner(block).free(block);
  return true;
}

namespace {

void delete_addressed_block(void* ptr) { free_if_cpu_kernel_block(ptr); }

vnpu::Block* block_of(const c10::DataPtr& data_ptr) {
  if (data_ptr.get_deleter() == &delete_block) return static_cast<vnpu::Block*>(data_ptr.get_context());
  if (data_ptr.get_deleter() == &delete_addressed_block) return find_addressed(data_ptr.get_context());
  // A lazy clone's shared storage: the COW context wraps an address-keyed DataPtr.
  if (c10::impl::cow::is_cow_data_ptr(data_ptr)) return find_addressed(data_ptr.get());
  return nullptr;
}

c10::CachingAllocator::Stat to_c10(const vnpu::Stat& s) {
  c10::CachingAllocator::Stat out;
  out.current = s.current;
  out.peak = s.peak;
  out.allocated = s.allocated;
  out.freed = s.freed;
  return out;
}

c10::CachingAllocator::StatArray to_c10(const vnpu::StatArray& array) {
  c10::CachingAllocator::StatArray out;
  for (size_t i = 0; i < array.size(); ++i) out[i] = to_c10(array[i]);
  return out;
}

class NpuCachingAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    const c10::DeviceIndex device = current_device();
    check_device_index(device);
    if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &delete_block, npu_device(device));
    vnpu::Stream& stream = current_runtime_stream(device);
    vnpu::Block* block = nullptr;
    if (vnpu::CachingAllocator* pool = routed_pool(device, stream)) {
      block = with_torch_errors([&] { return pool->allocate(bytes, stream); });  // NPU graphs, MemPool
    } else {
      block = allocate_block(device, bytes, stream);
    }
    if (c10::memoryProfilingEnabled()) {
      report_to_profiler(vnpu::CachingAllocator::owner(block), vnpu::CachingAllocator::address(block),
                         static_cast<int64_t>(vnpu::CachingAllocator::size(block)));
    }
    return c10::DataPtr(vnpu::CachingAllocator::address(block), block, &delete_block, npu_device(device));
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    // Both live in host RAM; callers (clone of storages) expect a plain copy
    // once queued work has finished.
    synchronize_device(-1);
    std::memcpy(dest, src, count);
  }

  // --- c10::DeviceAllocator: what torch.accelerator.memory_* call -------
  bool initialized() override { return is_initialized(); }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override { empty_cache(); }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override { record_stream(ptr, stream); }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    const MemoryStats s = memory_stats(device);
    c10::CachingDeviceAllocator::DeviceStats out;
    out.allocation = to_c10(s.allocation);
    out.segment = to_c10(s.segment);
    out.active = to_c10(s.active);
    out.inactive_split = to_c10(s.inactive_split);
    out.allocated_bytes = to_c10(s.allocated_bytes);
    out.reserved_bytes = to_c10(s.reserved_bytes);
    out.active_bytes = to_c10(s.active_bytes);
    out.inactive_split_bytes = to_c10(s.inactive_split_bytes);
    out.requested_bytes = to_c10(s.requested_bytes);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    out.oversize_allocations = to_c10(s.oversize_allocations);
    out.oversize_segments = to_c10(s.oversize_segments);
    out.num_sync_all_streams = s.num_sync_all_streams;
    out.num_device_alloc = s.num_device_alloc;
    out.num_device_free = s.num_device_free;
    out.max_split_size = s.max_split_size;
    return out;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override { reset_accumulated_memory_stats(device); }

  void resetPeakStats(c10::DeviceIndex device) override { reset_peak_memory_stats(device); }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    vnpu::DeviceMemory& memory = runtime_device(device).memory();
    return {memory.free_bytes(), memory.capacity()};
  }
};

NpuCachingAllocator g_allocator;

// Stats of a device that never allocated: zeros, and its split limit.
MemoryStats unused_device_stats() {
  MemoryStats stats;
  stats.max_split_size = -1;
  try {
    const size_t max_split = vnpu::alloc_config_from(vnpu::environment()).max_split_size_bytes;
    if (max_split != std::numeric_limits<size_t>::max()) stats.max_split_size = static_cast<int64_t>(max_split);
  } catch (const vnpu::Error&) {
    // Reported by the first allocation, not by reading statistics.
  }
  return stats;
}

}  // namespace

c10::Allocator* npu_caching_allocator() { return &g_allocator; }

MemoryStats memory_stats(c10::DeviceIndex device) {
  check_device_index(device);
  // Reading stats must not create the allocator (nor raise its config errors).
  const vnpu::CachingAllocator* allocator = allocator_for(device, /*create=*/false);
  MemoryStats stats = allocator != nullptr ? allocator->stats() : unused_device_stats();
  add_pool_stats(device, stats);
  return stats;
}

void reset_peak_memory_stats(c10::DeviceIndex device) {
  check_device_index(device);
  if (auto* allocator = allocator_for(device, false)) allocator->reset_peak_stats();
  reset_pool_peaks(device);
}

void reset_accumulated_memory_stats(c10::DeviceIndex device) {
  check_device_index(device);
  if (auto* allocator = allocator_for(device, false)) allocator->reset_accumulated_stats();
  reset_pool_accumulated(device);
}

void empty_cache() {
  check_not_forked();
  if (!is_initialized()) return;
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    if (auto* allocator = allocator_for(d, false)) allocator->empty_cache();
  }
  empty_released_pools();
}

void set_allocator_settings(const std::string& text) {
  // The block sizes already carved depend on max_split_size: it is fixed at start-up, as in torch_npu.
  for (const std::string& key : with_config_errors([&] { return vnpu::alloc_config_keys(text); })) {
    NPU_CHECK_WITH(Error, ErrCode::kValue, key != "max_split_size_mb",
                   "torch_npu.npu.memory._set_allocator_settings() unsupported setting: ", key,
                   " (set it with PYTORCH_NPU_ALLOC_CONF before the first allocation)");
  }
  const vnpu::AllocConfig base = current_settings();
  const vnpu::AllocConfig config = with_config_errors(
      [&] { return vnpu::apply_alloc_config(base, text, "torch_npu.npu.memory._set_allocator_settings()"); });
  warn_if_expandable(config);
  {
    std::lock_guard<std::mutex> lock(settings_mutex());
    settings() = config;
  }
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    if (auto* allocator = allocator_for(d, false)) {
      allocator->set_config(config);
      if (config.per_process_memory_fraction >= 0.0) allocator->set_memory_fraction(config.per_process_memory_fraction);
    }
  }
}

void set_memory_fraction(double fraction, c10::DeviceIndex device) {
  check_device_index(device);
  NPU_CHECK_WITH(ValueError, ErrCode::kValue, fraction >= 0.0 && fraction <= 1.0,
                 "Invalid fraction value: ", fraction, ". Allowed range: 0~1");
  allocator_for(device)->set_memory_fraction(fraction);
}

double get_memory_fraction(c10::DeviceIndex device) {
  check_device_index(device);
  const vnpu::CachingAllocator* allocator = allocator_for(device, false);
  if (allocator != nullptr) return allocator->memory_fraction();
  // Not allocated yet: what it will start with (without raising config errors here).
  std::lock_guard<std::mutex> lock(settings_mutex());
  const auto& config = settings();
  return config && config->per_process_memory_fraction >= 0.0 ? config->per_process_memory_fraction : 1.0;
}

std::vector<vnpu::SegmentInfo> memory_snapshot(c10::DeviceIndex device) {
  check_device_index(device);
  const vnpu::CachingAllocator* allocator = allocator_for(device, false);
  std::vector<vnpu::SegmentInfo> segments =
      allocator != nullptr ? allocator->snapshot() : std::vector<vnpu::SegmentInfo>{};
  const auto pooled = pool_segments(device);  // memory_stats counts them too
  segments.insert(segments.end(), pooled.begin(), pooled.end());
  return segments;
}

vnpu::CachingAllocator& device_caching_allocator(c10::DeviceIndex device) {
  check_device_index(device);
  return *allocator_for(device);
}

bool is_npu_block(const c10::DataPtr& data_ptr) {
  return data_ptr.get_deleter() == &delete_block || data_ptr.get_deleter() == &delete_addressed_block ||
         (c10::impl::cow::is_cow_data_ptr(data_ptr) && find_addressed(data_ptr.get()) != nullptr);
}

void make_address_keyed(c10::StorageImpl& storage) {
  const c10::DataPtr& current = storage.data_ptr();
  if (current.get_deleter() != &delete_block || current.get_context() == nullptr) return;
  auto* block = static_cast<vnpu::Block*>(current.get_context());
  void* ptr = remember_address(block);
  c10::DataPtr old = storage.set_data_ptr(c10::DataPtr(ptr, ptr, &delete_addressed_block, current.device()));
  old.release_context();  // the block now belongs to the new DataPtr
}

void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream) {
  vnpu::Block* block = block_of(data_ptr);
  if (block == nullptr) return;
  vnpu::CachingAllocator::owner(block).record_stream(block, runtime_stream(stream));
}


c10::DataPtr allocate_for_cpu_kernel(c10::DeviceIndex device, size_t bytes) {
  check_device_index(device);
  if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &delete_addressed_block, c10::Device(c10::kCPU));
  vnpu::CachingAllocator* allocator = allocator_for(device);
  vnpu::Stream* running = vnpu::Stream::running_on_this_thread();
  vnpu::Block* block = with_torch_errors([&] {
    return running != nullptr ? workspace_allocator(device).allocate_for_running_task(bytes, *running)
                              : allocator->allocate(bytes, current_runtime_stream(device));
  });
  void* ptr = remember_address(block);
  return c10::DataPtr(ptr, ptr, &delete_addressed_block, c10::Device(c10::kCPU));
}


void* raw_alloc(size_t bytes, const c10::Stream& stream) {
  if (bytes == 0) return nullptr;
  check_device_index(stream.device_index());
  return remember_address(allocate_block(stream.device_index(), bytes, runtime_stream(stream)));
}

void raw_delete(void* ptr) {
  if (ptr == nullptr) return;
  NPU_CHECK_WITH(ValueError, ErrCode::kPtr, free_if_cpu_kernel_block(ptr),
                 "caching_allocator_delete: pointer was not allocated by caching_allocator_alloc");
}

std::string format_size(uint64_t bytes) { return vnpu::format_size(bytes); }


}  // namespace torch_npu
