#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "test_helpers.h"
#include "vnpu/error.h"
#include "vnpu/event.h"
#include "vnpu/graph.h"
#include "vnpu/host_wait.h"
#include "vnpu/stream.h"
#include "vnpu/trace.h"

namespace {

using vnpu::Error;
using vnpu::ErrorCode;
using vnpu::Stream;
using vnpu_test::eventually;
using vnpu_test::Gate;

TEST(Stream, RunsTasksInOrder) {
  Stream stream(0, 0, 0, false);
  constexpr int kTasks = 100000;
  std::vector<int> seen;  // touched only by the worker until synchronize()
  seen.reserve(kTasks);
  for (int i = 0; i < kTasks; ++i) {
    stream.enqueue("append", [&seen, i] { seen.push_back(i); });
  }
  stream.synchronize();
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kTasks));
  for (int i = 0; i < kTasks; ++i) ASSERT_EQ(seen[i], i);
}

TEST(Stream, SequenceNumbersAndQuery) {
  Stream stream(0, 1, 0, false);
  EXPECT_EQ(stream.last_enqueued(), 0u);
  EXPECT_EQ(stream.last_completed(), 0u);
  EXPECT_TRUE(stream.query());

  Gate gate;
  EXPECT_EQ(stream.enqueue("gate", [&] { gate.wait(); }), 1u);
  EXPECT_EQ(stream.enqueue("noop", [] {}), 2u);
  EXPECT_EQ(stream.enqueue("noop", [] {}), 3u);
  EXPECT_EQ(stream.last_enqueued(), 3u);
  EXPECT_FALSE(stream.query());
  EXPECT_EQ(stream.last_completed(), 0u);  // task 1 is still running

  gate.open();
  stream.synchronize();
  EXPECT_TRUE(stream.query());
  EXPECT_EQ(stream.last_completed(), 3u);

  // A task that was never enqueued cannot be waited for.
  try {
    stream.wait_for(4);
    FAIL() << "expected invalid value";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidValue);
  }
}

TEST(Stream, CapturesAreReleasedBeforeCompletion) {
  Stream stream(0, 0, 0, false);
  // The deleter runs when the task's capture is destroyed and notes how far
  // completion had got by then: it must be before the task's own completion.
  std::uint64_t completed_at_release = ~0ull;
  std::shared_ptr<int> resource(new int(7), [&](int* p) {
    completed_at_release = stream.last_completed();
    delete p;
  });
  const std::uint64_t seq =
      stream.enqueue("hold", [r = std::move(resource)] { (void)*r; });
  stream.synchronize();
  EXPECT_LT(completed_at_release, seq);
}

TEST(Stream, MoveOnlyAndLargeCallables) {
  Stream stream(0, 0, 0, false);
  int a = 0;
  int b = 0;
  auto owned = std::make_unique<int>(5);
  stream.enqueue("move_only", [&a, p = std::move(owned)] { a = *p; });
  std::array<int, 200> big{};  // 800 bytes: boxed on the heap
  big[199] = 9;
  stream.enqueue("large", [&b, big] { b = big[199]; });
  stream.synchronize();
  EXPECT_EQ(a, 5);
  EXPECT_EQ(b, 9);
}

TEST(Stream, BackPressureWhenRingIsFull) {
  Stream stream(0, 0, 0, false);
  Gate gate;
  constexpr int kExtra = 500;
  constexpr int kTasks = static_cast<int>(Stream::kCapacity) + kExtra;
  std::atomic<int> enqueued{0};
  std::vector<int> seen;
  seen.reserve(kTasks);

  std::thread producer([&] {
    for (int i = 0; i < kTasks; ++i) {
      stream.enqueue("slow", [&seen, &gate, i] {
        if (i == 0) gate.wait();
        seen.push_back(i);
      });
      enqueued.fetch_add(1);
    }
  });

  // Task 1 blocks, so the ring fills: exactly kCapacity tasks get in and the
  // producer blocks on the next one.
  ASSERT_TRUE(eventually([&] { return enqueued.load() == static_cast<int>(Stream::kCapacity); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(enqueued.load(), static_cast<int>(Stream::kCapacity));
  EXPECT_EQ(stream.last_enqueued(), Stream::kCapacity);
  EXPECT_EQ(stream.last_completed(), 0u);

  gate.open();
  producer.join();
  stream.synchronize();
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kTasks));
  for (int i = 0; i < kTasks; ++i) ASSERT_EQ(seen[i], i);
}

TEST(Stream, ManyProducersEachTaskRunsOnce) {
  Stream stream(0, 0, 0, false);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 10000;
  std::vector<int> runs(kThreads * kPerThread, 0);  // worker-only until sync
  std::vector<int> last(kThreads, -1);
  bool out_of_order = false;

  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        stream.enqueue("count", [&, t, i] {
          ++runs[t * kPerThread + i];
          // Tasks of one producer keep that producer's order.
          if (last[t] != i - 1) out_of_order = true;
          last[t] = i;
        });
      }
    });
  }
  for (auto& p : producers) p.join();
  stream.synchronize();
  EXPECT_EQ(stream.last_completed(), static_cast<std::uint64_t>(kThreads * kPerThread));
  EXPECT_FALSE(out_of_order);
  for (std::size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i], 1) << "task " << i;
}

