#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_helpers.h"
#include "vnpu/alloc_config.h"
#include "vnpu/caching_allocator.h"
#include "vnpu/device_memory.h"
#include "vnpu/error.h"
#include "vnpu/stream.h"

namespace {

using vnpu::AllocConfig;
using vnpu::AllocatorStats;
using vnpu::Block;
using vnpu::CachingAllocator;
using vnpu::DeviceMemory;
using vnpu::Error;
using vnpu::ErrorCode;
using vnpu::Stream;
using vnpu::kAggregateStat;
using vnpu::kLargePoolStat;
using vnpu::kSmallPoolStat;
using vnpu_test::Gate;

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * 1024;

std::uintptr_t addr(const Block* block) {
  return reinterpret_cast<std::uintptr_t>(CachingAllocator::address(block));
}

// A device with `capacity` bytes, two streams and an allocator over them.
// Members are destroyed in reverse order: the allocator first, then the
// streams (which drain their queues), then the memory.
struct Fixture {
  explicit Fixture(std::size_t capacity = 1024 * kMiB, AllocConfig config = {}, bool caching = true,
                   std::size_t padding = 0)
      : memory(0, capacity), allocator(memory, config, caching, padding) {}
  DeviceMemory memory;
  Stream s0{0, 0, 0, false};
  Stream s1{0, 1, 0, false};
  CachingAllocator allocator;

  AllocatorStats stats() const { return allocator.stats(); }
  std::int64_t allocated() const { return stats().allocated_bytes[kAggregateStat].current; }
  std::int64_t reserved() const { return stats().reserved_bytes[kAggregateStat].current; }
};

// Holds the stream's worker on a task until open() (or destruction).
class StreamBlocker {
 public:
  explicit StreamBlocker(Stream& stream) : stream_(stream) {
    stream_.enqueue("blocker", [gate = gate_] { gate->wait(); });
  }
  ~StreamBlocker() { open(); }
  void open() {
    gate_->open();
    stream_.synchronize();
  }

 private:
  Stream& stream_;
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
};

using vnpu_test::expect_error;

TEST(CachingAllocator, DoubleFreeIsAnInternalError) {
  Fixture f;
  Block* block = f.allocator.allocate(4 * kKiB, f.s0);
  Block* neighbour = f.allocator.allocate(4 * kKiB, f.s0);  // keeps `block` from merging
  f.allocator.free(block);
  // The block still exists (cached, unmerged), so the second free is
  // detected instead of driving the statistics negative.
  const Error e = expect_error([&] { f.allocator.free(block); });
  EXPECT_EQ(e.code(), ErrorCode::kInternal);
  EXPECT_NE(std::string(e.what()).find("double free"), std::string::npos) << e.what();
  EXPECT_EQ(f.stats().allocation[kAggregateStat].current, 1);
  f.allocator.free(neighbour);
}

TEST(CachingAllocator, RoundsToBlockSize) {
  Fixture f;
  EXPECT_EQ(f.allocator.round_size(1), 512u);
  EXPECT_EQ(f.allocator.round_size(512), 512u);
  EXPECT_EQ(f.allocator.round_size(513), 1024u);
  EXPECT_EQ(f.allocator.round_size(3 * kMiB + 1), 3 * kMiB + 512);
}

TEST(CachingAllocator, RoundsToPowerOfTwoDivisions) {
  AllocConfig config;
  config.roundup_power2_divisions.fill(4);
  Fixture f(1024 * kMiB, config);
  EXPECT_EQ(f.allocator.round_size(1000), 1024u);           // below 512 * 4: plain rounding
  EXPECT_EQ(f.allocator.round_size(4 * kMiB + 1), 5 * kMiB);  // steps of 1 MiB in [4, 8) MiB
  EXPECT_EQ(f.allocator.round_size(5 * kMiB + 7), 6 * kMiB);
  EXPECT_EQ(f.allocator.round_size(8 * kMiB), 8 * kMiB);
}

TEST(CachingAllocator, ZeroBytesGiveNoBlock) {
  Fixture f;
  EXPECT_EQ(f.allocator.allocate(0, f.s0), nullptr);
  f.allocator.free(nullptr);
  EXPECT_EQ(f.reserved(), 0);
}

TEST(CachingAllocator, SmallRequestsArePackedIntoOneSegment) {
  Fixture f;
  std::vector<Block*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(f.allocator.allocate(1000, f.s0));
  const AllocatorStats s = f.stats();
  EXPECT_EQ(s.segment[kSmallPoolStat].current, 1);
  EXPECT_EQ(s.reserved_bytes[kSmallPoolStat].current, static_cast<std::int64_t>(CachingAllocator::kSmallBuffer));
  EXPECT_EQ(s.allocated_bytes[kAggregateStat].current, 8 * 1024);
  EXPECT_EQ(s.requested_bytes[kAggregateStat].current, 8 * 1000);
  EXPECT_EQ(s.segment[kLargePoolStat].current, 0);
  for (int i = 1; i < 8; ++i) EXPECT_EQ(addr(blocks[i]), addr(blocks[i - 1]) + 1024);
  for (Block* b : blocks) f.allocator.free(b);
  EXPECT_EQ(f.allocated(), 0);
}

TEST(CachingAllocator, LargeSegmentSizeOptionSizesMidRangeSegments) {
  AllocConfig config;
  config.large_segment_size_bytes = 50 * kMiB;
  Fixture f(1024 * kMiB, config);
  Block* medium = f.allocator.allocate(5 * kMiB, f.s0);  // (1 MiB, 10 MiB): a 50 MiB segment
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(50 * kMiB));
  Block* large = f.allocator.allocate(60 * kMiB, f.s0);  // 10 MiB and up: its own size, as before
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(110 * kMiB));
  f.allocator.free(medium);
  f.allocator.free(large);
}

