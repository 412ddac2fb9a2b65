// Event: a marker in a stream's task order, like aclrtEvent / cudaEvent.
//
// record(stream) enqueues a marker task; the event completes when the stream
// has completed that task. With timing enabled the marker stamps a
// steady-clock time when it runs, so elapsed_ms() measures device time
// between two markers. On an idle stream record() stamps the event at once
// instead (nothing is queued for a marker to follow).
//
// Recorded on a capturing stream (graph.h), an event marks a point in the
// capture instead: nothing is queued. Another stream that waits for it takes
// part in the capture (the adaptor forks the capture onto it; a stream
// capturing the same graph needs no wait: a replay runs the graph's tasks in
// the order they were captured). Host waits on such an event (query,
// synchronize, elapsed_ms) throw Error(kStreamCapture): its work has not run.
//
// Thread-safety: all methods may be called from any thread; recording the
// same event concurrently from two threads is a user race (last one wins),
// as with CUDA events.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "vnpu/async_error.h"

namespace vnpu {

class Graph;
class Stream;

class Event {
 public:
  explicit Event(bool enable_timing = false);

  // Enqueues the marker on `stream`; later query/synchronize refer to it.
  void record(Stream& stream);

  // True when the event was never recorded or its marker has completed.
  bool query() const;

  // Blocks until the marker completes; throws KernelError if a task before
  // the marker failed (and clears that error on the stream: it is reported).
  void synchronize() const;

  // The error the marker saw (nullptr: none, not recorded, or not run yet).
  std::shared_ptr<const AsyncError> error() const;

  // Makes future work on `waiter` wait for this event's marker (no-op when
  // the event was never recorded) and adopt the marker's error, if any.
  // Does not block the caller. For an event recorded in a capture, `waiter`
  // must capture into the same graph (a no-op then), else Error(kStreamCapture).
  void block(Stream& waiter) const;

  // Recorded on a capturing stream: the graph, and how many tasks its stream
  // had captured when it was recorded (nullptr / 0 otherwise).
  const std::shared_ptr<Graph>& captured_graph() const { return captured_graph_; }
  std::size_t captured_position() const { return captured_position_; }

  // Milliseconds between this event's marker and `end`'s marker.
  // Throws Error(kInvalidValue) unless both have timing enabled, were
  // recorded, and have completed.
//
// Errors (Note [Asynchronous errors] in stream.h): when the marker runs, it
// takes a copy of its stream's pending error. synchronize() throws it, and
// block() hands it to the waiting stream, so the failure reaches everything
// that depends on work before the marker.
  double elapsed_ms(const Event& end) const;

  // When the marker ran, in nanoseconds of the host's monotonic clock
  // (torch_npu's Event.recorded_time, aclrtEventGetTimestamp on a chip):
  // waits for the marker as synchronize() does. Throws Error(kInvalidValue)
  // unless the event has timing enabled and was recorded.
  std::uint64_t recorded_time_ns() const;

  bool enable_timing() const { return enable_timing_; }
  bool recorded() const { return stream_ != nullptr; }
  Stream* stream() const { return stream_; }
  std::uint64_t sequence() const { return seq_; }

 private:
  struct Stamp {
    std::atomic<bool> done{false};
    std::chrono::steady_clock::time_point time;
    std::shared_ptr<const AsyncError> error;  // the stream's pending error when the marker ran
  };
  bool enable_timing_;
  Stream* stream_ = nullptr;
  std::uint64_t seq_ = 0;
  std::shared_ptr<Stamp> stamp_;
  std::shared_ptr<Graph> captured_graph_;
  std::size_t captured_position_ = 0;
};

}  // namespace vnpu