TEST(Stream, SynchronizeWhileTasksRun) {
  Stream stream(0, 0, 0, false);
  std::atomic<int> done{0};
  for (int i = 0; i < 20; ++i) {
    stream.enqueue("sleep", [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      done.fetch_add(1);
    });
  }
  std::thread other([&] {
    stream.synchronize();
    EXPECT_EQ(done.load(), 20);
  });
  stream.synchronize();
  EXPECT_EQ(done.load(), 20);
  other.join();

  // wait_for on an earlier task returns once that task is done.
  const std::uint64_t first = stream.enqueue("sleep", [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  stream.enqueue("sleep", [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
  stream.wait_for(first);
  EXPECT_GE(stream.last_completed(), first);
  stream.synchronize();
}

TEST(Stream, PendingErrorIsReportedOnceAndLaterTasksStillRun) {
  Stream stream(3, 0, 0, false);
  bool before = false;
  bool after = false;
  stream.enqueue("before", [&] { before = true; });
  const std::uint64_t failed = stream.enqueue("my_kernel", [] { throw std::runtime_error("boom"); });
  stream.enqueue("after", [&] { after = true; });

  try {
    stream.synchronize();
    FAIL() << "expected the pending error";
  } catch (const vnpu::KernelError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kKernelFailed);
    EXPECT_STREQ(e.what(), "my_kernel failed on NPU 3: boom");
    EXPECT_EQ(e.detail().seq, failed);
    EXPECT_EQ(e.detail().task, "my_kernel");
    EXPECT_EQ(e.detail().cause, "boom");
  }
  EXPECT_TRUE(before);
  // Independent work after a failure runs (the adaptor poisons the failed
  // kernel's outputs, so dependent work cannot read stale memory).
  EXPECT_TRUE(after);
  EXPECT_FALSE(stream.has_error());

  // Reported once; the stream is usable again.
  EXPECT_NO_THROW(stream.synchronize());
  int value = 0;
  stream.enqueue("again", [&] { value = 11; });
  EXPECT_NO_THROW(stream.synchronize());
  EXPECT_EQ(value, 11);
}

TEST(Stream, ErrorKeepsItsCodeAndTheFirstFailure) {
  Stream stream(0, 0, 0, false);
  stream.enqueue("oom_op", [] { throw Error(ErrorCode::kOutOfMemory, "no room"); });
  stream.enqueue("second", [] { throw std::runtime_error("consequence"); });
  try {
    stream.synchronize();
    FAIL() << "expected the pending error";
  } catch (const vnpu::KernelError& e) {
    EXPECT_EQ(e.detail().cause_code, ErrorCode::kOutOfMemory);
    EXPECT_EQ(e.detail().task, "oom_op");
  }
}

TEST(Stream, NonStdExceptionAndTakeError) {
  Stream stream(0, 0, 0, false);
  stream.enqueue("weird", [] { throw 42; });
  ASSERT_TRUE(eventually([&] { return stream.has_error(); }));
  // The failed task completes (the error is recorded just before).
  EXPECT_TRUE(eventually([&] { return stream.query(); }));
  const auto error = stream.take_error();
  ASSERT_NE(error, nullptr);
  EXPECT_NE(error->message().find("weird failed on NPU 0: unknown exception"), std::string::npos)
      << error->message();
  EXPECT_EQ(stream.take_error(), nullptr);
  EXPECT_NO_THROW(stream.synchronize());
}

TEST(Stream, RunOnCallerIsOrderedWithQueuedWork) {
  Stream stream(0, 0, 0, false);
  Gate gate;
  std::vector<int> order;  // plain vector: the stream order must make this race-free
  stream.enqueue("blocked", [&] {
    gate.wait();
    order.push_back(1);
  });
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.open();
  });
  stream.run_on_caller("inline", [&] { order.push_back(2); });
  stream.enqueue("later", [&] { order.push_back(3); });
  stream.synchronize();
  opener.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));

  // An exception goes to the caller, not into the stream's pending error.
  EXPECT_THROW(stream.run_on_caller("inline", [] { throw std::runtime_error("bad dtype"); }),
               std::runtime_error);
  EXPECT_FALSE(stream.has_error());
  EXPECT_NO_THROW(stream.synchronize());
}