TEST(CachingAllocator, LargeSegmentSizes) {
  Fixture f;
  Block* medium = f.allocator.allocate(3 * kMiB, f.s0);  // shares a 20 MiB segment
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(CachingAllocator::kLargeBuffer));
  Block* medium2 = f.allocator.allocate(3 * kMiB, f.s0);
  EXPECT_EQ(addr(medium2), addr(medium) + 3 * kMiB);
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(CachingAllocator::kLargeBuffer));
  // Too big for the 14 MiB left: a segment of its own, rounded to 2 MiB.
  Block* big = f.allocator.allocate(15 * kMiB, f.s0);
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(CachingAllocator::kLargeBuffer + 16 * kMiB));
  EXPECT_EQ(f.stats().segment[kLargePoolStat].current, 2);
  for (Block* b : {medium, medium2, big}) f.allocator.free(b);
}

TEST(CachingAllocator, FreedBlockIsReusedOnItsStream) {
  Fixture f;
  Block* a = f.allocator.allocate(4 * kMiB, f.s0);
  const auto where = addr(a);
  f.allocator.free(a);
  Block* b = f.allocator.allocate(4 * kMiB, f.s0);
  EXPECT_EQ(addr(b), where);
  EXPECT_EQ(f.stats().num_device_alloc, 1);
  f.allocator.free(b);
}

TEST(CachingAllocator, FreedBlockIsNotHandedToAnotherStream) {
  Fixture f;
  Block* a = f.allocator.allocate(4 * kMiB, f.s0);
  const auto where = addr(a);
  f.allocator.free(a);
  Block* b = f.allocator.allocate(4 * kMiB, f.s1);
  EXPECT_NE(addr(b), where);
  EXPECT_EQ(f.stats().num_device_alloc, 2);
  f.allocator.free(b);
}

TEST(CachingAllocator, SplitBlocksMergeBackIntoAnIdleSegment) {
  Fixture f;
  Block* a = f.allocator.allocate(4 * kMiB, f.s0);
  Block* b = f.allocator.allocate(4 * kMiB, f.s0);
  Block* c = f.allocator.allocate(4 * kMiB, f.s0);
  AllocatorStats s = f.stats();
  EXPECT_EQ(s.segment[kAggregateStat].current, 1);
  EXPECT_EQ(s.inactive_split[kAggregateStat].current, 1);  // the 8 MiB tail
  EXPECT_EQ(s.inactive_split_bytes[kAggregateStat].current, static_cast<std::int64_t>(8 * kMiB));

  f.allocator.free(b);  // a hole between a and c
  s = f.stats();
  EXPECT_EQ(s.inactive_split[kAggregateStat].current, 2);
  EXPECT_EQ(s.inactive_split_bytes[kAggregateStat].current, static_cast<std::int64_t>(12 * kMiB));

  f.allocator.free(c);  // merges with the hole and the tail
  s = f.stats();
  EXPECT_EQ(s.inactive_split[kAggregateStat].current, 1);
  EXPECT_EQ(s.inactive_split_bytes[kAggregateStat].current, static_cast<std::int64_t>(16 * kMiB));

  f.allocator.free(a);  // the whole segment is one free block again
  s = f.stats();
  EXPECT_EQ(s.inactive_split[kAggregateStat].current, 0);
  EXPECT_EQ(s.inactive_split_bytes[kAggregateStat].current, 0);
  const auto segments = f.allocator.snapshot();
  ASSERT_EQ(segments.size(), 1u);
  ASSERT_EQ(segments[0].blocks.size(), 1u);
  EXPECT_EQ(segments[0].blocks[0].size, CachingAllocator::kLargeBuffer);

  // A request for the whole segment fits without a new reservation.
  Block* whole = f.allocator.allocate(20 * kMiB, f.s0);
  EXPECT_EQ(addr(whole), segments[0].address);
  EXPECT_EQ(f.stats().num_device_alloc, 1);
  f.allocator.free(whole);
  f.allocator.empty_cache();
  EXPECT_EQ(f.reserved(), 0);
  EXPECT_EQ(f.memory.reserved(), 0u);
}

TEST(CachingAllocator, BestFitTakesTheSmallestBlockThatFits) {
  Fixture f;
  Block* a = f.allocator.allocate(16 * kMiB, f.s0);
  Block* b = f.allocator.allocate(12 * kMiB, f.s0);
  Block* c = f.allocator.allocate(14 * kMiB, f.s0);
  const auto at12 = addr(b), at14 = addr(c), at16 = addr(a);
  for (Block* x : {a, b, c}) f.allocator.free(x);
  Block* d = f.allocator.allocate(13 * kMiB, f.s0);
  EXPECT_EQ(addr(d), at14);
  Block* e = f.allocator.allocate(11 * kMiB, f.s0);
  EXPECT_EQ(addr(e), at12);
  Block* g = f.allocator.allocate(11 * kMiB, f.s0);
  EXPECT_EQ(addr(g), at16);
  EXPECT_EQ(f.stats().num_device_alloc, 3);
  for (Block* x : {d, e, g}) f.allocator.free(x);
}

TEST(CachingAllocator, OutgrownIdleSegmentsAreReleasedBeforeGrowing) {
  Fixture f;
  Block* a = f.allocator.allocate(12 * kMiB, f.s0);
  Block* keep = f.allocator.allocate(10 * kMiB, f.s1);  // other stream: not this pool's business
  f.allocator.free(a);
  f.allocator.free(keep);
  Block* b = f.allocator.allocate(14 * kMiB, f.s0);  // 12 MiB cannot serve it: given back
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(24 * kMiB));
  EXPECT_EQ(f.stats().num_device_free, 1);
  f.allocator.free(b);
  Block* c = f.allocator.allocate(12 * kMiB, f.s0);  // served by the 14 MiB segment
  EXPECT_EQ(f.stats().num_device_alloc, 3);
  f.allocator.free(c);
}

