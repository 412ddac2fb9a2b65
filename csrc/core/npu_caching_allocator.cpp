#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_recovery.h"
#include "csrc/core/npu_memory_history.h"

#include <ATen/core/Tensor.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/library.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_mem_pool.h"
#include "csrc/core/npu_pluggable_allocator.h"
#include "csrc/core/npu_stream.h"
#include <vnpu/device_allocator.h>
#include <vnpu/runtime.h>

namespace torch_npu {
namespace {

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

// expandable_segments:True is accepted, as CUDA accepts it on platforms
// that cannot map memory: one warning, then ordinary segments of whole
// segment_size_mb granules (Note [Expandable segments' granules]).
//
// The pinned host allocator's pin_memory_expandable_segments and
// pinned_mem_register need CANN 8.5 (and a recent driver); vNPU reports
// CANN 8.0.0, so, as real torch_npu does there, they are turned off with
// its warning.
void warn_about_options_turned_off(const vnpu::AllocConfig& config) {
  if (config.pin_memory_expandable_segments) {
    TORCH_WARN_ONCE("m_pin_memory_expandable_segments setting failure, the current cann version does not support "
                    "this feature, now change to `False`.");
  }
  if (config.pinned_mem_register) {
    TORCH_WARN_ONCE("pinned_mem_register setting failure, the current cann version or driver version does not "
                    "support this feature, now change to `False`.");
  }
  if (!config.expandable_segments) return;
  TORCH_WARN_ONCE("expandable_segments:True is not supported by the virtual NPU (its device memory cannot be "
                  "remapped to grow a segment); the caching allocator uses ordinary segments, each of whole "
                  "segment_size_mb granules as an expandable segment maps them");
}

// The device's allocators without initializing torch_npu (statistics of a
// device nobody used must not count as its first use).
vnpu::DeviceAllocator& allocators_of(c10::DeviceIndex device) {
  check_device_index(device);
  return vnpu::Runtime::instance().device(device).allocator();
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

// The deleter of every DataPtr this allocator makes. Its context is the data
// address (Note [Blocks by address] in runtime/src/caching_allocator.cpp),
// the form copy-on-write sharing and Allocator::raw_allocate require.
void delete_npu_memory(void* ptr) {
  forget_device_data(ptr);  // its next tensor is safe (npu_recovery.h)
  if (free_if_npu_block(ptr)) return;
  if (PluggableAllocator* pluggable = current_pluggable_allocator()) pluggable->free(ptr);
}

c10::DataPtr npu_data_ptr(vnpu::Block* block, c10::Device device) {
  void* ptr = vnpu::CachingAllocator::address(block);
  return c10::DataPtr(ptr, ptr, &delete_npu_memory, device);
}

// vNPU's statistics and c10's (torch.accelerator's DeviceStats, and what a
// pluggable allocator's get_device_stats returns) have the same fields: one
// copy serves both directions.
template <typename Out, typename In>
Out convert_stat(const In& s) {
  Out out;
  out.current = s.current;
  out.peak = s.peak;
  out.allocated = s.allocated;
  out.freed = s.freed;
  return out;
}

template <typename Out, typename In>
Out convert_stat_array(const In& array) {
  Out out;
  for (size_t i = 0; i < out.size(); ++i) out[i] = convert_stat<typename Out::value_type>(array[i]);
  return out;
}

template <typename Out, typename In>
Out convert_stats(const In& s) {
  using Array = decltype(Out::allocation);
  using One = decltype(Out::oversize_allocations);
  Out out;
  out.allocation = convert_stat_array<Array>(s.allocation);
  out.segment = convert_stat_array<Array>(s.segment);
  out.active = convert_stat_array<Array>(s.active);
  out.inactive_split = convert_stat_array<Array>(s.inactive_split);
  out.allocated_bytes = convert_stat_array<Array>(s.allocated_bytes);
  out.reserved_bytes = convert_stat_array<Array>(s.reserved_bytes);
  out.active_bytes = convert_stat_array<Array>(s.active_bytes);
  out.inactive_split_bytes = convert_stat_array<Array>(s.inactive_split_bytes);
  out.requested_bytes = convert_stat_array<Array>(s.requested_bytes);
  out.num_alloc_retries = s.num_alloc_retries;
  out.num_ooms = s.num_ooms;
  out.num_sync_all_streams = s.num_sync_all_streams;
  out.num_device_alloc = s.num_device_alloc;
  out.num_device_free = s.num_device_free;
  out.oversize_allocations = convert_stat<One>(s.oversize_allocations);
  out.oversize_segments = convert_stat<One>(s.oversize_segments);
  out.max_split_size = s.max_split_size;
  return out;
}

class NpuCachingAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t bytes) override { return allocate_on(current_device(), bytes); }

