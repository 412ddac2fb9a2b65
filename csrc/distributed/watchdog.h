// The watchdog of one ProcessGroupHCCL: what happens when a collective fails,
// and the heartbeat monitor.
//
// Real torch_npu runs a watchdog thread that polls every WorkHCCL. Here a
// collective is a stream task that gives up at its own deadline, so the
// watchdog's work happens in the task itself (watched()): a transport
// timeout becomes torch_npu's watchdog text, and the failure is handled as
// TORCH_HCCL_ASYNC_ERROR_HANDLING says:
//   0 (and 2): the error reaches the next sync on a stream that depends on
//      the collective (its outputs are poisoned); with 2 the group is also
//      aborted, so later collectives raise at once instead of waiting;
//   1 (the default) and 3: the error is printed and the process ends
//      (SIGABRT), as torch_npu tears a job down rather than let it compute
//      on corrupted data;
// unless TORCH_HCCL_BLOCKING_WAIT=1 (wait() raises it). A collective that
// ran on the caller (a small one on idle streams) is handled alike, so the
// fast path never changes what a failure does; in modes 0 and 2 its error
// raises at the call.
//
// TORCH_HCCL_ENABLE_MONITORING=1 adds the heartbeat monitor: a thread that
// ends the process when one collective has been running for longer than
// TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC, whatever its own deadline.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace torch_npu {

// What the watchdog text names about one collective.
struct CollectiveInfo {
  int rank;
  uint64_t seq;
  c10d::OpType type;
  int64_t numel_in;
  int64_t numel_out;
  int64_t timeout_ms;
};

class Watchdog {
 public:
  explicit Watchdog(int rank);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Raises at the call when the group was aborted (handling mode 2).
  void check_not_aborted() const;
  bool aborted() const { return aborted_.load(); }

  // Around one collective's stage 2 (the heartbeat).
  void started();
  void finished();

  // A failed collective, `message` in its final words: applies the
  // handling mode (may end the process); returns when the error should
  // propagate as usual.
  void failed(const std::string& message);

 private:
  void monitor_loop();
  [[noreturn]] void take_process_down(const std::string& message) const;

  const int rank_;
  std::atomic<int64_t> running_since_ns_{0};  // 0: no collective running
  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;
  std::string abort_reason_;  // guarded by mutex_
  bool stopping_ = false;     // guarded by mutex_
  std::condition_variable wake_;
  std::thread monitor_;
};

// The watchdog's words for a transport that gave up at the deadline.
std::string timeout_message(const CollectiveInfo& info, std::chrono::milliseconds ran, const std::string& cause);

// Wraps a collective's stage 2: heartbeat, timeout text, handling mode.
template <typename Body>
auto watched(Body&& body, CollectiveInfo info, std::shared_ptr<Watchdog> watchdog) {
  return [body = std::forward<Body>(body), info, watchdog = std::move(watchdog)]() mutable {
    const auto start = std::chrono::steady_clock::now();
    watchdog->started();
    try {
      body();
      watchdog->finished();
    } catch (const std::exception& e) {
      watchdog->finished();
      std::string what = e.what();
      if (what.find("Timed out") != std::string::npos || what.find("timed out") != std::string::npos) {
        what = timeout_message(
            info, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start),
            what.substr(0, what.find('\n')));
        watchdog->failed(what);
        TORCH_CHECK(false, what);
      }
      watchdog->failed("[Rank " + std::to_string(info.rank) + "] " + what.substr(0, what.find('\n')));
      throw;
    }
  };
}

}  // namespace torch_npu