TEST(CachingAllocator, OutgrownSegmentsStillReadByQueuedWorkAreKept) {
  Fixture f;
  Block* a = f.allocator.allocate(12 * kMiB, f.s0);
  StreamBlocker blocker(f.s0);
  f.allocator.free(a);
  Block* b = f.allocator.allocate(14 * kMiB, f.s0);
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(26 * kMiB));
  EXPECT_EQ(f.stats().num_device_free, 0);
  f.allocator.free(b);
}

TEST(CachingAllocator, MaxSplitSizeKeepsOversizeBlocksWhole) {
  AllocConfig config;
  config.max_split_size_bytes = 40 * kMiB;
  Fixture f(1024 * kMiB, config);
  Block* big = f.allocator.allocate(64 * kMiB, f.s0);
  EXPECT_EQ(f.stats().oversize_allocations.current, 1);
  EXPECT_EQ(f.stats().oversize_segments.current, 1);
  EXPECT_EQ(f.stats().max_split_size, static_cast<std::int64_t>(40 * kMiB));
  const auto where = addr(big);
  f.allocator.free(big);
  EXPECT_EQ(f.stats().oversize_allocations.current, 0);

  Block* small = f.allocator.allocate(12 * kMiB, f.s0);  // not carved out of the 64 MiB block
  EXPECT_NE(addr(small), where);
  Block* near = f.allocator.allocate(50 * kMiB, f.s0);  // oversize, within kLargeBuffer: reused whole
  EXPECT_EQ(addr(near), where);
  const auto segments = f.allocator.snapshot();
  for (const auto& segment : segments) EXPECT_EQ(segment.blocks.size(), 1u);
  for (Block* x : {small, near}) f.allocator.free(x);
}

TEST(CachingAllocator, RequestPaddingIsAddedBeforeRounding) {
  Fixture f(1024 * kMiB, {}, true, /*padding=*/32);
  EXPECT_EQ(f.allocator.round_size(1), 512u);
  EXPECT_EQ(f.allocator.round_size(480), 512u);
  EXPECT_EQ(f.allocator.round_size(481), 1024u);
  EXPECT_EQ(f.allocator.round_size(512), 1024u);
  EXPECT_EQ(f.allocator.round_size(160 * kMiB), 160 * kMiB + 512);
  Block* b = f.allocator.allocate(512, f.s0);
  EXPECT_EQ(f.allocated(), 1024);
  EXPECT_EQ(f.stats().requested_bytes[kAggregateStat].current, 512);  // what was asked for
  f.allocator.free(b);
}

TEST(CachingAllocator, MaxNonSplitRoundingBoundsTheWasteOfAWholeOversizeBlock) {
  for (const std::size_t rounding_mib : {20, 30}) {
    AllocConfig config;
    config.max_split_size_bytes = 50 * kMiB;
    config.max_non_split_rounding_bytes = rounding_mib * kMiB;
    Fixture f(1024 * kMiB, config);
    Block* big = f.allocator.allocate(100 * kMiB, f.s0);
    const auto where = addr(big);
    f.allocator.free(big);
    // 25 MiB would be wasted: within a 30 MiB allowance, not within 20 MiB.
    Block* smaller = f.allocator.allocate(75 * kMiB, f.s0);
    EXPECT_EQ(addr(smaller) == where, rounding_mib == 30) << rounding_mib;
    f.allocator.free(smaller);
  }
}

TEST(CachingAllocator, ANewSplitLimitRecountsTheOversizeStatistics) {
  AllocConfig config;
  config.max_split_size_bytes = 40 * kMiB;
  Fixture f(1024 * kMiB, config);
  Block* big = f.allocator.allocate(30 * kMiB, f.s0);
  EXPECT_EQ(f.stats().oversize_allocations.current, 0);
  config.max_split_size_bytes = 25 * kMiB;
  f.allocator.set_config(config);
  EXPECT_EQ(f.stats().oversize_allocations.current, 1);  // held now, under the new limit
  EXPECT_EQ(f.stats().oversize_segments.current, 1);
  f.allocator.free(big);
  EXPECT_EQ(f.stats().oversize_allocations.current, 0);  // never below zero
  f.allocator.empty_cache();
  EXPECT_EQ(f.stats().oversize_segments.current, 0);
}

TEST(CachingAllocator, UnlimitedSplitSizeIsReportedAsMinusOne) {
  Fixture f;
  EXPECT_EQ(f.stats().max_split_size, -1);
}

TEST(CachingAllocator, RecordStreamDefersReuseUntilTheUserStreamPasses) {
  Fixture f;
  Block* a = f.allocator.allocate(4 * kMiB, f.s0);
  const auto where = addr(a);
  auto blocker = std::make_unique<StreamBlocker>(f.s1);
  f.allocator.record_stream(a, f.s1);
  f.allocator.record_stream(a, f.s1);  // recorded once
  f.allocator.record_stream(a, f.s0);  // its own stream: nothing to do
  // Work on s1 queued before the free still reads the block.
  f.s1.enqueue("reader", [] {});
  f.allocator.free(a);
  AllocatorStats s = f.stats();
  EXPECT_EQ(s.allocated_bytes[kAggregateStat].current, 0);
  EXPECT_EQ(s.active_bytes[kAggregateStat].current, static_cast<std::int64_t>(4 * kMiB));
  EXPECT_TRUE(f.allocator.snapshot()[0].blocks[0].active);

  Block* b = f.allocator.allocate(4 * kMiB, f.s0);
  EXPECT_NE(addr(b), where) << "handed out while s1 may still read it";
  blocker->open();
  Block* c = f.allocator.allocate(4 * kMiB, f.s0);
  EXPECT_EQ(addr(c), where);
  s = f.stats();
  EXPECT_EQ(s.active_bytes[kAggregateStat].current, static_cast<std::int64_t>(8 * kMiB));
  for (Block* x : {b, c}) f.allocator.free(x);
}

