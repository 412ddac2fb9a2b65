// The npu tensor allocator: a c10::DeviceAllocator over the runtime's
// vnpu::CachingAllocator, one per device, created at a device's first
// allocation. The policy (pools, splitting, streams, record_stream, release,
// OOM retry) lives in runtime/include/vnpu/caching_allocator.h, Note
// [Caching allocator policy]; this layer adds what needs torch: the current
// device and stream, DataPtrs, torch's exception types and error suffixes,
// and torch.accelerator's DeviceAllocator interface.
//
// The DataPtr context is the vnpu::Block*; its deleter may run on any
// thread, including stream workers (tensors die there too), and never waits.
// PYTORCH_NPU_ALLOC_CONF errors are raised (RuntimeError) by the first
// allocation, as in torch_npu.
//
// Thread-safety: every function may be called from any thread. empty_cache
// and allocations may wait for streams: never call them from a stream task.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

namespace c10 {
struct StorageImpl;
}  // namespace c10

#include <cstdint>
#include <string>
#include <vector>

#include <vnpu/caching_allocator.h>

namespace torch_npu {

// Counters behind torch.npu.memory_stats(); names follow torch.cuda.
using MemoryStats = vnpu::AllocatorStats;

// The allocator registered for the npu device type (a c10::DeviceAllocator).
c10::Allocator* npu_caching_allocator();

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

// The ordinary allocator of `device` (created on first use).
vnpu::CachingAllocator& device_caching_allocator(c10::DeviceIndex device);

// Device memory for a CPU kernel inside a DeviceMemoryScope, labelled CPU,
// whose context is its address (Allocator::raw_allocate requires that). On
// a stream task (vnpu::Stream::running_on_this_thread) only blocks no queued
// work uses are taken, without waiting.
c10::DataPtr allocate_for_cpu_kernel(c10::DeviceIndex device, size_t bytes);
// Frees such memory by address; false when `ptr` is not one of its blocks.
bool free_if_cpu_kernel_block(void* ptr);

// Raw allocation for torch.npu.caching_allocator_alloc / _delete.
void* raw_alloc(size_t bytes, const c10::Stream& stream);
void raw_delete(void* ptr);

// True when `data_ptr` was handed out by this allocator (also once shared
// copy-on-write by torch._lazy_clone).
bool is_npu_block(const c10::DataPtr& data_ptr);

// Gives `storage` a DataPtr whose context is its address, the form
// copy-on-write sharing (c10::impl::cow::lazy_clone_storage) requires. The
// block and its stream bookkeeping stay as they were. Not thread-safe with
// respect to other users of the same storage (call it on the caller thread).
void make_address_keyed(c10::StorageImpl& storage);

// torch's size formatting: "512 bytes", "2.00 KiB", "1.50 GiB".
std::string format_size(uint64_t bytes);

}  // namespace torch_npu
