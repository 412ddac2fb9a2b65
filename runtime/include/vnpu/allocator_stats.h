// The statistics and snapshots of a caching allocator (caching_allocator.h),
// apart from the allocator itself, so that code which only reports them
// (torch.npu.memory_stats, memory_snapshot) does not depend on the
// allocator's header and is not rebuilt when it changes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace vnpu {

// One statistic, as torch.cuda.memory_stats reports it.
struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;  // sum of increases since the last reset
  std::int64_t freed = 0;      // sum of decreases since the last reset

  void increase(std::int64_t amount) {
    current += amount;
    allocated += amount;
    if (current > peak) peak = current;
  }
  void decrease(std::int64_t amount) {
    current -= amount;
    freed += amount;
  }
};

// Index of a StatArray: all pools together, then each pool.
enum StatType : std::size_t { kAggregateStat = 0, kSmallPoolStat = 1, kLargePoolStat = 2, kNumStatTypes = 3 };
using StatArray = std::array<Stat, kNumStatTypes>;

// The counters behind torch.npu.memory_stats() (torch's DeviceStats).
struct AllocatorStats {
  StatArray allocation;            // blocks handed out and not yet freed
  StatArray segment;               // device reservations
  StatArray active;                // allocated blocks + freed ones awaiting record_stream users
  StatArray inactive_split;        // free blocks inside partly used segments
  StatArray allocated_bytes;
  StatArray reserved_bytes;
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;       // sizes as requested, before rounding
  std::int64_t num_alloc_retries = 0;     // reservations that failed and freed the cache
  std::int64_t num_ooms = 0;              // out-of-memory errors thrown
  std::int64_t num_oom_rejections = 0;    // of them, refused at once (throw_on_npumalloc_oom)
  std::int64_t num_sync_all_streams = 0;  // waits for streams before releasing memory
  std::int64_t num_device_alloc = 0;      // segments reserved
  std::int64_t num_device_free = 0;       // segments released
  Stat oversize_allocations;       // blocks of max_split_size or more handed out
  Stat oversize_segments;          // segments of max_split_size or more
  std::int64_t max_split_size = 0; // bytes; -1 when unlimited (torch's convention)
};

// One block of a segment, for memory snapshots.
struct BlockInfo {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested_size = 0;  // 0 unless allocated
  bool allocated = false;
  bool active = false;  // allocated, or freed while a record_stream user still runs
};

// A private pool's id: (graph capture id, 0) or (0, n), as torch's MempoolId_t.
using PoolId = std::pair<std::uint64_t, std::uint64_t>;

// One segment (device reservation) and its blocks in address order.
struct SegmentInfo {
  std::uintptr_t address = 0;
  std::size_t total_size = 0;
  std::size_t requested_size = 0;
  std::size_t allocated_size = 0;
  std::size_t active_size = 0;
  int stream_index = 0;
  bool is_large = false;
  PoolId pool{0, 0};  // the private pool its allocator serves ({0, 0}: none)
  std::vector<BlockInfo> blocks;
};

}  // namespace vnpu
