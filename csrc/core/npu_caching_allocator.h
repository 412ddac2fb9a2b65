// The npu tensor allocator: a thin c10::DeviceAllocator over the allocators
// each vnpu::Device owns (vnpu::DeviceAllocator: the ordinary one, the kernel
// workspace, the private pools; their options are the runtime's
// AllocSettings). The policy (pools, splitting, streams, record_stream,
// release, OOM retry) lives in runtime/include/vnpu/caching_allocator.h,
// Note [Caching allocator policy]; this layer adds what needs torch: the
// current device and stream, DataPtrs, torch's exception types and error
// suffixes, and torch.accelerator's DeviceAllocator interface.
//
// A DataPtr's context is its data address, and blocks are found by address
// (Note [Blocks by address]); its deleter may run on any thread, including
// stream workers (tensors die there too), and never waits.
// PYTORCH_NPU_ALLOC_CONF errors are raised (RuntimeError) by the first
// allocation, as in torch_npu.
//
// Thread-safety: every function may be called from any thread. empty_cache
// and allocations may wait for streams: never call them from a stream task.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <string>
#include <vector>

#include <vnpu/allocator_stats.h>

namespace vnpu {
class CachingAllocator;
class DeviceAllocator;
}  // namespace vnpu

namespace torch_npu {

// Counters behind torch.npu.memory_stats(); names follow torch.cuda.
using MemoryStats = vnpu::AllocatorStats;

// The allocator registered for the npu device type (a c10::DeviceAllocator):
// allocate() serves the thread's current device.
c10::Allocator* npu_caching_allocator();

// `bytes` of memory on `device` for work on its current stream, from the pool
// the allocation is routed to (graph capture, use_mem_pool) or the device's
// ordinary allocator. The thread's current device is neither read nor changed.
c10::DataPtr allocate_on(c10::DeviceIndex device, size_t bytes);

// The allocators `device` owns (created with the device).
vnpu::DeviceAllocator& runtime_allocators(c10::DeviceIndex device);
// Its ordinary allocator, created at the first call: PYTORCH_NPU_ALLOC_CONF
// errors are raised here (RuntimeError), at each call until fixed.
vnpu::CachingAllocator& ordinary_allocator(c10::DeviceIndex device);

MemoryStats memory_stats(c10::DeviceIndex device);
void reset_peak_memory_stats(c10::DeviceIndex device);
void reset_accumulated_memory_stats(c10::DeviceIndex device);
// Returns every cached, unused block of every device to device memory,
// after the work queued before their free has run.
void empty_cache();
// Limits this process to `fraction` of the device's capacity.
void set_memory_fraction(double fraction, c10::DeviceIndex device);

// torch_npu.npu.memory._set_allocator_settings: applies PYTORCH_NPU_ALLOC_CONF
// options ("garbage_collection_threshold:0.6,...") to every device from now
// on; the others keep their values. Raises (changing nothing) for an unknown
// key, a bad value, or max_split_size_mb (fixed at start-up).
void set_allocator_settings(const std::string& text);
double get_memory_fraction(c10::DeviceIndex device);
// The segments of `device` (nothing when it never allocated).
std::vector<vnpu::SegmentInfo> memory_snapshot(c10::DeviceIndex device);

// Marks the block behind `data_ptr` as used by `stream` (record_stream).
void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream);
// torch_npu.erase_stream: a pluggable allocator's erase_stream hook for its
// memory; vNPU's own allocator keeps the recorded use (docs: memory.py).
void erase_stream(void* ptr, const c10::Stream& stream);

// Device memory for a CPU kernel inside a DeviceMemoryScope, labelled CPU,
// whose context is its address (Allocator::raw_allocate requires that). On
// a stream task (vnpu::Stream::running_on_this_thread) only blocks no queued
// work uses are taken, without waiting.
c10::DataPtr allocate_for_cpu_kernel(c10::DeviceIndex device, size_t bytes);
// Frees the block handed out at `ptr` (by any of these functions); false when
// no live block starts there.
bool free_if_npu_block(void* ptr);

// Raw allocation for torch.npu.caching_allocator_alloc / _delete.
void* raw_alloc(size_t bytes, const c10::Stream& stream);
void raw_delete(void* ptr);

// True when `data_ptr` points at a block this allocator handed out (also
// once shared copy-on-write by torch._lazy_clone).
bool is_npu_block(const c10::DataPtr& data_ptr);

// torch's size formatting: "512 bytes", "2.00 KiB", "1.50 GiB".
std::string format_size(uint64_t bytes);

}  // namespace torch_npu