TEST(CachingAllocator, EmptyCacheWaitsForWorkQueuedBeforeTheFree) {
  Fixture f;
  Block* a = f.allocator.allocate(4 * kMiB, f.s0);
  StreamBlocker blocker(f.s0);
  f.allocator.free(a);  // the blocked task may still use it
  std::atomic<bool> done{false};
  std::thread emptier([&] {
    f.allocator.empty_cache();
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load());
  EXPECT_EQ(f.memory.reserved(), CachingAllocator::kLargeBuffer);
  blocker.open();
  emptier.join();
  EXPECT_EQ(f.reserved(), 0);
  EXPECT_EQ(f.memory.reserved(), 0u);
  EXPECT_EQ(f.stats().num_sync_all_streams, 1);
}

TEST(CachingAllocator, EmptyCacheKeepsSegmentsInUse) {
  Fixture f;
  Block* a = f.allocator.allocate(1000, f.s0);
  Block* b = f.allocator.allocate(1000, f.s0);
  f.allocator.free(b);
  f.allocator.empty_cache();
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(CachingAllocator::kSmallBuffer));
  f.allocator.free(a);
  f.allocator.empty_cache();
  EXPECT_EQ(f.reserved(), 0);
}

TEST(CachingAllocator, OutOfMemoryMessageAndRecovery) {
  Fixture f(64 * kMiB);
  std::vector<Block*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(f.allocator.allocate(12 * kMiB, f.s0));
  const Error e = expect_error([&] { f.allocator.allocate(40 * kMiB, f.s0); });
  EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
  EXPECT_EQ(std::string(e.what()),
            "NPU out of memory. Tried to allocate 40.00 MiB (NPU 0; 64.00 MiB total capacity; "
            "48.00 MiB already allocated; 48.00 MiB current active; 16.00 MiB free; "
            "48.00 MiB reserved in total by PyTorch).If reserved memory is >> allocated memory try "
            "setting max_split_size_mb to avoid fragmentation.");
  AllocatorStats s = f.stats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.allocated_bytes[kAggregateStat].current, static_cast<std::int64_t>(48 * kMiB));
  for (Block* b : blocks) f.allocator.free(b);
  Block* big = f.allocator.allocate(40 * kMiB, f.s0);  // the cache is released for it
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(40 * kMiB));
  f.allocator.free(big);
}

TEST(CachingAllocator, RequestsOfOneExbibyteOrMoreAreRefusedUpFront) {
  Fixture f(64 * kMiB);
  for (std::size_t bytes : {std::size_t{1} << 60, ~std::size_t{0}}) {
    const Error e = expect_error([&] { f.allocator.allocate(bytes, f.s0); });
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_STREQ(e.what(), "NPU out of memory. Tried to allocate more than 1EB memory.");
  }
  EXPECT_EQ(f.stats().num_ooms, 0);  // as in torch_npu: refused before the allocator counts anything
  Block* ok = f.allocator.allocate(kMiB, f.s0);
  EXPECT_NE(ok, nullptr);
  f.allocator.free(ok);
}

TEST(CachingAllocator, MediumRequestFallsBackToAnExactSegment) {
  Fixture f(8 * kMiB);
  Block* a = f.allocator.allocate(3 * kMiB, f.s0);  // no room for 20 MiB
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(3 * kMiB));
  const Error e = expect_error([&] { f.allocator.allocate(6 * kMiB, f.s0); });
  EXPECT_NE(std::string(e.what()).find("Tried to allocate 6.00 MiB (NPU 0; 8.00 MiB total capacity"),
            std::string::npos)
      << e.what();
  f.allocator.free(a);
}

TEST(CachingAllocator, OutOfMemoryWaitsForCachedBlocksStillInUse) {
  Fixture f(64 * kMiB);
  Block* a = f.allocator.allocate(40 * kMiB, f.s0);
  auto blocker = std::make_unique<StreamBlocker>(f.s0);
  f.allocator.free(a);  // cached, but queued work may read it
  std::atomic<bool> done{false};
  std::thread other([&] {
    Block* b = f.allocator.allocate(50 * kMiB, f.s1);  // needs the 40 MiB back
    done = true;
    f.allocator.free(b);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load());
  blocker->open();
  other.join();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(f.stats().num_ooms, 0);
}

TEST(CachingAllocator, MemoryFractionLimitsReservations) {
  Fixture f(100 * kMiB);
  f.allocator.set_memory_fraction(0.5);
  EXPECT_DOUBLE_EQ(f.allocator.memory_fraction(), 0.5);
  Block* a = f.allocator.allocate(40 * kMiB, f.s0);
  const Error e = expect_error([&] { f.allocator.allocate(12 * kMiB, f.s0); });
  EXPECT_NE(std::string(e.what()).find("60.00 MiB free; 50.00 MiB allowed; 40.00 MiB reserved"),
            std::string::npos)
      << e.what();
  f.allocator.set_memory_fraction(1.0);
  Block* b = f.allocator.allocate(12 * kMiB, f.s0);
  for (Block* x : {a, b}) f.allocator.free(x);
}

TEST(CachingAllocator, GarbageCollectionReleasesIdleSegmentsBeforeGrowing) {
  AllocConfig config;
  config.garbage_collection_threshold = 0.3;
  Fixture f(100 * kMiB, config);
  Block* a = f.allocator.allocate(40 * kMiB, f.s0);
  f.allocator.free(a);
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(40 * kMiB));  // cached
  Block* b = f.allocator.allocate(12 * kMiB, f.s1);  // other stream: needs a segment
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(12 * kMiB));
  EXPECT_EQ(f.stats().num_device_free, 1);
  EXPECT_EQ(f.stats().num_ooms, 0);
  f.allocator.free(b);
}

