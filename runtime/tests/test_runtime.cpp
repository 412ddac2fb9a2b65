#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "test_helpers.h"
#include "vnpu/caching_allocator.h"
#include "vnpu/device_allocator.h"
#include "vnpu/error.h"
#include "vnpu/intra_op_threads.h"
#include "vnpu/runtime.h"

namespace {

using vnpu::Error;
using vnpu::ErrorCode;
using vnpu::Runtime;
using vnpu_test::parse;

constexpr std::uint64_t kGiB = 1ull << 30;

using vnpu_test::expect_error;

TEST(Runtime, DefaultDevices) {
  Runtime rt(parse({}));
  EXPECT_EQ(rt.init_error(), "");
  ASSERT_EQ(rt.device_count(), 8);
  for (int i = 0; i < 8; ++i) {
    vnpu::Device& d = rt.device(i);
    EXPECT_EQ(d.index(), i);
    EXPECT_EQ(d.physical_id(), i);
    EXPECT_EQ(d.profile().name, "Ascend910B2");
    EXPECT_EQ(d.memory().capacity(), 64 * kGiB);
    EXPECT_EQ(d.memory().device_index(), i);
  }
}

TEST(Runtime, VisibleDevicesFilterAndRenumber) {
  Runtime rt(parse({{"VNPU_DEVICE_COUNT", "4"}, {"ASCEND_RT_VISIBLE_DEVICES", "3, 1"}}));
  EXPECT_EQ(rt.init_error(), "");
  ASSERT_EQ(rt.device_count(), 2);
  EXPECT_EQ(rt.device(0).physical_id(), 3);
  EXPECT_EQ(rt.device(1).physical_id(), 1);
  EXPECT_EQ(rt.device(1).index(), 1);
  EXPECT_EQ(rt.device(1).memory().device_index(), 1);
}

TEST(Runtime, EmptyVisibleDevicesHidesAll) {
  Runtime rt(parse({{"ASCEND_RT_VISIBLE_DEVICES", ""}}));
  EXPECT_EQ(rt.init_error(), "");
  EXPECT_EQ(rt.device_count(), 0);
  const Error e = expect_error([&] { rt.device(0); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidDevice);
  EXPECT_STREQ(e.what(), "Invalid device index 0: vNPU has no devices");
}

TEST(Runtime, MissingVisibleDevice) {
  Runtime rt(parse({{"ASCEND_RT_VISIBLE_DEVICES", "0,9"}}));
  EXPECT_EQ(rt.device_count(), 0);
  EXPECT_EQ(rt.init_error(),
            "ASCEND_RT_VISIBLE_DEVICES names device 9, but only devices 0-7 exist "
            "(VNPU_DEVICE_COUNT=8)");
  const Error e = expect_error([&] { rt.device(0); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidValue);
  EXPECT_EQ(std::string(e.what()), rt.init_error());
}

TEST(Runtime, MalformedOrDuplicateVisibleDevices) {
  for (const char* value : {"0,0", "a", "1,,2", "-1", "0;1", "1,"}) {
    Runtime rt(parse({{"ASCEND_RT_VISIBLE_DEVICES", value}}));
    EXPECT_EQ(rt.device_count(), 0) << value;
    EXPECT_NE(rt.init_error().find("ASCEND_RT_VISIBLE_DEVICES"), std::string::npos) << value;
  }
}

TEST(Runtime, PlannedDeviceCountMatchesAMadeRuntime) {
  // The count torch.npu.device_count() reports before the first device use.
  for (const std::map<std::string, std::string>& vars :
       std::vector<std::map<std::string, std::string>>{
           {}, {{"ASCEND_RT_VISIBLE_DEVICES", "3, 1"}}, {{"ASCEND_RT_VISIBLE_DEVICES", ""}},
           {{"ASCEND_RT_VISIBLE_DEVICES", "0,9"}}, {{"VNPU_DEVICE_COUNT", "x"}},
           {{"VNPU_DEVICE_COUNT", "2"}}}) {
    const vnpu::Environment env = parse(vars);
    std::string error;
    const int planned = Runtime::planned_device_count(env, &error);
    Runtime rt(env);
    EXPECT_EQ(planned, rt.device_count());
    EXPECT_EQ(error, rt.init_error());
  }
}

TEST(Runtime, InvalidIndexNamesTheRange) {
  Runtime rt(parse({}));
  for (int bad : {8, -1, 100}) {
    const Error e = expect_error([&] { rt.device(bad); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidDevice);
    EXPECT_EQ(std::string(e.what()), "Invalid device index " + std::to_string(bad) +
                                         ": vNPU has 8 devices, valid indices are 0 to 7");
  }
}

TEST(Runtime, EnvironmentErrorsDisableDevices) {
  Runtime rt(parse({{"TASK_QUEUE_ENABLE", "3"}, {"VNPU_DEVICE_COUNT", "x"}}));
  EXPECT_EQ(rt.device_count(), 0);
  EXPECT_NE(rt.init_error().find("TASK_QUEUE_ENABLE should be 0, 1 or 2"), std::string::npos);
  EXPECT_NE(rt.init_error().find("VNPU_DEVICE_COUNT"), std::string::npos);
  const Error e = expect_error([&] { rt.device(0); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidValue);
}

TEST(Runtime, ChipAndMemoryOverride) {
  Runtime b4(parse({{"VNPU_CHIP", "910b4"}, {"VNPU_DEVICE_COUNT", "1"}}));
  ASSERT_EQ(b4.device_count(), 1);
  EXPECT_EQ(b4.device(0).profile().name, "Ascend910B4");
  EXPECT_EQ(b4.device(0).memory().capacity(), 32 * kGiB);

  Runtime small(parse({{"VNPU_DEVICE_MEMORY_MB", "1"}, {"VNPU_DEVICE_COUNT", "2"}}));
  ASSERT_EQ(small.device_count(), 2);
  EXPECT_EQ(small.device(1).memory().capacity(), 1024u * 1024u);
}

TEST(Runtime, StreamsAreCreatedOnceAndPooled) {
  Runtime rt(parse({{"VNPU_DEVICE_COUNT", "1"}}));
  vnpu::Device& d = rt.device(0);
  EXPECT_TRUE(d.created_streams().empty());
  vnpu::Stream& s0 = d.stream(0);
  EXPECT_EQ(&d.stream(0), &s0);
  EXPECT_EQ(s0.stream_index(), 0);
  EXPECT_FALSE(s0.synchronous());
  EXPECT_EQ(d.created_streams().size(), 1u);

  EXPECT_EQ(expect_error([&] { d.stream(vnpu::Device::kFirstDedicatedIndex); }).code(),
            ErrorCode::kInvalidValue);
  EXPECT_EQ(expect_error([&] { d.stream(-1); }).code(), ErrorCode::kInvalidValue);

  // One pool per priority, each round-robin.
  constexpr int kPool = vnpu::Device::kStreamsPerPool;
  for (int i = 1; i <= kPool; ++i) {
    EXPECT_EQ(d.next_pool_stream_index(0), i);
    EXPECT_EQ(d.next_pool_stream_index(-1), kPool + i);
  }
  EXPECT_EQ(d.next_pool_stream_index(1), 1);  // wraps around
  EXPECT_EQ(d.next_pool_stream_index(-2), kPool + 1);
  EXPECT_EQ(d.stream(1).priority(), 0);
  EXPECT_EQ(d.stream(kPool + 1).priority(), -1);
  EXPECT_FALSE(d.stream(kPool + 1).synchronous());

  // Sync-launch streams: their own round robin; their tasks run as launched.
  const int first = d.next_sync_launch_stream_index();
  EXPECT_EQ(first, vnpu::Device::kFirstSyncLaunchIndex);
  for (int i = 1; i < vnpu::Device::kSyncLaunchStreams; ++i) EXPECT_EQ(d.next_sync_launch_stream_index(), first + i);
  EXPECT_EQ(d.next_sync_launch_stream_index(), first);
  EXPECT_TRUE(d.stream(first).synchronous());
  bool ran = false;
  d.stream(first).enqueue("sync", [&] { ran = true; });
  EXPECT_TRUE(ran);  // before enqueue returned
}

TEST(Runtime, ExternalStreamsAreOutsideThePoolAndSynchronizedWithTheDevice) {
  Runtime rt(parse({{"VNPU_DEVICE_COUNT", "1"}}));
  vnpu::Device& d = rt.device(0);
  std::shared_ptr<vnpu::Stream> a = d.create_external_stream(0);
  std::shared_ptr<vnpu::Stream> b = d.create_external_stream(0);
  EXPECT_GT(a->stream_index(), vnpu::Device::kMaxStreamIndex);
  EXPECT_NE(a->stream_index(), b->stream_index());
  EXPECT_TRUE(d.created_streams().empty());  // not among the pool's
  std::atomic<bool> ran{false};
  a->enqueue("slow", [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ran = true;
  });
  d.synchronize();
  EXPECT_TRUE(ran.load());
  d.forget_external_stream(a.get());
  d.forget_external_stream(a.get());  // twice: nothing happens
  EXPECT_EQ(a.use_count(), 1);        // the caller's pointer alone keeps it
}

// Regression: a tensor allocated on an ACL stream that the user destroyed
// before freeing the tensor left its block pointing at the freed stream
// (empty_cache then read freed memory; seen under load in CI).
TEST(Runtime, ForgettingAnExternalStreamMovesItsBlocksToTheDefaultStream) {
  Runtime rt(parse({{"VNPU_DEVICE_COUNT", "1"}}));
  vnpu::Device& d = rt.device(0);
  vnpu::CachingAllocator& allocator = d.allocator().ordinary();
  std::shared_ptr<vnpu::Stream> ext = d.create_external_stream(0);
  vnpu::Block* live = allocator.allocate(512 << 10, *ext);  // freed after the stream goes (small pool)
  vnpu::Block* cached = allocator.allocate(4 << 20, *ext);  // freed before: in the pool
  vnpu::Block* used = allocator.allocate(512 << 10, d.stream(0));
  allocator.record_stream(used, *ext);  // a record_stream use of it
  std::atomic<bool> ran{false};
  ext->enqueue("slow", [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ran = true;
  });
  const void* cached_address = vnpu::CachingAllocator::address(cached);
  allocator.free(cached);
  d.forget_external_stream(ext.get());
  EXPECT_TRUE(ran.load());  // its work ran before its blocks moved
  ext.reset();              // the stream is gone
  allocator.free(live);
  allocator.free(used);
  // The blocks serve the default stream now, and nothing waits on the old one.
  vnpu::Block* again = allocator.allocate(4 << 20, d.stream(0));
  EXPECT_EQ(vnpu::CachingAllocator::address(again), cached_address);
  allocator.free(again);
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved_bytes[vnpu::kAggregateStat].current, 0);
}

TEST(Runtime, SynchronousLaunchFromEnvironment) {
  Runtime rt(parse({{"ASCEND_LAUNCH_BLOCKING", "1"}, {"VNPU_DEVICE_COUNT", "1"}}));
  vnpu::Stream& s = rt.device(0).stream(3);
  EXPECT_TRUE(s.synchronous());
  int value = 0;
  s.enqueue("inline", [&] { value = 1; });
  EXPECT_EQ(value, 1);
}

TEST(Runtime, DeviceOfPointer) {
  Runtime rt(parse({{"VNPU_DEVICE_COUNT", "3"}}));
  void* p = rt.device(1).memory().allocate(4096);
  EXPECT_EQ(rt.device_of_pointer(p), 1);
  EXPECT_EQ(rt.device_of_pointer(static_cast<char*>(p) + 4095), 1);
  EXPECT_EQ(rt.device_of_pointer(nullptr), -1);
  int local = 0;
  EXPECT_EQ(rt.device_of_pointer(&local), -1);
  rt.device(1).memory().release(p);
  EXPECT_EQ(rt.device_of_pointer(p), -1);
}

TEST(Runtime, DeviceSynchronizeDrainsAllStreamsThenReports) {
  Runtime rt(parse({{"VNPU_DEVICE_COUNT", "1"}}));
  vnpu::Device& d = rt.device(0);
  std::atomic<int> slow_done{0};
  d.stream(1).enqueue("broken_op", [] { throw std::runtime_error("bad shape"); });
  for (int i = 0; i < 5; ++i) {
    d.stream(2).enqueue("slow", [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      slow_done.fetch_add(1);
    });
  }
  const Error e = expect_error([&] { d.synchronize(); });
  EXPECT_EQ(e.code(), ErrorCode::kKernelFailed);
  EXPECT_NE(std::string(e.what()).find("broken_op failed on NPU 0: bad shape"), std::string::npos);
  EXPECT_EQ(slow_done.load(), 5);
  for (vnpu::Stream* s : d.created_streams()) EXPECT_TRUE(s->query());
  EXPECT_NO_THROW(d.synchronize());
}

TEST(Runtime, DestructionWithCrossStreamWaitsPending) {
  // Stream 2 will wait on stream 1, but only after a slow task; stream 1 is
  // destroyed first. The runtime must drain every stream before destroying
  // any, or the wait reads a freed stream (ASan: heap-use-after-free).
  std::atomic<int> done{0};
  {
    Runtime rt(parse({{"VNPU_DEVICE_COUNT", "1"}}));
    vnpu::Device& d = rt.device(0);
    vnpu::Stream& s1 = d.stream(1);
    vnpu::Stream& s2 = d.stream(2);
    const std::uint64_t seq = s1.enqueue("quick", [&] { done.fetch_add(1); });
    s2.enqueue("slow", [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
    s2.enqueue("wait", [&s1, seq] { s1.wait_completed(seq); });
    s2.enqueue("after", [&] { done.fetch_add(1); });
  }
  EXPECT_EQ(done.load(), 2);
}

TEST(Runtime, InstanceIsUsable) {
  Runtime& rt = Runtime::instance();
  EXPECT_EQ(&rt, &Runtime::instance());
  if (rt.init_error().empty()) {
    EXPECT_GE(rt.device_count(), 0);
  } else {
    EXPECT_EQ(rt.device_count(), 0);
  }
}

}  // namespace

namespace {

TEST(Runtime, DedicatedStreamsAreOutsideThePool) {
  vnpu::Runtime rt(vnpu_test::parse({{"VNPU_DEVICE_COUNT", "1"}}));
  vnpu::Device& d = rt.device(0);
  const int a = d.create_dedicated_stream();
  const int b = d.create_dedicated_stream();
  EXPECT_EQ(a, vnpu::Device::kFirstDedicatedIndex);
  EXPECT_EQ(b, a + 1);
  EXPECT_EQ(d.stream(a).stream_index(), a);
  // The pool's round robin never hands them out.
  for (int i = 0; i < 3 * vnpu::Device::kStreamPoolSize; ++i) {
    const int pooled = d.next_pool_stream_index(0);
    EXPECT_GE(pooled, 1);
    EXPECT_LE(pooled, vnpu::Device::kStreamsPerPool);
    const int high = d.next_pool_stream_index(-1);
    EXPECT_GT(high, vnpu::Device::kStreamsPerPool);
    EXPECT_LE(high, vnpu::Device::kStreamPoolSize);
  }
  // Device-wide synchronize covers them.
  std::atomic<bool> ran{false};
  d.stream(b).enqueue("dedicated", [&] { ran = true; });
  d.synchronize();
  EXPECT_TRUE(ran.load());
  // An index that was never created is an error, not a new stream.
  EXPECT_EQ(vnpu_test::expect_error([&] { d.stream(b + 1); }).code(), vnpu::ErrorCode::kInvalidValue);
  for (int i = 2; i < vnpu::Device::kMaxDedicatedStreams; ++i) d.create_dedicated_stream();
  EXPECT_EQ(vnpu_test::expect_error([&] { d.create_dedicated_stream(); }).code(),
            vnpu::ErrorCode::kInvalidValue);
}

}  // namespace

// The intra-op thread rule on the machines users have (2, 4 and 16 cores):
// small kernels serial; big ones leave a core to a busy host and take every
// core only while a host thread waits for the device; a 256^3 GEMM counts as
// big, a 64x256x512 one does not (Note [The work of a GEMM]).
TEST(IntraOpThreads, FollowKernelSizeCoresAndHostState) {
  using vnpu::intra_op_threads;
  const std::int64_t small = 1024, mid = 131072, big = 1 << 20;
  const std::int64_t gemm_256 = 256 * 256 / 64 * 256, gemm_64x256x512 = 64 * 512 / 64 * 256;
  for (int cores : {2, 4, 16}) {
    SCOPED_TRACE(cores);
    for (bool blocked : {false, true}) {
      EXPECT_EQ(intra_op_threads(small, cores, blocked), 1);
      EXPECT_EQ(intra_op_threads(mid, cores, blocked), cores - 1);
      EXPECT_EQ(intra_op_threads(gemm_64x256x512, cores, blocked), cores - 1);
      EXPECT_EQ(intra_op_threads(-1, cores, blocked), cores - 1);  // unknown size
    }
    EXPECT_EQ(intra_op_threads(big, cores, false), cores - 1);
    EXPECT_EQ(intra_op_threads(big, cores, true), cores);
    EXPECT_EQ(intra_op_threads(gemm_256, cores, true), cores);
  }
  EXPECT_EQ(intra_op_threads(big, 1, false), 1);  // one core: never zero threads
  EXPECT_EQ(intra_op_threads(big, 1, true), 1);
}

// Only GEMMs of milliseconds that started with fewer threads than a blocked
// host would give ask again after their first rows (Note [A long GEMM asks
// again after its first rows]): a 1024^3 GEMM on threads - 1 does; on every
// core, or as a 512^3 GEMM, or on one core (nothing to gain), it does not.
TEST(IntraOpThreads, OnlyLongGemmsShortOfThreadsAskAgain) {
  using vnpu::rechecks_host;
  const std::int64_t gemm_1024 = std::int64_t{1024} * 1024 / 64 * 1024, gemm_512 = 512 * 512 / 64 * 512;
  for (int cores : {2, 4, 16}) {
    SCOPED_TRACE(cores);
    EXPECT_TRUE(rechecks_host(gemm_1024, cores - 1, cores));
    EXPECT_FALSE(rechecks_host(gemm_1024, cores, cores));
    EXPECT_FALSE(rechecks_host(gemm_512, cores - 1, cores));
  }
  EXPECT_FALSE(rechecks_host(gemm_1024, 1, 1));
}
