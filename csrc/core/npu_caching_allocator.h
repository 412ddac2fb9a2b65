// NpuCachingAllocator: the c10::Allocator for npu tensors.
//
// Policy (a first version; see docs/architecture.md):
// - Requests are rounded up to kRoundBytes and served from a cache of freed
//   blocks kept per (device, stream); a block is reused only by work on the
//   stream it was allocated on, so reuse is safe by stream order without any
//   synchronisation (CUDA's caching-allocator semantics).
// - record_stream(t, s) adds a stream that uses the block; freeing such a
//   block records an event on each of those streams and the block returns to
//   the cache only after all those events completed.
// - When device memory cannot satisfy a request, the cache is released
//   (after synchronising the device) and the request retried; if it still
//   fails, torch.OutOfMemoryError with torch_npu's message.
// - PYTORCH_NO_NPU_MEMORY_CACHING=1 returns every block to the device at free.
//
// Thread-safety: all functions may be called from any thread, including
// stream workers (tensors die there too).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <map>
#include <string>

namespace torch_npu {

// Counters behind torch.npu.memory_stats(); names follow torch.cuda.
struct MemoryStats {
  int64_t allocated_bytes = 0, allocated_bytes_peak = 0;
  int64_t reserved_bytes = 0, reserved_bytes_peak = 0;
  int64_t active_bytes = 0, active_bytes_peak = 0;
  int64_t allocation_count = 0;       // current live blocks
  int64_t segment_count = 0;          // current device reservations
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
  int64_t num_device_alloc = 0, num_device_free = 0;
  int64_t requested_bytes = 0, requested_bytes_peak = 0;
};

c10::Allocator* npu_caching_allocator();

MemoryStats memory_stats(c10::DeviceIndex device);
void reset_peak_memory_stats(c10::DeviceIndex device);
// Synchronises the device and returns every cached block to device memory.
void empty_cache();
// Limits this process to `fraction` of the device's capacity.
void set_memory_fraction(double fraction, c10::DeviceIndex device);
double get_memory_fraction(c10::DeviceIndex device);

// Marks the block behind `data_ptr` as used by `stream` (record_stream).
void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream);

// Raw allocation for torch.npu.caching_allocator_alloc / _delete.
void* raw_alloc(size_t bytes, const c10::Stream& stream);
void raw_delete(void* ptr);

// True when `data_ptr` was handed out by this allocator.
bool is_npu_block(const c10::DataPtr& data_ptr);

// torch's size formatting: "512 bytes", "2.00 KiB", "1.50 GiB".
std::string format_size(uint64_t bytes);

}  // namespace torch_npu