TEST(Stream, WaitCompletedUntilGivesUpAtTheDeadline) {
  Stream stream(0, 0, 0, false);
  Gate gate;
  const std::uint64_t seq = stream.enqueue("blocked", [&] { gate.wait(); });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(stream.wait_completed_until(seq, start + std::chrono::milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  gate.open();
  EXPECT_TRUE(stream.wait_completed_until(seq, std::chrono::steady_clock::now() + std::chrono::seconds(30)));
}

TEST(Stream, WaitersForDifferentTasksEachWakeWhenTheirTaskCompletes) {
  // The worker wakes waiters only at the earliest task one of them waits for
  // (Note [Wake a waiter once, when its task completes]); the others must
  // publish their own task again and still wake, each at its own task, also
  // one that gave up at a deadline in between.
  Stream stream(0, 0, 0, false);
  constexpr int kTasks = 6;
  std::array<Gate, kTasks> gates;
  std::array<std::uint64_t, kTasks> seqs{};
  for (int i = 0; i < kTasks; ++i) seqs[i] = stream.enqueue("gated", [&gates, i] { gates[i].wait(); });
  std::array<std::atomic<bool>, kTasks> woke{};
  std::vector<std::thread> waiters;
  for (int i : {5, 1, 3}) {  // started out of order: the earliest is not the first
    waiters.emplace_back([&, i] {
      stream.wait_completed(seqs[i]);
      EXPECT_GE(stream.last_completed(), seqs[i]);
      woke[i].store(true);
    });
  }
  ASSERT_TRUE(eventually([] { return vnpu::blocked_host_threads() == 3; }));
  // A waiter for task 2 that gives up before task 2 completes.
  EXPECT_FALSE(stream.wait_completed_until(seqs[2], std::chrono::steady_clock::now() + std::chrono::milliseconds(10)));
  for (int i = 0; i < kTasks; ++i) {
    gates[i].open();
    ASSERT_TRUE(eventually([&] { return stream.last_completed() >= seqs[i]; }));
    for (int w : {1, 3, 5}) {
      if (w <= i) {
        EXPECT_TRUE(eventually([&] { return woke[w].load(); })) << "waiter for task " << w;
      } else {
        EXPECT_FALSE(woke[w].load()) << "waiter for task " << w << " woke at task " << i;
      }
    }
  }
  for (auto& t : waiters) t.join();
  EXPECT_EQ(vnpu::blocked_host_threads(), 0);
}

// Host-wait hooks: called around blocking waits of host threads only, with
// no runtime lock held (a hook that enqueues proves it).
std::atomic<int> g_enters{0};
std::atomic<int> g_leaves{0};
vnpu::Stream* g_hook_stream = nullptr;
void* count_enter() {
  g_enters.fetch_add(1);
  return &g_enters;
}
void count_leave(void* token) {
  EXPECT_EQ(token, &g_enters);
  // Re-entering the stream from the hook deadlocks if a lock were held.
  if (g_hook_stream != nullptr) g_hook_stream->enqueue("from_hook", [] {});
  g_leaves.fetch_add(1);
}

TEST(Stream, HostWaitHooksWrapBlockingWaitsOnly) {
  Stream stream(0, 0, 0, false);
  Stream other(0, 1, 0, false);
  g_hook_stream = &other;
  vnpu::set_host_wait_hooks({&count_enter, &count_leave});
  Gate gate;
  const std::uint64_t seq = stream.enqueue("blocked", [&] { gate.wait(); });
  // A worker waiting on another stream does not call the hooks.
  other.enqueue("wait", [&stream, seq] { stream.wait_completed(seq); });
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.open();
  });
  stream.synchronize();
  opener.join();
  other.synchronize();
  vnpu::set_host_wait_hooks({});
  g_hook_stream = nullptr;
  EXPECT_GE(g_enters.load(), 1);
  EXPECT_EQ(g_enters.load(), g_leaves.load());
  // Hooks removed: no more calls.
  const int enters = g_enters.load();
  stream.enqueue("sleep", [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
  stream.synchronize();
  EXPECT_EQ(g_enters.load(), enters);
}

TEST(Stream, FullRingProducerResumesOnlyWhenARefillIsFree) {
  // A producer that finds the ring full sleeps until kRefillSlots slots are
  // free, rather than waking (or spinning) for each slot.
  Stream stream(0, 0, 0, false);
  Gate first, rest;
  constexpr std::size_t kHeld = Stream::kRefillSlots + 1;  // tasks 1..kHeld wait on a gate
  for (std::size_t i = 1; i <= Stream::kCapacity; ++i) {
    if (i == 1) {
      stream.enqueue("first", [&] { first.wait(); });
    } else if (i <= kHeld) {
      stream.enqueue("held", [&rest, i] { if (i == kHeld) rest.wait(); });
    } else {
      stream.enqueue("fill", [] {});
    }
  }
  std::atomic<bool> in{false};
  std::thread producer([&] {
    stream.enqueue("overflow", [] {});
    in.store(true);
  });
  // Blocked (past its brief spin) before any slot frees.
  ASSERT_TRUE(eventually([] { return vnpu::blocked_host_threads() == 1; }));
  first.open();  // one slot frees: not enough
  ASSERT_TRUE(eventually([&] { return stream.last_completed() == kHeld - 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(in.load());
  rest.open();   // kRefillSlots + 1 free now
  producer.join();
  EXPECT_TRUE(in.load());
  stream.synchronize();
  EXPECT_EQ(stream.last_completed(), Stream::kCapacity + 1);
}

TEST(Stream, BlockedHostThreadsCountsHostsWaitingForTheDevice) {
  // The count a kernel reads to decide whether it may take every core
  // (Note [Device threads beside the host], vnpu/intra_op_threads.h).
  Stream stream(0, 0, 0, false);
  EXPECT_EQ(vnpu::blocked_host_threads(), 0);
  std::atomic<int> seen_on_worker{-1};
  Gate gate;
  stream.enqueue("observe", [&] {
    // The host blocks in synchronize() after its brief spin.
    eventually([] { return vnpu::blocked_host_threads() == 1; });
    seen_on_worker.store(vnpu::blocked_host_threads());
    gate.wait();
  });
  std::thread opener([&] {
    eventually([&] { return seen_on_worker.load() >= 0; });
    gate.open();
  });
  stream.synchronize();
  opener.join();
  EXPECT_EQ(seen_on_worker.load(), 1);
  EXPECT_EQ(vnpu::blocked_host_threads(), 0);
  // A worker waiting on another stream is not a host thread.
  Stream other(0, 1, 0, false);
  Gate hold;
  const std::uint64_t seq = stream.enqueue("hold", [&] { hold.wait(); });
  other.enqueue("wait", [&stream, seq] { stream.wait_completed(seq); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(vnpu::blocked_host_threads(), 0);
  hold.open();
  other.synchronize();
  stream.synchronize();
}

TEST(Stream, BackPressureWaitsWithoutHoldingTheProducerLock) {
  // While one producer waits for a slot of a full ring, another producer
  // must still get through to the point of waiting (not block on a mutex),
  // so a waiter that re-acquires the GIL cannot deadlock with it.
  Stream stream(0, 0, 0, false);
  Gate gate;
  stream.enqueue("blocked", [&] { gate.wait(); });
  for (std::size_t i = 1; i < Stream::kCapacity; ++i) stream.enqueue("fill", [] {});
  std::atomic<int> attempts{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 2; ++p) {
    producers.emplace_back([&] {
      attempts.fetch_add(1);
      stream.enqueue("overflow", [] {});
    });
  }
  ASSERT_TRUE(eventually([&] { return attempts.load() == 2; }));
  gate.open();
  for (auto& t : producers) t.join();
  stream.synchronize();
  EXPECT_EQ(stream.last_completed(), Stream::kCapacity + 2);
}

std::vector<vnpu::TaskRecord>* g_records = nullptr;
std::mutex g_records_mutex;
void record_trace(const vnpu::TaskRecord& record) {
  std::lock_guard<std::mutex> lock(g_records_mutex);
  if (g_records != nullptr) g_records->push_back(record);
}

TEST(Stream, TraceHookSeesEveryTaskWithKindAndCorrelation) {
  std::vector<vnpu::TaskRecord> records;
  {
    std::lock_guard<std::mutex> lock(g_records_mutex);
    g_records = &records;
  }
  vnpu::set_trace_hook(&record_trace);
  Stream stream(2, 5, 0, false);
  vnpu::set_correlation_id(77);
  stream.enqueue("k", [] {});
  vnpu::set_correlation_id(0);
  stream.enqueue(vnpu::TaskKind::kCopy, "c", [] { throw std::runtime_error("x"); });
  EXPECT_THROW(stream.synchronize(), vnpu::KernelError);
  vnpu::set_trace_hook(nullptr);
  {
    std::lock_guard<std::mutex> lock(g_records_mutex);
    g_records = nullptr;
  }
  ASSERT_EQ(records.size(), 2u);
  EXPECT_STREQ(records[0].info.name, "k");
  EXPECT_EQ(records[0].info.kind, vnpu::TaskKind::kKernel);
  EXPECT_EQ(records[0].info.correlation_id, 77u);
  EXPECT_EQ(records[0].device_index, 2);
  EXPECT_EQ(records[0].stream_index, 5);
  EXPECT_EQ(records[0].seq, 1u);
  EXPECT_GT(records[0].info.enqueue_ns, 0);
  EXPECT_LE(records[0].info.enqueue_ns, records[0].start_ns);
  EXPECT_LE(records[0].start_ns, records[0].end_ns);
  EXPECT_FALSE(records[0].failed);
  EXPECT_EQ(records[1].info.kind, vnpu::TaskKind::kCopy);
  EXPECT_EQ(records[1].info.correlation_id, 0u);
  EXPECT_TRUE(records[1].failed);
  EXPECT_STREQ(vnpu::task_kind_name(records[1].info.kind), "copy");
}

TEST(Stream, ForkedChildGetsAnErrorInsteadOfHanging) {
  Stream stream(0, 0, 0, false);
  Gate gate;
  std::atomic<bool> blocked{false};
  stream.enqueue("blocked", [&] {
    blocked = true;
    gate.wait();
  });
  // Fork only once the worker sits in the task: a fork while the new thread
  // is still starting can leave the sanitizers' runtime locks held in the
  // child (it then hangs in its first allocation, under ASan).
  while (!blocked) std::this_thread::yield();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 1;
    try {
      stream.synchronize();
    } catch (const Error& e) {
      code = e.code() == ErrorCode::kBadFork ? 0 : 2;
    }
    try {
      stream.enqueue("x", [] {});
      code = 3;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kBadFork) code = 4;
    }
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  gate.open();
  stream.synchronize();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Stream, ErasedCallablesRunInlineOrBoxed) {
  Stream stream(0, 0, 0, false);
  auto released = std::make_shared<int>(0);
  std::vector<int> order;
  struct Small {
    std::vector<int>* order;
    std::shared_ptr<int> keep;
    void operator()() { order->push_back(1); }
  };
  struct Large {
    std::vector<int>* order;
    std::shared_ptr<int> keep;
    std::array<char, 2 * vnpu::Task::kInlineBytes> padding{};
    void operator()() { order->push_back(2); }
  };
  Small small{&order, released};
  Large large{&order, released, {}};
  stream.enqueue_erased(vnpu::TaskKind::kKernel, "small", vnpu::erase(small));
  stream.enqueue_erased(vnpu::TaskKind::kKernel, "large", vnpu::erase(large));
  stream.synchronize();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  // Both moved into their slots and destroyed there (small and large were
  // moved from, so only this test's reference is left).
  EXPECT_EQ(released.use_count(), 1);
}

// Note [Slots on cache lines of their own] (task.h): every slot of the
// ring starts on a cache line and its callable starts one too, after the
// header, so the header the worker clears and the next slot's callable
// never share a line.
TEST(Stream, SlotsAndTheirCallablesStartOnCacheLines) {
  EXPECT_EQ(sizeof(vnpu::Task) % 64, 0u);
  Stream stream(0, 0, 0, false);
  std::vector<std::uintptr_t> offsets;
  struct RecordsItsAddress {
    std::vector<std::uintptr_t>* offsets;
    void operator()() { offsets->push_back(reinterpret_cast<std::uintptr_t>(this) % 64); }
  };
  for (int i = 0; i < 5; ++i) {
    RecordsItsAddress task{&offsets};
    stream.enqueue_erased(vnpu::TaskKind::kKernel, "records", vnpu::erase(task));
  }
  stream.synchronize();
  EXPECT_EQ(offsets, std::vector<std::uintptr_t>(5, 0));
}

TEST(Stream, AbortWakesHostWaitersWithAnError) {
  Stream stream(0, 4, 0, false);
  Gate gate;
  const std::uint64_t stuck = stream.enqueue("collective", [&] { gate.wait(); });
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stream.abort("Watchdog caught collective operation timeout");
  });
  const Error e = vnpu_test::expect_error([&] { stream.synchronize(); });
  watchdog.join();
  EXPECT_EQ(e.code(), ErrorCode::kAborted);
  EXPECT_NE(std::string(e.what()).find("Watchdog caught collective operation timeout"), std::string::npos);
  EXPECT_TRUE(stream.aborted());
  EXPECT_LT(stream.last_completed(), stuck);
  // While aborted, waits that cannot complete yet throw at once. Once the
  // stuck task ended, the abort is reported as the pending error and the
  // stream works again.
  gate.open();
  ASSERT_TRUE(eventually([&] { return stream.last_completed() >= stuck; }));
  try {
    stream.synchronize();
    FAIL() << "the abort is reported with the pending error";
  } catch (const vnpu::KernelError& k) {
    EXPECT_EQ(k.detail().cause_code, ErrorCode::kAborted);
  }
  EXPECT_FALSE(stream.aborted());
  int value = 0;
  stream.enqueue("after", [&] { value = 5; });
  stream.synchronize();
  EXPECT_EQ(value, 5);
}

TEST(Stream, DestructorDrains) {
  std::atomic<int> done{0};
  {
    Stream stream(0, 0, 0, false);
    for (int i = 0; i < 200; ++i) {
      stream.enqueue("work", [&] {
        if (done.load() % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        done.fetch_add(1);
      });
    }
  }
  EXPECT_EQ(done.load(), 200);
}

TEST(Stream, IdleWorkerWakesUp) {
  Stream stream(0, 0, 0, false);
  for (int round = 0; round < 20; ++round) {
    // Long enough for the worker to stop spinning and sleep.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    int value = 0;
    stream.enqueue("wake", [&] { value = round; });
    stream.synchronize();
    ASSERT_EQ(value, round);
  }
}

TEST(Stream, LaunchesRacingTheWorkerGoingToSleepAreNeverLost) {
  // Launches timed around the end of the worker's spin (150 us), when it
  // says it sleeps and looks at the queue once more: a launch that misses
  // the worker going to sleep would never run (Note [Asymmetric wake-up
  // fence] in runtime/src/process_fence.h).
  Stream stream(0, 0, 0, false);
  for (int round = 0; round < 300; ++round) {
    const auto idle_until = std::chrono::steady_clock::now() + std::chrono::microseconds(100 + round % 100);
    while (std::chrono::steady_clock::now() < idle_until) {
    }
    const std::uint64_t seq = stream.enqueue("race", [] {});
    ASSERT_TRUE(stream.wait_completed_until(seq, std::chrono::steady_clock::now() + std::chrono::seconds(5)))
        << "round " << round;
  }
}

TEST(SynchronousStream, RunsInlineOnCaller) {
  Stream stream(0, 0, 0, true);
  EXPECT_TRUE(stream.synchronous());
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  int value = 0;
  EXPECT_EQ(stream.enqueue("inline", [&] {
    ran_on = std::this_thread::get_id();
    value = 1;
  }), 1u);
  EXPECT_EQ(value, 1) << "ran before enqueue returned";
  EXPECT_EQ(ran_on, caller);
  EXPECT_EQ(stream.last_enqueued(), 1u);
  EXPECT_EQ(stream.last_completed(), 1u);

  auto owned = std::make_unique<int>(3);
  stream.enqueue("move_only", [&value, p = std::move(owned)] { value = *p; });
  EXPECT_EQ(value, 3);
}

TEST(SynchronousStream, ExceptionPropagatesUnchanged) {
  Stream stream(0, 0, 0, true);
  EXPECT_THROW(stream.enqueue("bad", [] { throw std::out_of_range("index 5"); }),
               std::out_of_range);
  // The task still counts as completed, and no sticky error is left.
  EXPECT_EQ(stream.last_completed(), 1u);
  EXPECT_TRUE(stream.query());
  EXPECT_FALSE(stream.has_error());
  EXPECT_NO_THROW(stream.synchronize());
  int value = 0;
  EXPECT_EQ(stream.enqueue("good", [&] { value = 2; }), 2u);
  EXPECT_EQ(value, 2);
}

}  // namespace

namespace {

using vnpu_test::expect_error;

TEST(StreamCapture, CapturedTasksRunOnlyOnReplayInOrder) {
  Stream stream(0, 0, 0, false);
  std::vector<int> order;
  auto graph = std::make_shared<vnpu::Graph>();
  stream.begin_capture(graph);
  EXPECT_TRUE(stream.capturing());
  for (int i = 0; i < 3; ++i) stream.enqueue("step", [&order, i] { order.push_back(i); });
  EXPECT_EQ(stream.end_capture(), graph);
  EXPECT_FALSE(stream.capturing());
  stream.synchronize();
  EXPECT_TRUE(order.empty());  // capture runs nothing
  EXPECT_EQ(graph->size(), 3u);
  stream.enqueue_replay(graph);
  stream.enqueue_replay(graph);
  stream.synchronize();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2}));
}

TEST(StreamCapture, ConditionalNodesRunTheirBodyWhenThePredicateHoldsAtReplay) {
  Stream stream(0, 0, 0, false);
  std::vector<int> order;
  unsigned char outer = 1, inner = 0;  // "device memory" the replay reads
  auto graph = std::make_shared<vnpu::Graph>();
  stream.begin_capture(graph);
  stream.enqueue("before", [&order] { order.push_back(0); });
  graph->begin_conditional(&outer);
  stream.enqueue("outer body", [&order] { order.push_back(1); });
  graph->begin_conditional(&inner);
  stream.enqueue("inner body", [&order] { order.push_back(2); });
  graph->end_conditional();
  graph->end_conditional();
  stream.enqueue("after", [&order] { order.push_back(3); });
  EXPECT_EQ(expect_error([&] { graph->end_conditional(); }).code(), ErrorCode::kStreamCapture);
  stream.end_capture();
  EXPECT_EQ(graph->size(), 3u);  // before, the conditional node, after
  stream.enqueue_replay(graph);
  stream.synchronize();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 3}));
  order.clear();
  inner = 1;
  stream.enqueue_replay(graph);
  stream.synchronize();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  order.clear();
  outer = 0;
  stream.enqueue_replay(graph);
  stream.synchronize();
  EXPECT_EQ(order, (std::vector<int>{0, 3}));
}

