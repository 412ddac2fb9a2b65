// Routing allocations to private memory pools: the pools NPU graphs capture
// into and torch.npu.MemPool's. The pools themselves belong to their device
// (vnpu::DeviceAllocator, runtime/include/vnpu/device_allocator.h: their
// allocators, users, statistics and release); this file gives them torch's
// ids and decides which allocation goes to which pool:
//   - on a stream that captures a graph, to the capture's pool;
//   - on a thread inside torch.npu.use_mem_pool(pool), to that pool.
// When nothing routes anywhere, the allocation fast path costs one relaxed
// atomic load.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <vnpu/allocator_stats.h>

namespace vnpu {
class CachingAllocator;
class Stream;
}  // namespace vnpu

namespace torch_npu {

class PluggableAllocator;

// (graph capture id, 0) for a graph's own pool, (0, n) for a handle or a
// MemPool, as torch.cuda's MempoolId_t (vnpu::PoolId).
using MempoolId = std::pair<uint64_t, uint64_t>;

// A new pool on `device`, retained once by the caller. With `segments`, the
// pool's segments come from that pluggable allocator's alloc and go back
// through its free (Note [Pools of a pluggable allocator]).
// `no_split`: torch.npu.MemPool(no_split=True), a pool that never splits a block.
// `use_on_oom`: torch.npu.MemPool(use_on_oom=True), whose cache serves what
// the device's ordinary allocator cannot (vnpu::DeviceAllocator::create_pool).
MempoolId create_pool(c10::DeviceIndex device, bool for_graph,
                      std::shared_ptr<PluggableAllocator> segments = nullptr, bool no_split = false,
                      bool use_on_oom = false);
void retain_pool(MempoolId id);
// When the last user releases it, its idle segments go back to device
// memory; blocks live tensors still hold keep working and are returned on
// the next torch.npu.empty_cache().
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

// The pool an allocation on `device` and `stream` goes to; nullptr for the
// device's ordinary allocator.
vnpu::CachingAllocator* routed_pool(c10::DeviceIndex device, vnpu::Stream& stream);

// The segments of the pool `id`.
std::vector<vnpu::SegmentInfo> pool_segments(MempoolId id);

}  // namespace torch_npu