TEST(CachingAllocator, WithoutCachingBlocksGoBackOnceTheirStreamPasses) {
  Fixture f(1024 * kMiB, {}, /*caching=*/false);
  Block* a = f.allocator.allocate(1000, f.s0);
  EXPECT_EQ(f.reserved(), 1024);  // its own segment, no packing
  f.allocator.free(a);
  EXPECT_EQ(f.reserved(), 0);

  Block* b = f.allocator.allocate(3 * kMiB, f.s0);
  auto blocker = std::make_unique<StreamBlocker>(f.s0);
  f.allocator.free(b);
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(3 * kMiB));  // queued work may read it
  blocker->open();
  Block* c = f.allocator.allocate(1000, f.s0);
  EXPECT_EQ(f.reserved(), 1024);
  f.allocator.free(c);
}

TEST(CachingAllocator, FreeFromAStreamWorkerDoesNotDeadlock) {
  Fixture f;
  for (int i = 0; i < 200; ++i) {
    Block* a = f.allocator.allocate(1000 + i, f.s0);
    f.s0.enqueue("free", [&f, a] { f.allocator.free(a); });
    Block* b = f.allocator.allocate(2 * kMiB, f.s0);
    f.allocator.free(b);
  }
  f.s0.synchronize();
  EXPECT_EQ(f.allocated(), 0);
}

TEST(CachingAllocator, WorkspaceReusesATaskScratchAtOnceWhileWorkIsQueued) {
  Fixture f;
  StreamBlocker blocker(f.s0);
  std::vector<std::uintptr_t> got;
  Stream* running = nullptr;
  for (int i = 0; i < 3; ++i) {
    f.s0.enqueue("task", [&] {
      running = Stream::running_on_this_thread();
      Block* scratch = f.allocator.allocate_for_running_task(4 * kMiB, f.s0);
      got.push_back(addr(scratch));
      f.allocator.free(scratch);
    });
  }
  f.s0.enqueue("later", [] {});
  blocker.open();
  EXPECT_EQ(running, &f.s0);
  EXPECT_EQ(Stream::running_on_this_thread(), nullptr);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1], got[0]);  // freed by the previous task: reused at once
  EXPECT_EQ(got[2], got[0]);
  EXPECT_EQ(f.stats().num_device_alloc, 1);
  EXPECT_EQ(f.allocated(), 0);
  // The caller of run_on_caller runs the stream's task too.
  f.s0.run_on_caller("caller", [&] { running = Stream::running_on_this_thread(); });
  EXPECT_EQ(running, &f.s0);
}

TEST(CachingAllocator, WorkspaceOutOfMemoryThrowsInsteadOfWaiting) {
  Fixture f(8 * kMiB);
  Block* held = f.allocator.allocate_for_running_task(8 * kMiB, f.s0);
  const Error e = expect_error([&] { f.allocator.allocate_for_running_task(8 * kMiB, f.s0); });
  EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
  f.allocator.free(held);
  Block* again = f.allocator.allocate_for_running_task(8 * kMiB, f.s0);
  EXPECT_EQ(addr(again), addr(held));
  f.allocator.free(again);
}

TEST(CachingAllocator, ResetPeakAndAccumulatedStats) {
  Fixture f;
  Block* a = f.allocator.allocate(8 * kMiB, f.s0);
  f.allocator.free(a);
  AllocatorStats s = f.stats();
  EXPECT_EQ(s.allocated_bytes[kAggregateStat].peak, static_cast<std::int64_t>(8 * kMiB));
  EXPECT_EQ(s.allocated_bytes[kAggregateStat].allocated, static_cast<std::int64_t>(8 * kMiB));
  EXPECT_EQ(s.allocated_bytes[kAggregateStat].freed, static_cast<std::int64_t>(8 * kMiB));
  EXPECT_EQ(s.allocation[kLargePoolStat].allocated, 1);
  f.allocator.reset_peak_stats();
  s = f.stats();
  EXPECT_EQ(s.allocated_bytes[kAggregateStat].peak, 0);
  EXPECT_EQ(s.reserved_bytes[kAggregateStat].peak, static_cast<std::int64_t>(20 * kMiB));
  f.allocator.reset_accumulated_stats();
  s = f.stats();
  EXPECT_EQ(s.allocated_bytes[kAggregateStat].allocated, 0);
  EXPECT_EQ(s.num_device_alloc, 0);
  EXPECT_EQ(s.reserved_bytes[kAggregateStat].current, static_cast<std::int64_t>(20 * kMiB));
}

