#include "vnpu/event.h"

#include <string>

#include "vnpu/error.h"
#include "vnpu/graph.h"
#include "vnpu/stream.h"

namespace vnpu {

Event::Event(bool enable_timing) : enable_timing_(enable_timing) {}

void Event::record(Stream& stream) {
  if (stream.capturing()) {
    // A point in the capture: captured work has no place in the stream's
    // sequence to stamp.
    captured_graph_ = stream.capture_graph();
    if (captured_graph_) {
      captured_position_ = stream.captured_tasks();
      stream_ = &stream;
      seq_ = 0;
      stamp_ = std::make_shared<Stamp>();
      return;
    }
  }
  captured_graph_.reset();
  captured_position_ = 0;
  // A fresh stamp per record: a marker from an earlier record may still be
  // queued and must not stamp the new one.
  auto stamp = std::make_shared<Stamp>();
  const bool timing = enable_timing_;
  Stream* source = &stream;
  // An idle stream has nothing for a marker to follow: stamp the event now.
  // No worker wakes up for it, and nobody who waits on it waits for one to
  // (the host's sync after a collective or a copy, a future's completion).
  // A task another thread enqueues meanwhile is not ordered before this
  // record anyway.
  const std::uint64_t enqueued = stream.last_enqueued();
  if (stream.last_completed() >= enqueued) {
    if (timing) stamp->time = std::chrono::steady_clock::now();
    stamp->error = stream.pending_error();
    stamp->done.store(true, std::memory_order_release);
    stream_ = &stream;
    seq_ = enqueued;
    stamp_ = std::move(stamp);
    return;
  }
  const std::uint64_t seq = stream.enqueue(TaskKind::kMarker, "event_record", [stamp, timing, source] {
    if (timing) stamp->time = std::chrono::steady_clock::now();
    stamp->error = source->pending_error();
    stamp->done.store(true, std::memory_order_release);  // publishes `time` and `error`
  });
  stream_ = &stream;
  seq_ = seq;
  stamp_ = std::move(stamp);
}

namespace {
[[noreturn]] void throw_captured(const char* what) {
  throw Error(ErrorCode::kStreamCapture,
              std::string("operation not permitted when stream is capturing: ") + what +
                  " of an event recorded in a graph capture (its work runs only when the graph is replayed)");
}
}  // namespace

bool Event::query() const {
  if (captured_graph_) throw_captured("querying");
  return !recorded() || stream_->last_completed() >= seq_;
}

void Event::synchronize() const {
  if (!recorded()) return;
  if (captured_graph_) throw_captured("synchronizing");
  stream_->wait_completed(seq_);
  std::shared_ptr<const AsyncError> failure = error();
  if (!failure) return;
  // Reported here: the origin stream need not report it again (a stream
  // that adopted it through a wait still does, at its own sync point).
  stream_->clear_error_if(failure.get());
  throw KernelError(std::move(failure), stream_->stream_index());
}

std::shared_ptr<const AsyncError> Event::error() const {
  if (!recorded() || !stamp_->done.load(std::memory_order_acquire)) return nullptr;
  return stamp_->error;
}

void Event::block(Stream& waiter) const {
  if (!recorded()) return;
  // A stream runs in order: its own earlier marker is always done first.
  if (&waiter == stream_) return;
  if (captured_graph_) {
    // A replay runs the graph's tasks in capture order: the waiter's later
    // tasks come after the ones before the event.
    if (waiter.capture_graph() == captured_graph_) return;
    throw Error(ErrorCode::kStreamCapture,
                "operation not permitted when stream is capturing: NPU " + std::to_string(waiter.device_index()) +
                    " stream " + std::to_string(waiter.stream_index()) +
                    " waits for an event recorded in a graph capture it does not take part in");
  }
  if (query()) {
    // Already complete: nothing to wait for, keep the waiter's queue short;
    // only a failure before the marker must still reach the waiter, in order.
    std::shared_ptr<const AsyncError> failure = error();
    if (!failure) return;
    Stream* target = &waiter;
    waiter.enqueue(TaskKind::kWait, "stream_wait_event",
                   [target, failure] { target->adopt_error(failure); });
    return;
  }
  const Stream* source = stream_;
  Stream* target = &waiter;
  const std::uint64_t seq = seq_;
  waiter.enqueue(TaskKind::kWait, "stream_wait_event", [source, target, seq, stamp = stamp_] {
    source->wait_completed(seq);
    if (stamp->error) target->adopt_error(stamp->error);
  });
}

double Event::elapsed_ms(const Event& end) const {
  if (captured_graph_ || end.captured_graph_) throw_captured("timing");
  if (!enable_timing_ || !end.enable_timing_) {
    throw Error(ErrorCode::kInvalidValue,
                "Both events must be created with enable_timing=True to measure elapsed time");
  }
  if (!recorded() || !end.recorded()) {
    throw Error(ErrorCode::kInvalidValue,
                "Both events must be recorded before calculating elapsed time");
  }
  if (!query() || !end.query()) {
    throw Error(ErrorCode::kInvalidValue,
                "Both events must be completed before calculating elapsed time");
  }
  if (!stamp_->done.load(std::memory_order_acquire) ||
      !end.stamp_->done.load(std::memory_order_acquire)) {
    throw Error(ErrorCode::kInternal, "an event completed without its marker having run");
  }
  const std::chrono::duration<double, std::milli> elapsed = end.stamp_->time - stamp_->time;
  return elapsed.count();
}

std::uint64_t Event::recorded_time_ns() const {
  if (captured_graph_) throw_captured("the timestamp");
  if (!recorded()) {
    throw Error(ErrorCode::kInvalidValue, "Event must be recorded before getting recorded timestamp.");
  }
  if (!enable_timing_) {
    throw Error(ErrorCode::kInvalidValue,
                "Event must be created with enable_timing=True to get its recorded timestamp.");
  }
  synchronize();
  if (!stamp_->done.load(std::memory_order_acquire)) {
    throw Error(ErrorCode::kInternal, "an event completed without its marker having run");
  }
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(stamp_->time.time_since_epoch()).count());
}

}  // namespace vnpu