TEST(StreamCapture, HostWaitsRaiseWhileCapturing) {
  Stream stream(0, 0, 0, false);
  stream.enqueue("before", [] {});
  stream.begin_capture(std::make_shared<vnpu::Graph>());
  EXPECT_EQ(expect_error([&] { stream.synchronize(); }).code(), ErrorCode::kStreamCapture);
  EXPECT_EQ(expect_error([&] { stream.run_on_caller("x", [] {}); }).code(), ErrorCode::kStreamCapture);
  EXPECT_EQ(expect_error([&] { stream.begin_capture(std::make_shared<vnpu::Graph>()); }).code(),
            ErrorCode::kStreamCapture);
  stream.end_capture();
  EXPECT_EQ(expect_error([&] { stream.end_capture(); }).code(), ErrorCode::kStreamCapture);
  stream.synchronize();  // work queued before the capture ran as usual
}

TEST(StreamCapture, AnEventRecordedWhileCapturingMarksAPointInTheCapture) {
  Stream stream(0, 0, 0, false);
  Stream other(0, 1, 0, false);
  auto graph = std::make_shared<vnpu::Graph>();
  stream.begin_capture(graph);
  stream.enqueue("a", [] {});
  stream.enqueue("b", [] {});
  vnpu::Event event(true);
  event.record(stream);  // queues nothing
  EXPECT_EQ(event.captured_graph(), graph);
  EXPECT_EQ(event.captured_position(), 2u);
  EXPECT_EQ(stream.captured_tasks(), 2u);
  EXPECT_EQ(graph->size(), 2u);
  // Host waits on it refuse: its work has not run.
  const Error e = expect_error([&] { event.synchronize(); });
  EXPECT_EQ(e.code(), ErrorCode::kStreamCapture);
  EXPECT_NE(std::string(e.what()).find("operation not permitted when stream is capturing"), std::string::npos);
  EXPECT_EQ(expect_error([&] { (void)event.query(); }).code(), ErrorCode::kStreamCapture);
  EXPECT_EQ(expect_error([&] { (void)event.elapsed_ms(event); }).code(), ErrorCode::kStreamCapture);
  // A stream outside the capture may not wait for it; one inside needs not.
  EXPECT_EQ(expect_error([&] { event.block(other); }).code(), ErrorCode::kStreamCapture);
  other.begin_capture(graph);  // a fork (the adaptor does this on the wait)
  event.block(other);
  other.enqueue("c", [] {});
  EXPECT_EQ(other.captured_tasks(), 1u);
  EXPECT_EQ(graph->size(), 3u);
  other.end_capture();
  stream.end_capture();
  EXPECT_EQ(other.last_enqueued(), 0u);  // nothing was queued on either stream
  EXPECT_EQ(stream.last_enqueued(), 0u);
  // Recorded again outside a capture, it is an ordinary event.
  event.record(stream);
  EXPECT_EQ(event.captured_graph(), nullptr);
  event.synchronize();
  EXPECT_TRUE(event.query());
}