  c10::DeleterFnPtr raw_deleter() const override { return &delete_npu_memory; }

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
    return convert_stats<c10::CachingDeviceAllocator::DeviceStats>(memory_stats(device));
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override { reset_accumulated_memory_stats(device); }

  void resetPeakStats(c10::DeviceIndex device) override { reset_peak_memory_stats(device); }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    vnpu::DeviceMemory& memory = runtime_device(device).memory();
    return {memory.free_bytes(), memory.capacity()};
  }
};

NpuCachingAllocator g_allocator;

// Each device's ordinary allocator once ordinary_allocator() made it (the
// runtime, leaked on purpose, keeps it for the life of the process): every
// kernel's output is allocated here, and the device checks and runtime
// lookups of ordinary_allocator() cost a tenth of a small op's launch.
std::atomic<vnpu::CachingAllocator*> g_ordinary[kMaxDevices];

vnpu::CachingAllocator* made_ordinary_allocator(c10::DeviceIndex device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  check_not_forked();  // a forked child inherits the pointers, not the devices
  return g_ordinary[device].load(std::memory_order_acquire);
}

// What caching_allocator_alloc handed out and caching_allocator_delete may
// free (every other block belongs to a tensor).
std::mutex g_raw_mutex;
std::unordered_set<void*> g_raw_blocks;  // guarded by g_raw_mutex

}  // namespace

c10::Allocator* npu_caching_allocator() { return &g_allocator; }

c10::DataPtr allocate_on(c10::DeviceIndex device, size_t bytes) {
  vnpu::CachingAllocator* ordinary = made_ordinary_allocator(device);
  if (ordinary == nullptr) check_device_index(device);  // else checked when it was made
  if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &delete_npu_memory, npu_device(device));
  vnpu::Stream& stream = current_runtime_stream(device);
  vnpu::CachingAllocator* pool = routed_pool(device, stream);  // NPU graphs, MemPool
  if (PluggableAllocator* pluggable = current_pluggable_allocator(); pluggable != nullptr && pool == nullptr) {
    void* ptr = pluggable->malloc(bytes, device, current_stream(device));
    return c10::DataPtr(ptr, ptr, &delete_npu_memory, npu_device(device));
  }
  vnpu::CachingAllocator& allocator = pool != nullptr ? *pool : ordinary != nullptr ? *ordinary : ordinary_allocator(device);
  ContextScope stack(RecordContext::kState);  // the memory history's, gathered outside the allocator's lock
  // kOutOfMemory becomes torch.OutOfMemoryError.
  vnpu::Block* block = with_torch_errors([&] { return allocator.allocate(bytes, stream); });
  if (c10::memoryProfilingEnabled()) {
    report_to_profiler(allocator, vnpu::CachingAllocator::address(block),
                       static_cast<int64_t>(vnpu::CachingAllocator::size(block)));
  }
  return npu_data_ptr(block, npu_device(device));
}

