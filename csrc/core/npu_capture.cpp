#include "csrc/core/npu_capture.h"

#include <mutex>
#include <thread>
#include <vector>

#include "csrc/core/npu_error.h"
#include <vnpu/error.h>
#include <vnpu/event.h>
#include <vnpu/graph.h>
#include <vnpu/stream.h>

namespace torch_npu {
namespace {

struct Fork {
  vnpu::Stream* stream;
  std::size_t joined = 0;  // its captured tasks the origin has waited for
};

struct Capture {
  vnpu::Stream* origin;
  std::shared_ptr<vnpu::Graph> graph;
  MempoolId pool;
  std::shared_ptr<CaptureRng> rng;
  CaptureErrorMode mode;
  std::thread::id thread;
  std::vector<Fork> forks;
};

std::mutex g_captures_mutex;
std::vector<Capture>& captures() {  // guarded by g_captures_mutex; few (one per capturing thread)
  static std::vector<Capture> all;
  return all;
}

Capture* find_capture(const vnpu::Graph* graph) {
  for (Capture& capture : captures()) {
    if (capture.graph.get() == graph) return &capture;
  }
  return nullptr;
}

std::string describe(const vnpu::Stream& stream) {
  return "NPU " + std::to_string(stream.device_index()) + " stream " + std::to_string(stream.stream_index());
}

[[noreturn]] void throw_capture_error(const std::string& what) {
  with_torch_errors([&] { throw vnpu::Error(vnpu::ErrorCode::kStreamCapture, what); });
  throw std::logic_error("unreachable");
}

void end_fork(vnpu::Stream& stream) {
  if (stream.capturing()) stream.end_capture();
  end_capture_to_pool(stream);
}

}  // namespace

CaptureErrorMode parse_capture_error_mode(const std::string& mode) {
  if (mode == "global") return CaptureErrorMode::kGlobal;
  if (mode == "thread_local") return CaptureErrorMode::kThreadLocal;
  if (mode == "relaxed") return CaptureErrorMode::kRelaxed;
  NPU_CHECK_WITH(ValueError, ErrCode::kParam, false,
                 "Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got ", mode);
  return CaptureErrorMode::kGlobal;
}

void register_capture(vnpu::Stream& origin, std::shared_ptr<vnpu::Graph> graph, MempoolId pool,
                      std::shared_ptr<CaptureRng> rng, CaptureErrorMode mode) {
  std::lock_guard<std::mutex> lock(g_captures_mutex);
  captures().push_back(Capture{&origin, std::move(graph), pool, std::move(rng), mode, std::this_thread::get_id(), {}});
}

void unregister_capture(vnpu::Stream& origin, bool check_joined) {
  std::vector<Fork> forks;
  {
    std::lock_guard<std::mutex> lock(g_captures_mutex);
    auto& all = captures();
    for (auto it = all.begin(); it != all.end(); ++it) {
      if (it->origin == &origin) {
        forks = std::move(it->forks);
        all.erase(it);
        break;
      }
    }
  }
  const vnpu::Stream* unjoined = nullptr;
  for (Fork& fork : forks) {
    if (unjoined == nullptr && fork.stream->captured_tasks() > fork.joined) unjoined = fork.stream;
    end_fork(*fork.stream);
  }
  if (check_joined && unjoined != nullptr) {
    throw_capture_error("operation not permitted when stream is capturing: the capture on " + describe(origin) +
                        " ended with unjoined work on " + describe(*unjoined) +
                        ", which joined the capture by waiting for one of its events; make the capturing stream "
                        "wait for that work before the capture ends (capture_stream.wait_stream(stream))");
  }
}

void before_event_wait(const vnpu::Event& event, vnpu::Stream& waiter) {
  const std::shared_ptr<vnpu::Graph>& graph = event.captured_graph();
  if (!graph) return;
  std::lock_guard<std::mutex> lock(g_captures_mutex);
  Capture* capture = find_capture(graph.get());
  if (capture == nullptr) {
    throw_capture_error("operation not permitted when stream is capturing: " + describe(waiter) +
                        " waits for an event recorded in a graph capture that has ended; record it again outside "
                        "the capture");
  }
  const std::shared_ptr<vnpu::Graph> waiter_graph = waiter.capture_graph();
  if (waiter_graph == graph) {
    // Inside the capture: the origin waiting for a forked stream joins it.
    if (&waiter != capture->origin) return;
    for (Fork& fork : capture->forks) {
      if (fork.stream == event.stream() && event.captured_position() > fork.joined) {
        fork.joined = event.captured_position();
      }
    }
    return;
  }
  if (waiter_graph) {
    throw_capture_error("operation not permitted when stream is capturing: " + describe(waiter) +
                        " captures another graph and cannot wait for an event of this one");
  }
  if (waiter.device_index() != capture->origin->device_index()) {
    throw_capture_error("operation not permitted when stream is capturing: a capture on NPU " +
                        std::to_string(capture->origin->device_index()) + " cannot fork onto " + describe(waiter) +
                        " (a graph lives on one device)");
  }
  // The fork: from now on the waiter's work belongs to the capture.
  begin_capture_to_pool(waiter, capture->pool);
  try {
    with_torch_errors([&] { waiter.begin_capture(graph); });
  } catch (...) {
    end_capture_to_pool(waiter);
    throw;
  }
  capture->forks.push_back(Fork{&waiter, 0});
}

std::shared_ptr<CaptureRng> capture_rng_of(const vnpu::Stream& stream) {
  std::lock_guard<std::mutex> lock(g_captures_mutex);
  for (const Capture& capture : captures()) {
    if (capture.origin == &stream) return capture.rng;
    for (const Fork& fork : capture.forks) {
      if (fork.stream == &stream) return capture.rng;
    }
  }
  return nullptr;
}

bool device_sync_skips_captures() {
  std::lock_guard<std::mutex> lock(g_captures_mutex);
  const std::thread::id self = std::this_thread::get_id();
  for (const Capture& capture : captures()) {
    if (capture.mode == CaptureErrorMode::kGlobal) return false;
    if (capture.mode == CaptureErrorMode::kThreadLocal && capture.thread == self) return false;
  }
  return true;
}

namespace {
thread_local bool t_host_constants_capturable = false;
}  // namespace

bool set_host_constants_capturable(bool on) {
  const bool previous = t_host_constants_capturable;
  t_host_constants_capturable = on;
  return previous;
}

bool host_constants_capturable() { return t_host_constants_capturable; }

}  // namespace torch_npu
