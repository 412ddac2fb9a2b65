// DeviceAllocator: the one owner of a virtual NPU's caching allocators
// (vnpu::Device holds one, beside its DeviceMemory):
// - the ordinary allocator, for tensors;
// - the workspace, the scratch memory of kernels running on a stream
//   worker: only running tasks use its blocks, so a task reuses what an
//   earlier one freed at once, whatever the stream has queued
//   (CachingAllocator::allocate_for_running_task), and the ordinary
//   allocator's reuse stays independent of the workers' timing;
// - private pools, the pools NPU graphs capture into and torch.npu.MemPool's:
//   each its own CachingAllocator over the device's memory, so its blocks are
//   never handed to ordinary allocations (a graph's replays keep writing to
//   the addresses its capture allocated, as CUDA graphs' private pools).
//   Which allocation goes to which pool is the adaptor's business (capture
//   streams, use_mem_pool); this class keeps the pools and their users.
//
// Every allocator is created at its first use and lives as long as this
// object (a live block points at its allocator): a pool nobody uses any more
// gives its idle segments back, and the rest at the next empty_cache().
// Statistics and snapshots cover all of them, as CUDA's memory_stats does.
//
// Note [Request padding]
// Each request is padded by kRequestPaddingBytes before it is rounded, as
// torch_npu's allocator does for the CANN versions vNPU reports (before 9.1,
// or any chip before Ascend950): some CANN kernels read up to 32 bytes past
// a tensor's end. So a 512-byte tensor takes a 1024-byte block and
// memory_allocated() grows by ceil((nbytes + 32) / 512) * 512, the figures
// users of real torch_npu see. The workspace is not padded (no tensor
// lives in it).
//
// Thread-safety: every method may be called from any thread. empty_cache()
// and release_pool() may wait for streams: never call them from a stream
// task.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "vnpu/alloc_settings.h"
#include "vnpu/caching_allocator.h"

namespace vnpu {

class DeviceMemory;
class MemoryArena;

// PoolId (a private pool's id) is declared in allocator_stats.h.

class DeviceAllocator {
 public:
  static constexpr std::size_t kRequestPaddingBytes = 32;

  // `caching` false: PYTORCH_NO_NPU_MEMORY_CACHING=1 (the ordinary allocator
  // caches nothing). `settings` must outlive this object.
  DeviceAllocator(DeviceMemory& memory, const AllocSettings& settings, bool caching);
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // The ordinary allocator, created with the settings' options (and their
  // per_process_memory_fraction) at the first call. Throws the settings'
  // error, at each call until they are valid.
  CachingAllocator& ordinary();
  // nullptr while nothing allocated (costs one atomic load).
  CachingAllocator* ordinary_if_created() const { return ordinary_.load(std::memory_order_acquire); }
  CachingAllocator& workspace();

  // A new private pool, used once. Throws Error(kInvalidValue) when `id`
  // exists, or the settings' error. With `segments`, the pool's segments
  // come from that arena instead of the device's memory (torch.npu.MemPool
  // of a pluggable allocator): a DeviceMemory of the pool's own, with the
  // device's index and capacity, accounts them.
  // `no_split`: the pool never splits a block (CachingAllocator::set_no_split).
  // `use_on_oom`: while the pool has users, a request the ordinary allocator
  // cannot serve takes a block from the pool's cache (torch.npu.MemPool's
  // use_on_oom, CUDA's use_on_oom_pools) rather than fail.
  void create_pool(PoolId id, std::shared_ptr<MemoryArena> segments = nullptr, bool no_split = false,
                   bool use_on_oom = false);
  // Throws Error(kInvalidValue) for an unknown pool.
  void retain_pool(PoolId id);
  // When the last user goes, the pool's idle segments go back to device
  // memory (after the work still reading them). Unknown or unused: nothing.
  void release_pool(PoolId id);
  // Users of the pool; 0 when unknown.
  int pool_use_count(PoolId id) const;
  // nullptr for an unknown pool.
  CachingAllocator* pool(PoolId id) const;

  // Every allocator's counters summed; a device that never allocated reports
  // zeros and the settings' split limit.
  AllocatorStats stats() const;
  void reset_peak_stats();
  void reset_accumulated_stats();
  // Every allocator's segments.
  std::vector<SegmentInfo> snapshot() const;
  // CachingAllocator::allocation_containing over every allocator of the device.
  bool allocation_containing(const void* address, void** base, std::size_t* bytes) const;

  // Returns the cached, unused blocks of the ordinary allocator, of the
  // workspace and of every pool nobody uses, after the queued work that
  // still reads them.
  void empty_cache();

  // CachingAllocator::retire_stream on every allocator of the device.
  void retire_stream(Stream& dead, Stream& heir);

  // The per-process limit, as a fraction of the device's capacity, on what
  // the ordinary allocator and the pools reserve together (the ordinary
  // allocator is created to set it; pools made later start with it), and
  // what it is or will start with.
  void set_memory_fraction(double fraction);
  double memory_fraction() const;

  // New options for every allocator created so far (the others read the
  // settings when created); a per_process_memory_fraction among them applies
  // to the ordinary allocator.
  void set_config(const AllocConfig& config);

 private:
  struct Pool {
    std::unique_ptr<DeviceMemory> memory;  // its own segment source, if any; outlives the allocator
    std::unique_ptr<CachingAllocator> allocator;
    int users = 0;
    bool use_on_oom = false;
  };
  // The ordinary allocator's OOM fallback: a block from the cache of a
  // use_on_oom pool that has users, or nullptr.
  Block* allocate_from_oom_pools(std::size_t bytes, Stream& stream);
  // The limit on the allocators that share the device's memory.
  void apply_memory_fraction(double fraction);
  // Every allocator made so far (guarded by mutex_ while copied).
  std::vector<CachingAllocator*> all_allocators() const;
  // empty_cache() of every allocator but `asking`: the release_peers hook
  // of each allocator made here.
  void release_peers_of(CachingAllocator& asking);
  // The allocators empty_cache() returns: ordinary, workspace, unused pools.
  std::vector<CachingAllocator*> idle_allocators() const;

  DeviceMemory& memory_;
  const AllocSettings& settings_;
  const bool caching_;

  // What the allocators over memory_ (ordinary, workspace, pools without
  // segments of their own) hold reserved; declared before them, whose
  // destructors return their segments.
  std::atomic<std::int64_t> reserved_{0};

  mutable std::mutex mutex_;  // guards what follows and the creation of allocators
  double fraction_ = -1.0;    // set_memory_fraction's, for pools made later (-1: the settings')
  std::atomic<CachingAllocator*> ordinary_{nullptr};
  std::atomic<CachingAllocator*> workspace_{nullptr};
  std::vector<std::unique_ptr<CachingAllocator>> owned_;  // ordinary and workspace, once made
  std::map<PoolId, Pool> pools_;
};

}  // namespace vnpu