TEST(StreamCapture, AFailingCapturedTaskDoesNotStopTheReplay) {
  Stream stream(0, 0, 0, false);
  int ran = 0;
  auto graph = std::make_shared<vnpu::Graph>();
  stream.begin_capture(graph);
  stream.enqueue("fails", [] { throw std::runtime_error("boom"); });
  stream.enqueue("runs", [&ran] { ++ran; });
  stream.end_capture();
  stream.enqueue_replay(graph);
  EXPECT_THROW(stream.synchronize(), vnpu::KernelError);
  EXPECT_EQ(ran, 1);
  stream.enqueue_replay(graph);
  EXPECT_THROW(stream.synchronize(), vnpu::KernelError);
  EXPECT_EQ(ran, 2);
}

TEST(StreamCapture, ATaskGroupsWorkIsReplacedByItsUpdate) {
  Stream stream(0, 0, 0, false);
  Stream updater(0, 1, 0, false);
  std::vector<int> order;
  auto graph = std::make_shared<vnpu::Graph>();
  stream.begin_capture(graph);
  stream.enqueue("before", [&order] { order.push_back(0); });
  graph->begin_task_group();
  EXPECT_EQ(expect_error([&] { graph->begin_task_group(); }).code(), ErrorCode::kStreamCapture);
  stream.enqueue("group", [&order] { order.push_back(1); });
  stream.enqueue("group", [&order] { order.push_back(2); });
  EXPECT_EQ(graph->end_task_group(), 0u);
  EXPECT_EQ(expect_error([&] { graph->end_task_group(); }).code(), ErrorCode::kStreamCapture);
  stream.enqueue("after", [&order] { order.push_back(3); });
  stream.end_capture();
  stream.enqueue_replay(graph);
  stream.synchronize();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));

  // An update captures its work (nothing runs) and swaps it in; the group may
  // change its number of tasks.
  auto update = std::make_shared<vnpu::Graph>();
  updater.begin_capture(update);
  updater.enqueue("updated", [&order] { order.push_back(7); });
  updater.end_capture();
  graph->update_task_group(0, *update);
  EXPECT_EQ(update->size(), 0u);
  order.clear();
  stream.enqueue_replay(graph);
  stream.synchronize();
  EXPECT_EQ(order, (std::vector<int>{0, 7, 3}));
  EXPECT_EQ(expect_error([&] { graph->update_task_group(1, *update); }).code(), ErrorCode::kInvalidValue);
  EXPECT_EQ(expect_error([&] { graph->update_task_group(0, *graph); }).code(), ErrorCode::kInvalidValue);
}

