// DeviceAllocator (one owner for a device's allocators), AllocSettings (the
// process's one set of allocator options) and the lookup of live blocks by
// address.
#include <gtest/gtest.h>

#include <limits>

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "test_helpers.h"
#include "vnpu/alloc_settings.h"
#include "vnpu/caching_allocator.h"
#include "vnpu/device_allocator.h"
#include "vnpu/device_memory.h"
#include "vnpu/error.h"
#include "vnpu/memory_arena.h"
#include "vnpu/stream.h"

namespace {

using vnpu::AllocSettings;
using vnpu::Block;
using vnpu::CachingAllocator;
using vnpu::DeviceAllocator;
using vnpu::Error;
using vnpu::ErrorCode;
using vnpu::kAggregateStat;

constexpr std::size_t kMiB = 1024 * 1024;

AllocSettings settings_from(const std::map<std::string, std::string>& vars) {
  return AllocSettings(vnpu_test::parse(vars));
}

// Memory, a stream and the allocators of one device over them; the
// allocators go first (members are destroyed in reverse order).
using Vars = std::map<std::string, std::string>;

struct Fixture {
  explicit Fixture(const Vars& vars = {})
      : settings(settings_from(vars)), device(memory, settings, /*caching=*/true) {}
  vnpu::DeviceMemory memory{0, 256 * kMiB};
  vnpu::Stream stream{0, 0, 0, false};
  AllocSettings settings;
  DeviceAllocator device;
};

TEST(AllocSettings, AnInvalidEnvironmentThrowsAtEachGetNotAtConstruction) {
  AllocSettings settings = settings_from({{"PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb:1"}});
  EXPECT_FALSE(settings.peek().has_value());
  for (int i = 0; i < 2; ++i) {
    try {
      settings.get();
      ADD_FAILURE() << "expected the environment's error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidValue);
      EXPECT_NE(std::string(e.what()).find("max_split_size_mb"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(settings.apply("garbage_collection_threshold:0.5", "test"), Error);
}

TEST(AllocSettings, ApplyChangesTheNamedOptionsResetsTorchsThreeAndNothingOnError) {
  AllocSettings settings = settings_from(
      {{"PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb:64,garbage_collection_threshold:0.5,throw_on_npumalloc_oom:True"}});
  const vnpu::AllocConfig changed = settings.apply("max_non_split_rounding_mb:30", "test");
  EXPECT_EQ(changed.max_non_split_rounding_bytes, 30 * kMiB);
  EXPECT_TRUE(changed.throw_on_npumalloc_oom);  // kept
  // torch's parser puts these back to their defaults at each call that does not set them.
  EXPECT_EQ(changed.max_split_size_bytes, std::numeric_limits<std::size_t>::max());
  EXPECT_DOUBLE_EQ(changed.garbage_collection_threshold, 0.0);
  EXPECT_EQ(settings.apply("max_split_size_mb:64", "test").max_split_size_bytes, 64 * kMiB);
  EXPECT_THROW(settings.apply("max_split_size_mb:128,bogus:1", "test"), Error);
  EXPECT_EQ(settings.get().max_split_size_bytes, 64 * kMiB);
}

TEST(DeviceAllocator, TheOrdinaryAllocatorIsMadeOnceWithTheSettings) {
  Fixture f(Vars{{"PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb:64,per_process_memory_fraction:0.5"}});
  EXPECT_EQ(f.device.ordinary_if_created(), nullptr);
  EXPECT_DOUBLE_EQ(f.device.memory_fraction(), 0.5);  // what it will start with
  CachingAllocator& ordinary = f.device.ordinary();
  EXPECT_EQ(&f.device.ordinary(), &ordinary);
  EXPECT_EQ(f.device.ordinary_if_created(), &ordinary);
  EXPECT_EQ(ordinary.config().max_split_size_bytes, 64 * kMiB);
  EXPECT_DOUBLE_EQ(ordinary.memory_fraction(), 0.5);
}

TEST(DeviceAllocator, InvalidSettingsFailEveryCreationAndNotStatistics) {
  Fixture f(Vars{{"PYTORCH_NPU_ALLOC_CONF", "roundup_power2_divisions:3"}});
  EXPECT_THROW(f.device.ordinary(), Error);
  EXPECT_THROW(f.device.ordinary(), Error);
  EXPECT_THROW(f.device.create_pool({1, 0}), Error);
  EXPECT_EQ(f.device.stats().allocated_bytes[kAggregateStat].current, 0);
  EXPECT_EQ(f.device.stats().max_split_size, -1);
  EXPECT_TRUE(f.device.snapshot().empty());
}

TEST(DeviceAllocator, StatisticsAndSnapshotsCoverEveryAllocator) {
  Fixture f(Vars{{"PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb:64"}});
  EXPECT_EQ(f.device.stats().max_split_size, static_cast<std::int64_t>(64 * kMiB));  // before any allocation
  f.device.create_pool({0, 1});
  Block* ordinary = f.device.ordinary().allocate(1000, f.stream);
  Block* workspace = f.device.workspace().allocate(3000, f.stream);
  Block* pooled = f.device.pool({0, 1})->allocate(5000, f.stream);
  const vnpu::AllocatorStats stats = f.device.stats();
  EXPECT_EQ(stats.allocation[kAggregateStat].current, 3);
  // Tensor allocators pad each request by 32 bytes (Note [Request padding]); the workspace does not.
  EXPECT_EQ(stats.allocated_bytes[kAggregateStat].current, 1536 + 3072 + 5120);
  EXPECT_EQ(stats.segment[kAggregateStat].current, 3);
  EXPECT_EQ(stats.max_split_size, static_cast<std::int64_t>(64 * kMiB));
  EXPECT_EQ(f.device.snapshot().size(), 3u);

  f.device.ordinary().free(ordinary);
  f.device.workspace().free(workspace);
  CachingAllocator::owner(pooled).free(pooled);
  f.device.reset_peak_stats();
  EXPECT_EQ(f.device.stats().allocated_bytes[kAggregateStat].peak, 0);
  f.device.reset_accumulated_stats();
  EXPECT_EQ(f.device.stats().allocation[kAggregateStat].allocated, 0);
}

TEST(DeviceAllocator, AllocationContainingFindsInteriorAddressesOfLiveBlocksOnly) {
  Fixture f;
  f.device.create_pool({0, 2});
  Block* a = f.device.ordinary().allocate(1000, f.stream);
  Block* b = f.device.ordinary().allocate(3000, f.stream);  // same segment, after a
  Block* pooled = f.device.pool({0, 2})->allocate(5000, f.stream);
  void* base = nullptr;
  std::size_t bytes = 0;
  char* b_start = static_cast<char*>(CachingAllocator::address(b));
  ASSERT_TRUE(f.device.allocation_containing(b_start + 2999, &base, &bytes));
  EXPECT_EQ(base, b_start);
  EXPECT_EQ(bytes, 3000u);  // as requested, not rounded
  ASSERT_TRUE(f.device.allocation_containing(CachingAllocator::address(pooled), &base, &bytes));
  EXPECT_EQ(bytes, 5000u);
  ASSERT_TRUE(f.device.allocation_containing(CachingAllocator::address(a), &base, &bytes));
  EXPECT_EQ(bytes, 1000u);
  f.device.ordinary().free(a);  // freed: no longer an allocation
  EXPECT_FALSE(f.device.allocation_containing(b_start - 1024, &base, &bytes));
  int on_the_host = 0;
  EXPECT_FALSE(f.device.allocation_containing(&on_the_host, &base, &bytes));
  f.device.ordinary().free(b);
  CachingAllocator::owner(pooled).free(pooled);
}

TEST(DeviceAllocator, EmptyCacheKeepsThePoolsInUse) {
  Fixture f;
  f.device.create_pool({7, 0});
  CachingAllocator* pool = f.device.pool({7, 0});
  ASSERT_NE(pool, nullptr);
  pool->free(pool->allocate(1000, f.stream));
  f.device.ordinary().free(f.device.ordinary().allocate(1000, f.stream));
  f.device.empty_cache();
  EXPECT_EQ(f.device.ordinary().stats().segment[kAggregateStat].current, 0);
  EXPECT_EQ(pool->stats().segment[kAggregateStat].current, 1) << "a graph still replays into its pool";

  f.device.retain_pool({7, 0});
  EXPECT_EQ(f.device.pool_use_count({7, 0}), 2);
  f.device.release_pool({7, 0});
  EXPECT_EQ(pool->stats().segment[kAggregateStat].current, 1);
  f.device.release_pool({7, 0});  // the last user: its idle segments go back
  EXPECT_EQ(f.device.pool_use_count({7, 0}), 0);
  EXPECT_EQ(pool->stats().segment[kAggregateStat].current, 0);
  EXPECT_EQ(f.device.pool({7, 0}), pool) << "a pool outlives its users (live blocks point at it)";
}

TEST(DeviceAllocator, APoolInUseThatRunsOutTakesWhatTheOrdinaryCacheHoldsIdle) {
  Fixture f;  // 256 MiB of device memory
  f.device.ordinary().free(f.device.ordinary().allocate(200 * kMiB, f.stream));
  EXPECT_GE(f.device.ordinary().stats().reserved_bytes[kAggregateStat].current, 200 * kMiB);
  f.device.create_pool({0, 1});
  CachingAllocator* pool = f.device.pool({0, 1});
  Block* block = pool->allocate(150 * kMiB, f.stream);  // only after the ordinary cache went back
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(f.device.ordinary().stats().reserved_bytes[kAggregateStat].current, 0);
  pool->free(block);
  // The ordinary allocator, in turn, takes back what an unused pool holds idle.
  f.device.release_pool({0, 1});
  f.device.create_pool({0, 2});
  CachingAllocator* busy = f.device.pool({0, 2});
  busy->free(busy->allocate(100 * kMiB, f.stream));  // a pool in use keeps its cache
  EXPECT_THROW(f.device.ordinary().allocate(200 * kMiB, f.stream), Error);
  Block* small = f.device.ordinary().allocate(150 * kMiB, f.stream);
  EXPECT_GE(busy->stats().reserved_bytes[kAggregateStat].current, 100 * kMiB);
  f.device.ordinary().free(small);
}

TEST(DeviceAllocator, TheMemoryFractionLimitsTheOrdinaryCacheAndThePoolsTogether) {
  Fixture f;  // 256 MiB of device memory
  f.device.create_pool({0, 1});
  f.device.set_memory_fraction(0.5);  // 128 MiB for everything; reaches the pool made before
  CachingAllocator* pool = f.device.pool({0, 1});
  Block* pooled = pool->allocate(100 * kMiB, f.stream);
  EXPECT_THROW(f.device.ordinary().allocate(60 * kMiB, f.stream), Error);  // 100 + 60 > 128
  Block* fits = f.device.ordinary().allocate(20 * kMiB, f.stream);
  f.device.create_pool({0, 2});  // made after: limited too
  EXPECT_THROW(f.device.pool({0, 2})->allocate(20 * kMiB, f.stream), Error);
  f.device.ordinary().free(fits);
  pool->free(pooled);
}

TEST(DeviceAllocator, AUseOnOomPoolLendsItsCacheWhileItHasUsers) {
  Fixture f;
  f.device.set_memory_fraction(0.5);
  f.device.create_pool({0, 1}, nullptr, /*no_split=*/false, /*use_on_oom=*/true);
  f.device.create_pool({0, 2});  // not a lender
  CachingAllocator* lender = f.device.pool({0, 1});
  CachingAllocator* keeper = f.device.pool({0, 2});
  Block* lent = lender->allocate(60 * kMiB, f.stream);
  void* lent_at = CachingAllocator::address(lent);
  keeper->free(keeper->allocate(60 * kMiB, f.stream));
  lender->free(lent);
  // 120 MiB reserved by the pools: the ordinary allocator has no room, and
  // its own cache is empty; the lender's cached block serves the request.
  Block* borrowed = f.device.ordinary().allocate(40 * kMiB, f.stream);
  EXPECT_EQ(CachingAllocator::address(borrowed), lent_at);
  EXPECT_EQ(&CachingAllocator::owner(borrowed), lender);  // it stays the lender's
  EXPECT_THROW(f.device.ordinary().allocate(40 * kMiB, f.stream), Error);  // 20 MiB left; the keeper lends nothing
  CachingAllocator::owner(borrowed).free(borrowed);  // as the adaptor frees: by its owner
  EXPECT_EQ(lender->stats().allocated_bytes[kAggregateStat].current, 0);
  // A released pool lends nothing: it gave its idle segments back.
  f.device.release_pool({0, 1});
  EXPECT_EQ(lender->stats().reserved_bytes[kAggregateStat].current, 0);
  Block* own = f.device.ordinary().allocate(40 * kMiB, f.stream);
  EXPECT_EQ(&CachingAllocator::owner(own), &f.device.ordinary());
  f.device.ordinary().free(own);
}

// Segments from a source of the user's (a pluggable allocator), counted.
class CountingArena final : public vnpu::MemoryArena {
 public:
  void* map(std::size_t bytes, std::size_t alignment) override {
    maps += 1;
    return vnpu::host_arena()->map(bytes, alignment);
  }
  void unmap(void* ptr, std::size_t bytes) override {
    unmaps += 1;
    vnpu::host_arena()->unmap(ptr, bytes);
  }
  const char* name() const override { return "counting"; }
  int maps = 0, unmaps = 0;
};

TEST(DeviceAllocator, APoolGivenAnArenaTakesItsSegmentsFromItAndLeavesDeviceMemoryAlone) {
  Fixture f;
  auto arena = std::make_shared<CountingArena>();
  f.device.create_pool({0, 3}, arena);
  CachingAllocator* pool = f.device.pool({0, 3});
  Block* block = pool->allocate(3 * kMiB, f.stream);
  EXPECT_EQ(arena->maps, 1);
  EXPECT_EQ(f.memory.reserved(), 0u) << "the device's own memory is untouched";
  EXPECT_FALSE(f.memory.owns(CachingAllocator::address(block)));
  pool->free(block);
  f.device.release_pool({0, 3});  // the last user: the idle segment goes back through the arena
  EXPECT_EQ(arena->unmaps, 1);
}

std::vector<vnpu::PoolId> g_traced_pools;

void record_pool(vnpu::BlockTraceEvent, const void*, std::size_t, const vnpu::Stream&, const vnpu::PoolId& pool) {
  g_traced_pools.push_back(pool);  // this test's thread only: nothing else allocates meanwhile
}

TEST(DeviceAllocator, TraceEventsNameThePoolTheirAllocatorServes) {
  Fixture f;
  f.device.create_pool({0, 9});
  EXPECT_EQ(f.device.pool({0, 9})->pool_id(), (vnpu::PoolId{0, 9}));
  EXPECT_EQ(f.device.ordinary().pool_id(), (vnpu::PoolId{0, 0}));
  g_traced_pools.clear();
  vnpu::set_block_trace_hook(&record_pool);
  f.device.pool({0, 9})->free(f.device.pool({0, 9})->allocate(1000, f.stream));
  const std::size_t in_pool = g_traced_pools.size();
  f.device.ordinary().free(f.device.ordinary().allocate(1000, f.stream));
  vnpu::set_block_trace_hook(nullptr);
  // Snapshots name it too.
  const std::uintptr_t pool_segment = f.device.pool({0, 9})->snapshot().at(0).address;
  for (const auto& segment : f.device.snapshot()) {
    EXPECT_EQ(segment.pool, (segment.address == pool_segment ? vnpu::PoolId{0, 9} : vnpu::PoolId{0, 0}));
  }
  ASSERT_GT(in_pool, 0u);
  ASSERT_GT(g_traced_pools.size(), in_pool);
  for (std::size_t i = 0; i < g_traced_pools.size(); ++i) {
    EXPECT_EQ(g_traced_pools[i], (i < in_pool ? vnpu::PoolId{0, 9} : vnpu::PoolId{0, 0})) << i;
  }
}

TEST(DeviceAllocator, ANoSplitPoolGivesEachRequestASegmentOfItsOwn) {
  Fixture f;
  f.device.create_pool({0, 11}, nullptr, /*no_split=*/true);
  CachingAllocator* pool = f.device.pool({0, 11});
  Block* a = pool->allocate(4 * kMiB, f.stream);
  Block* b = pool->allocate(4 * kMiB, f.stream);
  Block* small = pool->allocate(1000, f.stream);
  const auto segments = pool->snapshot();
  ASSERT_EQ(segments.size(), 3u);
  for (const auto& segment : segments) {
    ASSERT_EQ(segment.blocks.size(), 1u);
    EXPECT_EQ(segment.blocks[0].size, segment.total_size);
  }
  pool->free(a);
  Block* again = pool->allocate(3 * kMiB, f.stream);  // the cached 4 MiB block, whole
  EXPECT_EQ(CachingAllocator::address(again), CachingAllocator::address(a));
  EXPECT_EQ(pool->snapshot().size(), 3u);
  for (Block* block : {again, b, small}) pool->free(block);
}

TEST(DeviceAllocator, PoolIdsAreCheckedAndUnique) {
  Fixture f;
  f.device.create_pool({0, 3});
  EXPECT_THROW(f.device.create_pool({0, 3}), Error);
  EXPECT_THROW(f.device.retain_pool({0, 4}), Error);
  EXPECT_EQ(f.device.pool({0, 4}), nullptr);
  EXPECT_EQ(f.device.pool_use_count({0, 4}), 0);
  f.device.release_pool({0, 4});  // unknown: nothing
}

TEST(DeviceAllocator, SetConfigReachesEveryAllocatorMadeSoFar) {
  Fixture f;
  f.device.create_pool({0, 1});
  f.device.ordinary();
  vnpu::AllocConfig config;
  config.garbage_collection_threshold = 0.25;
  config.per_process_memory_fraction = 0.75;
  f.device.set_config(config);
  EXPECT_DOUBLE_EQ(f.device.ordinary().config().garbage_collection_threshold, 0.25);
  EXPECT_DOUBLE_EQ(f.device.pool({0, 1})->config().garbage_collection_threshold, 0.25);
  EXPECT_DOUBLE_EQ(f.device.memory_fraction(), 0.75);
}

TEST(LiveBlocks, ABlockIsFoundByItsAddressFromAllocationToFree) {
  Fixture f;
  f.device.create_pool({0, 1});
  std::vector<Block*> blocks;
  for (int i = 0; i < 50; ++i) {
    blocks.push_back(f.device.ordinary().allocate(512 * (i + 1), f.stream));
    blocks.push_back(f.device.pool({0, 1})->allocate(512 * (i + 1), f.stream));
  }
  for (Block* block : blocks) EXPECT_EQ(CachingAllocator::live_block(CachingAllocator::address(block)), block);
  void* inside = static_cast<char*>(CachingAllocator::address(blocks[0])) + 256;
  EXPECT_EQ(CachingAllocator::live_block(inside), nullptr) << "only a block's start address names it";
  EXPECT_EQ(CachingAllocator::live_block(nullptr), nullptr);
  for (Block* block : blocks) {
    void* address = CachingAllocator::address(block);
    CachingAllocator::owner(block).free(block);
    EXPECT_EQ(CachingAllocator::live_block(address), nullptr);
  }
}

TEST(LiveBlocks, TakingABlockByAddressThenFreeingItIsAFree) {
  Fixture f;
  Block* a = f.device.ordinary().allocate(4096, f.stream);
  Block* b = f.device.ordinary().allocate(4096, f.stream);
  void* address = CachingAllocator::address(a);
  EXPECT_EQ(CachingAllocator::take_live_block(static_cast<char*>(address) + 512), nullptr);
  EXPECT_EQ(CachingAllocator::take_live_block(nullptr), nullptr);
  Block* taken = CachingAllocator::take_live_block(address);
  ASSERT_EQ(taken, a);
  EXPECT_EQ(CachingAllocator::live_block(address), nullptr) << "taken out of the registry";
  EXPECT_EQ(CachingAllocator::take_live_block(address), nullptr) << "only once";
  EXPECT_EQ(f.device.stats().allocation[kAggregateStat].current, 2) << "still allocated until free_taken";
  CachingAllocator::owner(taken).free_taken(taken);
  EXPECT_EQ(f.device.stats().allocation[kAggregateStat].current, 1);
  // The freed range serves the next request of its size (best fit, lowest address).
  Block* again = f.device.ordinary().allocate(4096, f.stream);
  EXPECT_EQ(CachingAllocator::address(again), address);
  f.device.ordinary().free(again);
  f.device.ordinary().free(b);
  EXPECT_EQ(f.device.stats().allocation[kAggregateStat].current, 0);
  EXPECT_EQ(f.device.stats().inactive_split[kAggregateStat].current, 0) << "merged back into one block";
}

TEST(LiveBlocks, ThreadsAllocatingAndFreeingByAddressAgree) {
  Fixture f;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&f, t] {
      for (int i = 0; i < 2000; ++i) {
        Block* block = f.device.ordinary().allocate(512 * (1 + (i + t) % 7), f.stream);
        void* address = CachingAllocator::address(block);
        if (i % 2 == 0) {
          Block* found = CachingAllocator::live_block(address);
          EXPECT_EQ(found, block);
          CachingAllocator::owner(found).free(found);
        } else {
          Block* taken = CachingAllocator::take_live_block(address);
          EXPECT_EQ(taken, block);
          CachingAllocator::owner(taken).free_taken(taken);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(f.device.stats().allocation[kAggregateStat].current, 0);
}

}  // namespace
