#include "csrc/graph/external_event.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include <vnpu/error.h>
#include <vnpu/graph.h>
#include <vnpu/stream.h>

#include "csrc/core/npu_stream.h"

namespace torch_npu {

struct ExternalEvent::State {
  std::mutex mutex;
  std::condition_variable cv;
  bool set = false;
};

ExternalEvent::ExternalEvent() : state_(std::make_shared<State>()) {}

void ExternalEvent::record(const c10::Stream& stream) {
  launch_host_task(stream, "external_event_record", [state = state_] {
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->set = true;
    }
    state->cv.notify_all();
  });
}

void ExternalEvent::wait(const c10::Stream& stream) {
  // Queued, the wait depends on the host until it ran; captured, every
  // replay of its graph does (note_host_dependent_work, npu_stream.h).
  vnpu::Stream& runtime = runtime_stream(stream);
  std::shared_ptr<vnpu::Graph> graph = runtime.capture_graph();
  const bool queued = graph == nullptr;
  if (graph) graph->mark_waits_on_host();
  if (queued) note_host_dependent_work(+1);
  try {
    launch_host_task(stream, "external_event_wait", [state = state_, queued] {
      struct Done {
        bool on;
        ~Done() { if (on) note_host_dependent_work(-1); }
      } done{queued};
      wait_until_set(*state);
    });
  } catch (...) {
    if (queued) note_host_dependent_work(-1);
    throw;
  }
}

void ExternalEvent::wait_until_set(State& state) {
  vnpu::Stream* self = vnpu::Stream::running_on_this_thread();
  std::unique_lock<std::mutex> lock(state.mutex);
  if (state.set) return;
  if (self == nullptr || self->synchronous()) {
    // Run inline on the host thread (ASCEND_LAUNCH_BLOCKING=1): the record
    // this waits for could only come later from this same thread.
    throw vnpu::Error(vnpu::ErrorCode::kInvalidValue,
                      "ExternalEvent.wait: the event was not recorded, and with ASCEND_LAUNCH_BLOCKING=1 "
                      "the wait runs on the calling thread, which would wait forever. Record the event "
                      "first, or run without ASCEND_LAUNCH_BLOCKING.");
  }
  // Poll for an abort of the waiting stream (a watchdog gave up on it),
  // which would otherwise never end this wait.
  while (!state.cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return state.set; })) {
    if (self->aborted()) {
      throw vnpu::Error(vnpu::ErrorCode::kAborted,
                        "ExternalEvent.wait: the stream was aborted while waiting for the event");
    }
  }
}

void ExternalEvent::reset(const c10::Stream& stream) {
  launch_host_task(stream, "external_event_reset", [state = state_] {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->set = false;
  });
}

bool ExternalEvent::is_set() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->set;
}

}  // namespace torch_npu