TEST(StreamCapture, AReplayRunsTheGroupVersionCurrentWhenItGotThere) {
  // The update lands while a replay runs the group's old version: the old
  // one finishes intact, the next replay runs the new one.
  Stream stream(0, 0, 0, false);
  std::atomic<int> entered{0};
  std::atomic<bool> release{false};
  std::vector<int> seen;
  auto graph = std::make_shared<vnpu::Graph>();
  stream.begin_capture(graph);
  graph->begin_task_group();
  stream.enqueue("old", [&] {
    entered = 1;
    while (!release.load()) std::this_thread::yield();
    seen.push_back(1);
  });
  stream.enqueue("old", [&seen] { seen.push_back(2); });
  graph->end_task_group();
  stream.end_capture();
  stream.enqueue_replay(graph);
  while (entered.load() == 0) std::this_thread::yield();
  Stream updater(0, 1, 0, false);
  auto capture = std::make_shared<vnpu::Graph>();
  updater.begin_capture(capture);
  updater.enqueue("new", [&seen] { seen.push_back(9); });
  updater.end_capture();
  graph->update_task_group(0, *capture);
  release = true;
  stream.enqueue_replay(graph);
  stream.synchronize();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 9}));
}

}  // namespace

namespace {

TEST(BusyClock, CountsTheTimeAnyStreamRunsWork) {
  vnpu::BusyClock clock;
  {
    Stream a(0, 1, 0, false, &clock);
    Stream b(0, 2, 0, false, &clock);
    EXPECT_LT(clock.busy_ns(), 5'000'000);  // idle streams add nothing
    // Overlapping work on two streams counts once (the device was busy).
    a.enqueue("sleep", [] { std::this_thread::sleep_for(std::chrono::milliseconds(40)); });
    b.enqueue("sleep", [] { std::this_thread::sleep_for(std::chrono::milliseconds(40)); });
    a.synchronize();
    b.synchronize();
  }
  const std::int64_t busy = clock.busy_ns();
  EXPECT_GE(busy, 40'000'000);
  EXPECT_LT(busy, 80'000'000);  // summed per stream it would be 80 ms or more
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(clock.busy_ns(), busy);  // no stream busy: the clock stands still
}

}  // namespace
