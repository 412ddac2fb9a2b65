#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_helpers.h"
#include "vnpu/error.h"
#include "vnpu/event.h"
#include "vnpu/stream.h"

namespace {

using vnpu::Error;
using vnpu::ErrorCode;
using vnpu::Event;
using vnpu::Stream;
using vnpu_test::Gate;

using vnpu_test::expect_error;

TEST(Event, UnrecordedEventIsComplete) {
  Event event;
  EXPECT_FALSE(event.recorded());
  EXPECT_TRUE(event.query());
  EXPECT_NO_THROW(event.synchronize());
  Stream stream(0, 0, 0, false);
  event.block(stream);  // no-op
  EXPECT_EQ(stream.last_enqueued(), 0u);
}

TEST(Event, RecordQuerySynchronize) {
  Stream stream(0, 0, 0, false);
  Gate gate;
  stream.enqueue("gate", [&] { gate.wait(); });
  Event event;
  event.record(stream);
  EXPECT_TRUE(event.recorded());
  EXPECT_EQ(event.stream(), &stream);
  EXPECT_EQ(event.sequence(), 2u);
  EXPECT_FALSE(event.query());

  gate.open();
  event.synchronize();
  EXPECT_TRUE(event.query());
  EXPECT_GE(stream.last_completed(), 2u);
}

TEST(Event, ElapsedTimeCoversWorkInBetween) {
  Stream stream(0, 0, 0, false);
  Event start(true);
  Event end(true);
  start.record(stream);
  stream.enqueue("sleep", [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  end.record(stream);
  end.synchronize();
  const double ms = start.elapsed_ms(end);
  EXPECT_GE(ms, 20.0);
  EXPECT_LT(ms, 10000.0);
}

TEST(Event, ElapsedTimeErrors) {
  Stream stream(0, 0, 0, false);
  Event timed_a(true);
  Event timed_b(true);
  Event untimed;

  Error e = expect_error([&] { timed_a.elapsed_ms(timed_b); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidValue);
  EXPECT_NE(std::string(e.what()).find("recorded"), std::string::npos) << e.what();

  timed_a.record(stream);
  untimed.record(stream);
  e = expect_error([&] { timed_a.elapsed_ms(untimed); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidValue);
  EXPECT_NE(std::string(e.what()).find("enable_timing=True"), std::string::npos) << e.what();

  Gate gate;
  stream.enqueue("gate", [&] { gate.wait(); });
  timed_b.record(stream);
  e = expect_error([&] { timed_a.elapsed_ms(timed_b); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidValue);
  EXPECT_NE(std::string(e.what()).find("completed"), std::string::npos) << e.what();

  gate.open();
  timed_b.synchronize();
  EXPECT_GE(timed_a.elapsed_ms(timed_b), 0.0);
}

TEST(Event, MarkerAfterAFailureCarriesTheErrorAndIsStillTimed) {
  Stream stream(0, 0, 0, false);
  Event start(true);
  Event end(true);
  start.record(stream);
  stream.enqueue("fails", [] { throw std::runtime_error("bad input"); });
  end.record(stream);
  const Error e = expect_error([&] { end.synchronize(); });
  EXPECT_EQ(e.code(), ErrorCode::kKernelFailed);
  EXPECT_NE(std::string(e.what()).find("fails failed on NPU 0: bad input"), std::string::npos);
  EXPECT_TRUE(end.query());
  EXPECT_GE(start.elapsed_ms(end), 0.0);
  // Reported by the event: the stream does not report it a second time.
  EXPECT_NO_THROW(stream.synchronize());
  // The event before the failure carries nothing.
  EXPECT_NO_THROW(start.synchronize());
}

TEST(Event, ErrorReachesAStreamThatWaitedOnIt) {
  // The side stream fails; the main stream waits on an event recorded after
  // the failure: the main stream's sync must report it (its data depends on
  // the failed work), even though the side stream's own sync reports it too.
  Stream side(0, 1, 0, false);
  Stream main_stream(0, 2, 0, false);
  Gate gate;
  side.enqueue("slow", [&] { gate.wait(); });
  side.enqueue("side_kernel", [] { throw std::runtime_error("index out of range"); });
  Event done;
  done.record(side);
  done.block(main_stream);
  bool consumer_ran = false;
  main_stream.enqueue("consumer", [&] { consumer_ran = true; });
  gate.open();
  try {
    main_stream.synchronize();
    FAIL() << "the waiting stream must report the failure it depends on";
  } catch (const vnpu::KernelError& e) {
    EXPECT_EQ(e.detail().task, "side_kernel");
    EXPECT_EQ(e.detail().stream_index, 1);
    EXPECT_NE(std::string(e.what()).find("through an event"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(consumer_ran);
  EXPECT_NO_THROW(main_stream.synchronize());
  EXPECT_THROW(side.synchronize(), vnpu::KernelError);
  EXPECT_NO_THROW(side.synchronize());
}

TEST(Event, CompletedEventStillHandsItsErrorToAWaiter) {
  Stream side(0, 1, 0, false);
  Stream main_stream(0, 2, 0, false);
  side.enqueue("side_kernel", [] { throw std::runtime_error("bad"); });
  Event done;
  done.record(side);
  EXPECT_THROW(side.synchronize(), vnpu::KernelError);
  ASSERT_TRUE(done.query());
  done.block(main_stream);
  EXPECT_THROW(main_stream.synchronize(), vnpu::KernelError);
}

TEST(Event, ErrorAfterTheMarkerIsNotCarried) {
  Stream side(0, 1, 0, false);
  Stream main_stream(0, 2, 0, false);
  Event before;
  before.record(side);
  before.synchronize();
  side.enqueue("late_failure", [] { throw std::runtime_error("bad"); });
  before.block(main_stream);
  EXPECT_NO_THROW(main_stream.synchronize());
  EXPECT_THROW(side.synchronize(), vnpu::KernelError);
}

TEST(Event, CrossStreamWait) {
  Stream a(0, 1, 0, false);
  Stream b(0, 2, 0, false);
  int value = 0;   // plain int: the event must order the write before the read
  int observed = -1;
  a.enqueue("producer", [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    value = 42;
  });
  Event event;
  event.record(a);
  event.block(b);
  b.enqueue("consumer", [&] { observed = value; });
  b.synchronize();
  EXPECT_EQ(observed, 42);
  EXPECT_TRUE(event.query());
}

TEST(Event, BlockOnOwnStreamOrCompletedEventEnqueuesNothing) {
  Stream a(0, 1, 0, false);
  Stream b(0, 2, 0, false);
  Event event;
  event.record(a);
  const std::uint64_t before = a.last_enqueued();
  event.block(a);
  EXPECT_EQ(a.last_enqueued(), before);
  event.synchronize();
  event.block(b);
  EXPECT_EQ(b.last_enqueued(), 0u);
}

TEST(Event, RecordOnAnIdleStreamEnqueuesNothingAndIsComplete) {
  Stream idle(0, 1, 0, false);
  idle.enqueue("k", [] {});
  idle.synchronize();
  const std::uint64_t before = idle.last_enqueued();
  Event event(/*enable_timing=*/true);
  event.record(idle);
  EXPECT_EQ(idle.last_enqueued(), before) << "no marker task for an idle stream";
  EXPECT_TRUE(event.query());
  event.synchronize();
  // Still a point in the stream's order: work queued after it is not before it.
  Gate gate;
  idle.enqueue("held", [&] { gate.wait(); });
  Event later(true);
  later.record(idle);
  EXPECT_FALSE(later.query());
  gate.open();
  later.synchronize();
  EXPECT_GE(event.elapsed_ms(later), 0.0);
}

TEST(Event, RecordOnAnIdleFailedStreamCarriesTheError) {
  Stream side(0, 1, 0, false);
  Stream main_stream(0, 2, 0, false);
  side.enqueue("side_kernel", [] { throw std::runtime_error("bad"); });
  side.wait_completed(side.last_enqueued());  // idle, error pending
  Event done;
  done.record(side);
  EXPECT_TRUE(done.query());
  done.block(main_stream);
  EXPECT_THROW(main_stream.synchronize(), vnpu::KernelError);
}

TEST(Event, ChainAcrossFourStreams) {
  constexpr int kStreams = 4;
  constexpr int kRounds = 200;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < kStreams; ++i) streams.push_back(std::make_unique<Stream>(0, i, 0, false));

  std::vector<int> log;  // appended by four different workers, ordered by events
  std::vector<std::unique_ptr<Event>> events;
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kStreams; ++i) {
      Stream& s = *streams[static_cast<std::size_t>(i)];
      if (!events.empty()) events.back()->block(s);
      s.enqueue("append", [&log, i, round] {
        // A little jitter so that unordered execution would show.
        if ((round + i) % 17 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        log.push_back(i);
      });
      events.push_back(std::make_unique<Event>());
      events.back()->record(s);
    }
  }
  events.back()->synchronize();
  for (auto& s : streams) s->synchronize();
  ASSERT_EQ(log.size(), static_cast<std::size_t>(kStreams * kRounds));
  for (std::size_t k = 0; k < log.size(); ++k) ASSERT_EQ(log[k], static_cast<int>(k % kStreams));
}

TEST(Event, SynchronousStreamEvents) {
  Stream stream(0, 0, 0, true);
  Event start(true);
  Event end(true);
  start.record(stream);
  EXPECT_TRUE(start.query());
  stream.enqueue("sleep", [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
  end.record(stream);
  EXPECT_TRUE(end.query());
  EXPECT_GE(start.elapsed_ms(end), 5.0);
}

}  // namespace