// Checks every statistic against a recount from the snapshot and from the
// caller's own record of live blocks.
void expect_consistent(const Fixture& f, const std::map<Block*, std::size_t>& live) {
  const AllocatorStats s = f.stats();
  std::int64_t requested = 0, allocated = 0;
  for (const auto& [block, bytes] : live) {
    requested += static_cast<std::int64_t>(bytes);
    allocated += static_cast<std::int64_t>(f.allocator.round_size(bytes));
  }
  EXPECT_EQ(s.requested_bytes[kAggregateStat].current, requested);
  EXPECT_GE(s.allocated_bytes[kAggregateStat].current, allocated);  // a block may exceed its rounding
  EXPECT_EQ(s.allocation[kAggregateStat].current, static_cast<std::int64_t>(live.size()));

  std::int64_t reserved = 0, seen_allocated = 0, inactive_split = 0, inactive_split_bytes = 0;
  for (const auto& segment : f.allocator.snapshot()) {
    reserved += static_cast<std::int64_t>(segment.total_size);
    std::uintptr_t next = segment.address;
    for (const auto& block : segment.blocks) {
      EXPECT_EQ(block.address, next) << "blocks must tile their segment";
      next += block.size;
      if (block.allocated) seen_allocated += static_cast<std::int64_t>(block.size);
      if (!block.active && segment.blocks.size() > 1) {
        inactive_split += 1;
        inactive_split_bytes += static_cast<std::int64_t>(block.size);
      }
    }
  }
  EXPECT_EQ(s.reserved_bytes[kAggregateStat].current, reserved);
  EXPECT_EQ(s.allocated_bytes[kAggregateStat].current, seen_allocated);
  EXPECT_EQ(s.inactive_split[kAggregateStat].current, inactive_split);
  EXPECT_EQ(s.inactive_split_bytes[kAggregateStat].current, inactive_split_bytes);
  EXPECT_EQ(s.reserved_bytes[kAggregateStat].current,
            s.reserved_bytes[kSmallPoolStat].current + s.reserved_bytes[kLargePoolStat].current);
  EXPECT_EQ(static_cast<std::uint64_t>(reserved), f.memory.reserved());
}

TEST(CachingAllocator, StatsMatchARecountUnderRandomTraffic) {
  AllocConfig config;
  config.max_split_size_bytes = 32 * kMiB;
  Fixture f(2048 * kMiB, config);
  std::mt19937 rng(42);
  const std::size_t sizes[] = {1, 700, 4096, 100 * kKiB, kMiB, kMiB + 1, 3 * kMiB, 9 * kMiB, 24 * kMiB, 48 * kMiB};
  std::map<Block*, std::size_t> live;
  for (int step = 0; step < 3000; ++step) {
    if (live.size() < 48 && (live.empty() || rng() % 3 != 0)) {
      const std::size_t bytes = sizes[rng() % std::size(sizes)] + rng() % 512;
      live[f.allocator.allocate(bytes, rng() % 4 == 0 ? f.s1 : f.s0)] = bytes;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      f.allocator.free(it->first);
      live.erase(it);
    }
    if (step % 500 == 0) expect_consistent(f, live);
  }
  expect_consistent(f, live);
  for (const auto& [block, bytes] : live) f.allocator.free(block);
  live.clear();
  expect_consistent(f, live);
  f.allocator.empty_cache();
  EXPECT_EQ(f.reserved(), 0);
  EXPECT_EQ(f.memory.reserved(), 0u);
}

TEST(CachingAllocator, ConcurrentThreadsAndStreams) {
  Fixture f(4096 * kMiB);
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < kThreads; ++i) streams.push_back(std::make_unique<Stream>(0, 2 + i, 0, false));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&f, &streams, t] {
      std::mt19937 rng(t);
      Stream& mine = *streams[t];
      Stream& other = *streams[(t + 1) % kThreads];
      std::vector<Block*> held;
      for (int i = 0; i < 2000; ++i) {
        const std::size_t bytes = (rng() % 2 == 0) ? 1 + rng() % (64 * kKiB) : kMiB + rng() % (12 * kMiB);
        Block* b = f.allocator.allocate(bytes, mine);
        // Write the whole block: ASan would catch overlapping hand-outs as
        // corruption below, TSan as races with the worker.
        auto* p = static_cast<unsigned char*>(CachingAllocator::address(b));
        p[0] = static_cast<unsigned char>(t);
        p[bytes - 1] = static_cast<unsigned char>(t);
        if (i % 7 == 0) f.allocator.record_stream(b, other);
        if (i % 5 == 0) {
          // Let the stream worker free it, as when a task holds the last reference.
          mine.enqueue("free", [&f, b, p, bytes, t] {
            EXPECT_EQ(p[0], static_cast<unsigned char>(t));
            EXPECT_EQ(p[bytes - 1], static_cast<unsigned char>(t));
            f.allocator.free(b);
          });
        } else {
          held.push_back(b);
        }
        if (held.size() > 16) {
          f.allocator.free(held.front());
          held.erase(held.begin());
        }
      }
      for (Block* b : held) f.allocator.free(b);
      mine.synchronize();
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& stream : streams) stream->synchronize();
  f.s0.synchronize();
  EXPECT_EQ(f.allocated(), 0);
  f.allocator.empty_cache();
  EXPECT_EQ(f.reserved(), 0);
}

TEST(CachingAllocator, DestructorReturnsEverySegment) {
  DeviceMemory memory(0, 1024 * kMiB);
  Stream stream(0, 0, 0, false);
  {
    CachingAllocator allocator(memory, {});
    allocator.allocate(1000, stream);   // never freed: the allocator takes it back
    Block* b = allocator.allocate(30 * kMiB, stream);
    allocator.free(b);
    EXPECT_GT(memory.reserved(), 0u);
  }
  EXPECT_EQ(memory.reserved(), 0u);
}

TEST(FormatSize, MatchesTorch) {
  EXPECT_EQ(vnpu::format_size(0), "0 bytes");
  EXPECT_EQ(vnpu::format_size(1024), "1024 bytes");
  EXPECT_EQ(vnpu::format_size(1536), "1.50 KiB");
  EXPECT_EQ(vnpu::format_size(kMiB), "1024.00 KiB");
  EXPECT_EQ(vnpu::format_size(20 * kMiB), "20.00 MiB");
  EXPECT_EQ(vnpu::format_size(64ull * 1024 * kMiB), "64.00 GiB");
}


