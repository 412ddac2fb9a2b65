#include "vnpu/event.h"

#include "vnpu/error.h"
#include "vnpu/stream.h"

namespace vnpu {

Event::Event(bool enable_timing) : enable_timing_(enable_timing) {}

void Event::record(Stream& stream) {
  // A fresh stamp per record: a marker from an earlier record may still be
  // queued and must not stamp the new one.
  auto stamp = std::make_shared<Stamp>();
  const bool timing = enable_timing_;
  const std::uint64_t seq = stream.enqueue("event_record", [stamp, timing] {
    if (timing) stamp->time = std::chrono::steady_clock::now();
    stamp->done.store(true, std::memory_order_release);  // publishes `time`
  });
  stream_ = &stream;
  seq_ = seq;
  stamp_ = std::move(stamp);
}

bool Event::query() const { return !recorded() || stream_->last_completed() >= seq_; }

void Event::synchronize() const {
  if (!recorded()) return;
  stream_->wait_for(seq_);
}

void Event::block(Stream& waiter) const {
  if (!recorded()) return;
  // A stream runs in order: its own earlier marker is always done first.
  if (&waiter == stream_) return;
  // Already complete: nothing to wait for, keep the waiter's queue short.
  if (query()) return;
  const Stream* source = stream_;
  const std::uint64_t seq = seq_;
  waiter.enqueue("stream_wait_event", [source, seq] { source->wait_completed(seq); });
}

double Event::elapsed_ms(const Event& end) const {
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
  // Completed but never stamped: the stream skipped the marker because an
  // earlier task on it failed.
  if (!stamp_->done.load(std::memory_order_acquire) ||
      !end.stamp_->done.load(std::memory_order_acquire)) {
    throw Error(ErrorCode::kInvalidValue,
                "Cannot measure elapsed time: an event's marker was skipped because an "
                "earlier task on its stream failed");
  }
  const std::chrono::duration<double, std::milli> elapsed = end.stamp_->time - stamp_->time;
  return elapsed.count();
}

}  // namespace vnpu
