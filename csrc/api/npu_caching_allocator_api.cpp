// c10_npu::NPUCachingAllocator (NPUCachingAllocator.h) over the adaptor's
// caching allocator (csrc/core/npu_caching_allocator.h).
#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_memory_history.h"
#include <torch/csrc/profiler/combined_traceback.h>  // the stack is a c10::GatheredContext
#include "csrc/core/npu_stream.h"
#include "torch_npu/csrc/core/npu/NPUCachingAllocator.h"

namespace c10_npu {
namespace NPUCachingAllocator {
namespace {

void copy_stats(const vnpu::StatArray& from, StatArray& to) {
  for (size_t i = 0; i < from.size() && i < to.size(); ++i) {
    to[i].current = from[i].current;
    to[i].peak = from[i].peak;
    to[i].allocated = from[i].allocated;
    to[i].freed = from[i].freed;
  }
}

void copy_stat(const vnpu::Stat& from, Stat& to) {
  to.current = from.current;
  to.peak = from.peak;
  to.allocated = from.allocated;
  to.freed = from.freed;
}

}  // namespace

c10::Allocator* get() { return torch_npu::npu_caching_allocator(); }

void* raw_alloc(size_t nbytes) { return torch_npu::raw_alloc(nbytes, torch_npu::current_stream(-1)); }

void* raw_alloc_with_stream(size_t nbytes, aclrtStream stream) {
  std::optional<c10::Stream> s = torch_npu::stream_of_handle(stream);
  TORCH_CHECK(stream == nullptr || s.has_value(), "raw_alloc_with_stream: not a stream of the virtual NPU");
  return torch_npu::raw_alloc(nbytes, s.has_value() ? *s : torch_npu::current_stream(-1));
}

void raw_delete(void* ptr) { torch_npu::raw_delete(ptr); }

void emptyCache(bool check_error) { torch_npu::empty_cache(); }

DeviceStats getDeviceStats(c10::DeviceIndex device) {
  const torch_npu::MemoryStats stats = torch_npu::memory_stats(device);
  DeviceStats out;
  copy_stats(stats.allocation, out.allocation);
  copy_stats(stats.segment, out.segment);
  copy_stats(stats.active, out.active);
  copy_stats(stats.inactive_split, out.inactive_split);
  copy_stats(stats.allocated_bytes, out.allocated_bytes);
  copy_stats(stats.reserved_bytes, out.reserved_bytes);
  copy_stats(stats.active_bytes, out.active_bytes);
  copy_stats(stats.inactive_split_bytes, out.inactive_split_bytes);
  copy_stats(stats.requested_bytes, out.requested_bytes);
  out.num_alloc_retries = stats.num_alloc_retries;
  out.num_ooms = stats.num_ooms;
  out.num_sync_all_streams = stats.num_sync_all_streams;
  out.num_device_alloc = stats.num_device_alloc;
  out.num_device_free = stats.num_device_free;
  copy_stat(stats.oversize_allocations, out.oversize_allocations);
  copy_stat(stats.oversize_segments, out.oversize_segments);
  out.max_split_size = stats.max_split_size;
  return out;
}

void resetPeakStats(c10::DeviceIndex device) { torch_npu::reset_peak_memory_stats(device); }

void resetAccumulatedStats(c10::DeviceIndex device) { torch_npu::reset_accumulated_memory_stats(device); }

void recordStream(const c10::DataPtr& ptr, NPUStream stream) { torch_npu::record_stream(ptr, stream.unwrap()); }

void setMemoryFraction(double fraction, int device) {
  torch_npu::set_memory_fraction(fraction, static_cast<c10::DeviceIndex>(device));
}

double getMemoryFraction(int device) { return torch_npu::get_memory_fraction(static_cast<c10::DeviceIndex>(device)); }

void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) {
  TORCH_CHECK(tracker, "attachAllocatorTraceTracker: the tracker is empty");
  torch_npu::add_memory_event_listener([tracker = std::move(tracker)](const torch_npu::MemoryEvent& e) {
    // MemoryAction lists TraceEntry's first five actions in its order.
    tracker(TraceEntry(static_cast<TraceEntry::Action>(static_cast<int>(e.action)), e.device,
                       static_cast<int64_t>(e.address), e.size, static_cast<aclrtStream>(e.stream), {0, 0},
                       e.context));
  });
}

bool isHistoryEnabled() { return torch_npu::memory_history_enabled(); }

}  // namespace NPUCachingAllocator
}  // namespace c10_npu