// What the block trace hook saw, in order (the hook is process-wide).
struct TracedBlock {
  vnpu::BlockTraceEvent event;
  std::uintptr_t address;
  std::size_t bytes;
  int stream_index;
};
std::mutex g_traced_mutex;
std::vector<TracedBlock> g_traced;

void record_traced_block(vnpu::BlockTraceEvent event, const void* address, std::size_t bytes,
                         const Stream& stream, const vnpu::PoolId& /*pool*/) {
  std::lock_guard<std::mutex> lock(g_traced_mutex);
  g_traced.push_back({event, reinterpret_cast<std::uintptr_t>(address), bytes, stream.stream_index()});
}

std::vector<TracedBlock> take_traced() {
  std::lock_guard<std::mutex> lock(g_traced_mutex);
  return std::exchange(g_traced, {});
}

TEST(CachingAllocator, BlockTraceReportsHandOutAndReturnAfterRecordStreamUsersPass) {
  using vnpu::BlockTraceEvent;
  Fixture f;
  take_traced();
  vnpu::set_block_trace_hook(&record_traced_block);
  Block* a = f.allocator.allocate(4 * kMiB, f.s0);
  Block* plain = f.allocator.allocate(4 * kKiB, f.s0);
  auto blocker = std::make_unique<StreamBlocker>(f.s1);
  f.allocator.record_stream(a, f.s1);
  f.allocator.free(a);
  f.allocator.free(plain);  // no record_stream user: back at once
  std::vector<TracedBlock> seen = take_traced();
  std::vector<BlockTraceEvent> events;
  for (const TracedBlock& t : seen) events.push_back(t.event);
  ASSERT_EQ(events, (std::vector<BlockTraceEvent>{
                        BlockTraceEvent::kSegmentReserved, BlockTraceEvent::kHandedOut,  // a, in a new segment
                        BlockTraceEvent::kSegmentReserved, BlockTraceEvent::kHandedOut,  // plain, in a small one
                        BlockTraceEvent::kFreeRequested,                                 // a: s1 still runs
                        BlockTraceEvent::kFreeRequested, BlockTraceEvent::kReturned}));  // plain
  EXPECT_EQ(seen[0].address, addr(a)) << "the segment starts with the block";
  EXPECT_GE(seen[0].bytes, 4 * kMiB);
  EXPECT_EQ(seen[1].address, addr(a));
  EXPECT_EQ(seen[1].bytes, 4 * kMiB);
  EXPECT_EQ(seen[1].stream_index, 0);
  EXPECT_EQ(seen[4].address, addr(a));
  EXPECT_EQ(seen[6].address, seen[3].address) << "the plain block comes back at its free";

  blocker->open();  // s1 passes the free: the next allocation takes `a` back
  Block* b = f.allocator.allocate(4 * kMiB, f.s0);
  seen = take_traced();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].event, BlockTraceEvent::kReturned);
  EXPECT_EQ(seen[0].address, seen[1].address);
  EXPECT_EQ(seen[1].event, BlockTraceEvent::kHandedOut);
  EXPECT_EQ(seen[1].address, addr(b));
  f.allocator.free(b);
  f.allocator.empty_cache();  // both segments go back to device memory
  seen = take_traced();
  vnpu::set_block_trace_hook(nullptr);
  int released = 0;
  for (const TracedBlock& t : seen) released += t.event == BlockTraceEvent::kSegmentReleased;
  EXPECT_EQ(released, 2);
  Block* c = f.allocator.allocate(4 * kKiB, f.s0);
  f.allocator.free(c);
  EXPECT_TRUE(take_traced().empty()) << "no hook, no calls";
}

}  // namespace

// Note [Held blocks]: a small block freed directly is held back unmerged for
// the next request of its size; everything else sees it back in its pool.
namespace held {

// What the snapshot says the inactive-split statistics must be: the free
// blocks of segments that are split.
std::pair<std::int64_t, std::int64_t> inactive_split_of(const std::vector<vnpu::SegmentInfo>& segments) {
  std::int64_t count = 0, bytes = 0;
  for (const auto& segment : segments) {
    if (segment.blocks.size() < 2) continue;
    for (const auto& block : segment.blocks) {
      if (block.active) continue;
      count += 1;
      bytes += static_cast<std::int64_t>(block.size);
    }
  }
  return {count, bytes};
}

}  // namespace held

TEST(CachingAllocatorHeldBlocks, TheNextRequestOfItsSizeGetsTheSameBlock) {
  Fixture f;
  Block* a = f.allocator.allocate(4 * kKiB, f.s0);
  Block* b = f.allocator.allocate(4 * kKiB, f.s0);
  const auto a_addr = addr(a);
  f.allocator.free(a);
  Block* c = f.allocator.allocate(4 * kKiB, f.s0);
  EXPECT_EQ(addr(c), a_addr);
  const AllocatorStats s = f.stats();
  EXPECT_EQ(s.allocation[kAggregateStat].current, 2);
  EXPECT_EQ(s.allocation[kAggregateStat].allocated, 3);
  EXPECT_EQ(s.allocation[kAggregateStat].freed, 1);
  EXPECT_EQ(s.active_bytes[kAggregateStat].current, static_cast<std::int64_t>(8 * kKiB));
  EXPECT_EQ(s.inactive_split[kAggregateStat].current, 1);  // the segment's rest
  EXPECT_EQ(s.inactive_split_bytes[kAggregateStat].current, static_cast<std::int64_t>(2 * kMiB - 8 * kKiB));
  f.allocator.free(b);
  f.allocator.free(c);
}