bool free_if_npu_block(void* ptr) {
  vnpu::Block* block = vnpu::CachingAllocator::take_live_block(ptr);
  if (block == nullptr) return false;
  vnpu::CachingAllocator& owner = vnpu::CachingAllocator::owner(block);
  ContextScope stack(RecordContext::kAll);
  if (!c10::memoryProfilingEnabled()) {
    owner.free_taken(block);
    return true;
  }
  // The block may be merged away by the free: read it first.
  const auto bytes = static_cast<int64_t>(vnpu::CachingAllocator::size(block));
  owner.free_taken(block);
  report_to_profiler(owner, ptr, -bytes);
  return true;
}

vnpu::DeviceAllocator& runtime_allocators(c10::DeviceIndex device) { return runtime_device(device).allocator(); }

// Errors surface at the first allocation, not when the environment is read.
vnpu::CachingAllocator& ordinary_allocator(c10::DeviceIndex device) {
  vnpu::DeviceAllocator& allocators = runtime_device(device).allocator();
  vnpu::CachingAllocator* made = allocators.ordinary_if_created();
  if (made == nullptr) {
    made = with_config_errors([&] { return &allocators.ordinary(); });
    warn_about_options_turned_off(made->config());
  }
  g_ordinary[device].store(made, std::memory_order_release);
  return *made;
}


MemoryStats memory_stats(c10::DeviceIndex device) {
  if (PluggableAllocator* pluggable = current_pluggable_allocator()) {
    check_device_index(device);
    if (auto stats = pluggable->device_stats(device)) return convert_stats<MemoryStats>(*stats);
    TORCH_WARN("get_device_stats_fn_ is not define, please set by set_get_device_stats_fn");
  }
  return allocators_of(device).stats();
}

void reset_peak_memory_stats(c10::DeviceIndex device) {
  if (PluggableAllocator* pluggable = current_pluggable_allocator()) {
    check_device_index(device);
    if (!pluggable->reset_peak_stats(device)) {
      TORCH_WARN("reset_peak_status_fn_ is not define, please set by set_reset_peak_status_fn");
    }
    return;
  }
  allocators_of(device).reset_peak_stats();
}

void reset_accumulated_memory_stats(c10::DeviceIndex device) {
  if (current_pluggable_allocator() != nullptr) {
    TORCH_WARN("NPUPluggableAllocator does not yet support resetAccumulatedStats. "
               "If you need it, please file an issue describing your use case.");
    return;
  }
  allocators_of(device).reset_accumulated_stats();
}

void empty_cache() {
  check_not_forked();
  if (PluggableAllocator* pluggable = current_pluggable_allocator()) pluggable->empty_cache();
  if (!is_initialized()) return;
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    vnpu::DeviceAllocator& allocators = allocators_of(d);
    with_torch_errors([&] { allocators.empty_cache(); });
  }
}

void set_allocator_settings(const std::string& text) {
  // torch_npu changes only these at run time; the others (the rounding and
  // garbage-collection policy, the Ascend tuning options) are read once,
  // from PYTORCH_NPU_ALLOC_CONF. Unknown keys are left to the parser's message.
  static const std::unordered_set<std::string> kRunTimeKeys = {
      "expandable_segments", "max_split_size_mb", "max_non_split_rounding_mb", "release_lock_on_npumalloc",
      "throw_on_npumalloc_oom", "per_process_memory_fraction", "pinned_max_round_threshold_mb",
      "pinned_max_cached_size_mb"};
  for (const std::string& key : with_config_errors([&] { return vnpu::alloc_config_keys(text); })) {
    NPU_CHECK_WITH(ValueError, ErrCode::kValue, !vnpu::is_alloc_config_key(key) || kRunTimeKeys.count(key) != 0,
                   "torch_npu.npu.memory._set_allocator_settings() unsupported setting: ", key,
                   " (set it with PYTORCH_NPU_ALLOC_CONF before the first allocation)");
  }
  const vnpu::AllocConfig config = with_config_errors([&] {
    return vnpu::Runtime::instance().set_alloc_config(text, "torch_npu.npu.memory._set_allocator_settings()");
  });
  warn_about_options_turned_off(config);
}

