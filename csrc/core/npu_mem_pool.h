// Private memory pools: the pools NPU graphs capture into, torch.npu.MemPool's,
// and each device's kernel workspace.
//
// A pool is its own vnpu::CachingAllocator over the device's memory, so its
// blocks are never handed to ordinary allocations: a graph's replays keep
// writing to the addresses its capture allocated, also after the tensors
// that held them died (CUDA graphs' private pools). Allocations are routed
// to a pool two ways:
//   - on a stream that captures a graph, to the capture's pool;
//   - on a thread inside torch.npu.use_mem_pool(pool), to that pool.
// When nothing routes anywhere, the allocation fast path costs one relaxed
// atomic load.
//
// Lifetime: users (graphs, MemPool objects) retain a pool by id. When the
// last one releases it, its idle segments go back to device memory; blocks
// live tensors still hold keep working and are returned on the next
// torch.npu.empty_cache(). Pool allocators themselves are never destroyed
// (a live block points at its allocator).
//
// Statistics: torch.npu.memory_stats() of a device includes its pools, as
// CUDA's does.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <utility>
#include <vector>

#include <vnpu/caching_allocator.h>

namespace vnpu {
class Stream;
}

namespace torch_npu {

// (graph capture id, 0) for a graph's own pool, (0, n) for a handle or a
// MemPool, as torch.cuda's MempoolId_t.
using MempoolId = std::pair<uint64_t, uint64_t>;

// A new pool on `device`, retained once by the caller.
MempoolId create_pool(c10::DeviceIndex device, bool for_graph);
void retain_pool(MempoolId id);
void release_pool(MempoolId id);
// Users of the pool (0 when unknown).
int pool_use_count(MempoolId id);
c10::DeviceIndex pool_device(MempoolId id);

// torch.npu.use_mem_pool: this thread's allocations on `device` go to the
// pool until the matching end (nested uses stack).
void begin_allocate_to_pool(c10::DeviceIndex device, MempoolId id);
void end_allocate_to_pool(c10::DeviceIndex device, MempoolId id);

// Graph capture: allocations on `stream` go to the pool until the end.
void begin_capture_to_pool(vnpu::Stream& stream, MempoolId id);
void end_capture_to_pool(vnpu::Stream& stream);

// The workspace of `device`: the scratch memory of kernels running on a
// stream worker (DeviceMemoryScope inside a task). Only running tasks use
// its blocks, so a task reuses what an earlier one freed at once,
// whatever the stream has queued (CachingAllocator::allocate_for_running_task),
// and the ordinary pool's reuse stays independent of the workers' timing.
vnpu::CachingAllocator& workspace_allocator(c10::DeviceIndex device);

// The pool an allocation on `device` and `stream` goes to; nullptr for the
// device's ordinary allocator.
vnpu::CachingAllocator* routed_pool(c10::DeviceIndex device, vnpu::Stream& stream);

// Adds the pools of `device` into `stats` (currents, peaks and counts summed).
void add_pool_stats(c10::DeviceIndex device, vnpu::AllocatorStats& stats);
// The segments of the pools of `device`, or of the pool `id` alone.
std::vector<vnpu::SegmentInfo> pool_segments(c10::DeviceIndex device);
std::vector<vnpu::SegmentInfo> pool_segments(MempoolId id);
// Resets the peaks (or the accumulated counts) of the pools of `device`.
void reset_pool_peaks(c10::DeviceIndex device);
void reset_pool_accumulated(c10::DeviceIndex device);
// Returns the idle segments of the workspaces and of every pool nobody uses
// any more.
void empty_released_pools();

}  // namespace torch_npu