TEST(CachingAllocatorHeldBlocks, StatisticsAndSnapshotSeeThemMergedBack) {
  Fixture f;
  Block* a = f.allocator.allocate(4 * kKiB, f.s0);
  f.allocator.free(a);
  const AllocatorStats s = f.stats();
  EXPECT_EQ(s.active[kAggregateStat].current, 0);
  EXPECT_EQ(s.inactive_split[kAggregateStat].current, 0);  // one whole free segment
  EXPECT_EQ(s.inactive_split_bytes[kAggregateStat].current, 0);
  const auto segments = f.allocator.snapshot();
  ASSERT_EQ(segments.size(), 1u);
  ASSERT_EQ(segments[0].blocks.size(), 1u);
  EXPECT_EQ(segments[0].blocks[0].size, 2 * kMiB);
  EXPECT_FALSE(segments[0].blocks[0].allocated);
}

TEST(CachingAllocatorHeldBlocks, ARequestOfAnotherSizeMayUseTheirMemory) {
  Fixture f;
  Block* a = f.allocator.allocate(4 * kKiB, f.s0);
  const auto a_addr = addr(a);
  f.allocator.free(a);
  Block* b = f.allocator.allocate(8 * kKiB, f.s0);  // merged back first: b starts where a did
  EXPECT_EQ(addr(b), a_addr);
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(2 * kMiB));
  f.allocator.free(b);
}

TEST(CachingAllocatorHeldBlocks, AnotherStreamDoesNotGetThem) {
  Fixture f;
  Block* a = f.allocator.allocate(4 * kKiB, f.s0);
  f.allocator.free(a);
  Block* b = f.allocator.allocate(4 * kKiB, f.s1);  // s1's own segment
  EXPECT_EQ(f.reserved(), static_cast<std::int64_t>(4 * kMiB));
  f.allocator.free(b);
}

TEST(CachingAllocatorHeldBlocks, EmptyCacheReleasesTheirSegments) {
  Fixture f;
  Block* a = f.allocator.allocate(4 * kKiB, f.s0);
  f.allocator.free(a);
  f.allocator.empty_cache();
  EXPECT_EQ(f.reserved(), 0);
  EXPECT_TRUE(f.allocator.snapshot().empty());
}

TEST(CachingAllocatorHeldBlocks, ABlockARecordedStreamStillUsesIsNotHeld) {
  Fixture f;
  StreamBlocker blocker(f.s1);
  Block* a = f.allocator.allocate(4 * kKiB, f.s0);
  f.allocator.record_stream(a, f.s1);
  const auto a_addr = addr(a);
  f.allocator.free(a);
  Block* b = f.allocator.allocate(4 * kKiB, f.s0);  // a still active for s1
  EXPECT_NE(addr(b), a_addr);
  blocker.open();
  f.allocator.free(b);
}

TEST(CachingAllocatorHeldBlocks, PeakStatisticsAreThoseOfMergedPools) {
  Fixture f;
  std::vector<Block*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(f.allocator.allocate(4 * kKiB, f.s0));
  f.allocator.free(blocks[0]);
  f.allocator.free(blocks[2]);  // two held, each between allocated neighbours
  f.allocator.reset_peak_stats();
  const AllocatorStats s = f.stats();
  EXPECT_EQ(s.inactive_split[kAggregateStat].current, 3);  // blocks 0 and 2, and the segment's rest
  EXPECT_EQ(s.inactive_split[kAggregateStat].peak, 3);
  f.allocator.free(blocks[1]);
  f.allocator.free(blocks[3]);
}

// Random small requests on two streams, frees in random order, the
// statistics checked against the snapshot after every step: held blocks
// never leave the two out of step.
TEST(CachingAllocatorHeldBlocks, StatisticsAgreeWithTheSnapshotThroughRandomUse) {
  Fixture f;
  std::mt19937 rng(7);
  const std::size_t sizes[] = {512, 1 * kKiB, 4 * kKiB, 4 * kKiB, 8 * kKiB, 100 * kKiB};
  std::vector<Block*> live;
  std::int64_t requested = 0;
  std::map<Block*, std::size_t> asked;
  for (int step = 0; step < 2000; ++step) {
    if (live.empty() || rng() % 2 == 0) {
      const std::size_t bytes = sizes[rng() % std::size(sizes)];
      Block* block = f.allocator.allocate(bytes, rng() % 4 == 0 ? f.s1 : f.s0);
      live.push_back(block);
      asked[block] = bytes;
      requested += static_cast<std::int64_t>(bytes);
    } else {
      const std::size_t i = rng() % live.size();
      requested -= static_cast<std::int64_t>(asked[live[i]]);
      asked.erase(live[i]);
      f.allocator.free(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    if (step % 3 != 0) continue;
    const AllocatorStats s = f.stats();
    const auto segments = f.allocator.snapshot();
    const auto [count, bytes] = held::inactive_split_of(segments);
    ASSERT_EQ(s.inactive_split[kAggregateStat].current, count) << "step " << step;
    ASSERT_EQ(s.inactive_split_bytes[kAggregateStat].current, bytes) << "step " << step;
    ASSERT_EQ(s.allocation[kAggregateStat].current, static_cast<std::int64_t>(live.size()));
    ASSERT_EQ(s.requested_bytes[kAggregateStat].current, requested);
    std::int64_t active = 0;
    for (const auto& segment : segments) active += static_cast<std::int64_t>(segment.active_size);
    ASSERT_EQ(s.active_bytes[kAggregateStat].current, active);
  }
  for (Block* block : live) f.allocator.free(block);
  f.allocator.empty_cache();
  EXPECT_EQ(f.reserved(), 0);
}