void set_memory_fraction(double fraction, c10::DeviceIndex device) {
  check_device_index(device);
  NPU_CHECK_WITH(ValueError, ErrCode::kValue, fraction >= 0.0 && fraction <= 1.0,
                 "Invalid fraction value: ", fraction, ". Allowed range: 0~1");
  if (PluggableAllocator* pluggable = current_pluggable_allocator()) {
    pluggable->set_memory_fraction(fraction, device);  // as torch_npu: its hook, if set, decides
    return;
  }
  ordinary_allocator(device).set_memory_fraction(fraction);
}

double get_memory_fraction(c10::DeviceIndex device) { return allocators_of(device).memory_fraction(); }

std::vector<vnpu::SegmentInfo> memory_snapshot(c10::DeviceIndex device) { return allocators_of(device).snapshot(); }

bool is_npu_block(const c10::DataPtr& data_ptr) {
  return vnpu::CachingAllocator::live_block(data_ptr.get()) != nullptr;
}

void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream) {
  vnpu::Block* block = vnpu::CachingAllocator::live_block(data_ptr.get());
  if (block == nullptr) {
    PluggableAllocator* pluggable = current_pluggable_allocator();
    if (pluggable != nullptr && pluggable->owns(data_ptr.get())) pluggable->record_stream(data_ptr.get(), stream);
    return;
  }
  vnpu::CachingAllocator::owner(block).record_stream(block, runtime_stream(stream));
}

void erase_stream(void* ptr, const c10::Stream& stream) {
  PluggableAllocator* pluggable = current_pluggable_allocator();
  if (pluggable != nullptr && pluggable->owns(ptr)) pluggable->erase_stream(ptr, stream);
}

c10::DataPtr allocate_for_cpu_kernel(c10::DeviceIndex device, size_t bytes) {
  check_device_index(device);
  if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &delete_npu_memory, c10::Device(c10::kCPU));
  vnpu::Stream* running = vnpu::Stream::running_on_this_thread();
  vnpu::Block* block = with_torch_errors([&] {
    return running != nullptr
               ? runtime_allocators(device).workspace().allocate_for_running_task(bytes, *running)
               : ordinary_allocator(device).allocate(bytes, current_runtime_stream(device));
  });
  return npu_data_ptr(block, c10::Device(c10::kCPU));
}

void* raw_alloc(size_t bytes, const c10::Stream& stream) {
  if (bytes == 0) return nullptr;
  const c10::DeviceIndex device = stream.device_index();
  check_device_index(device);
  void* ptr = nullptr;
  if (PluggableAllocator* pluggable = current_pluggable_allocator()) {
    ptr = pluggable->malloc(bytes, device, stream);
  } else {
    vnpu::CachingAllocator& allocator = ordinary_allocator(device);
    vnpu::Block* block = with_torch_errors([&] { return allocator.allocate(bytes, runtime_stream(stream)); });
    ptr = vnpu::CachingAllocator::address(block);
  }
  std::lock_guard<std::mutex> lock(g_raw_mutex);
  g_raw_blocks.insert(ptr);
  return ptr;
}

void raw_delete(void* ptr) {
  if (ptr == nullptr) return;
  bool ours = false;
  {
    std::lock_guard<std::mutex> lock(g_raw_mutex);
    ours = g_raw_blocks.erase(ptr) > 0;
  }
  // A tensor's memory is not the caller's to free: it stays with its tensor.
  auto free_it = [ptr] {
    if (free_if_npu_block(ptr)) return true;
    PluggableAllocator* pluggable = current_pluggable_allocator();
    return pluggable != nullptr && pluggable->free(ptr);
  };
  NPU_CHECK_WITH(ValueError, ErrCode::kPtr, ours && free_it(),
                 "caching_allocator_delete: pointer was not allocated by caching_allocator_alloc");
}

std::string format_size(uint64_t bytes) { return vnpu::format_size(bytes); }

}  // namespace torch_npu
