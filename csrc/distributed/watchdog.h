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
// TORCH_HCCL_ENABLE_MONITORING=1 adds the heartbeat monitor to the world
// group's poller: with no collective in flight for
// TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC it reports that the watchdog had no
// heartbeat and, with TORCH_HCCL_DUMP_ON_TIMEOUT=1, dumps and goes on (Note
// [The heartbeat beats while collectives are in flight]); and the
// world group's poller reads the dump pipe (dump_pipe.h) from the start and,
// with TORCH_HCCL_DUMP_ON_TIMEOUT=1, looks every TORCH_HCCL_COORD_CHECK_MILSEC
// for the store key "exception_dump" that a rank whose collective failed
// sets (with its rank, as torch_npu does): every rank then dumps its trace,
// once, and goes on.
//
// The poller (a thread started with the group's first collective) watches
// the collectives issued and not finished, as real torch_npu's watchdog
// loop does (checkDispatch / checkExec):
//   - one whose task has not begun (queued behind other work) for the
//     dispatch timeout (HCCL_EXEC_TIMEOUT - 30 s when that lies in
//     150-630 s, else 600 s) gets torch_npu's "dispatch timeout" warning,
//     and "dispatch success" once it begins;
//   - one unfinished after max(60, HCCL_EXEC_TIMEOUT - 60) s (default
//     HCCL_EXEC_TIMEOUT 1836) makes, with TORCH_HCCL_DUMP_ON_TIMEOUT=1, the
//     flight recorder's dump (flight_recorder.h), once per collective. A
//     collective that fails (at its deadline, or for any other cause) dumps
//     too, before the handling mode may end the process.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "csrc/distributed/dump_pipe.h"
#include "csrc/distributed/flight_recorder.h"
#include "csrc/distributed/status_save.h"

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

// One issued collective, shared by its task and the poller.
struct InFlight {
  CollectiveInfo info;
  std::optional<uint64_t> trace_id;  // its flight-recorder entry
  std::shared_ptr<const StatusKey> status;  // with TORCH_HCCL_STATUS_SAVE_ENABLE=1
  std::chrono::steady_clock::time_point issued;
  std::atomic<int> state{0};  // 0 queued, 1 running, 2 finished
  std::chrono::steady_clock::time_point began;  // written before state becomes 1
  bool dispatch_reported = false;  // the poller's own
  bool exec_checked = false;       // the poller's own

  void begin() {
    began = std::chrono::steady_clock::now();
    state.store(1, std::memory_order_release);
    FlightRecorder::instance().started(trace_id);
    if (status) StatusSave::instance().update(status->pg_id, status->comm_id, info.seq, info.type, "start");
  }
  // A failed collective stays "started" in the recorder, as a timed-out one
  // does in torch's.
  void end(bool succeeded) {
    if (succeeded) FlightRecorder::instance().completed(trace_id);
    if (succeeded && status) StatusSave::instance().update(status->pg_id, status->comm_id, info.seq, info.type, "end");
    state.store(2, std::memory_order_release);
  }
};

// HCCL's execution timeout when HCCL_EXEC_TIMEOUT is unset (s), torch_npu's default.
constexpr uint64_t kDefaultHcclExecTimeoutS = 1836;

// The poller's limits from HCCL_EXEC_TIMEOUT, as real torch_npu computes them.
std::chrono::milliseconds dispatch_timeout();
std::chrono::milliseconds exec_dump_timeout();
// Tests only (torch_npu._C._distributed_c10d._set_watchdog_limits_for_testing):
// replaces both for groups created afterwards; 0 restores the defaults.
void set_watchdog_limits_for_testing(int64_t dispatch_ms, int64_t exec_ms);

class Watchdog {
 public:
  // `world`: the world group's (it alone keeps the dump pipe, dump_pipe.h,
  // and looks for the dump signal). `signal_store`: the job's store (below
  // its prefixes), where a failed collective signals the other ranks to dump.
  Watchdog(int rank, bool world, c10::intrusive_ptr<c10d::Store> signal_store);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Raises at the call when the group was aborted (handling mode 2).
  void check_not_aborted() const;
  bool aborted() const { return aborted_.load(); }

  // A failed collective, `message` in its final words: dumps the flight
  // recorder (TORCH_HCCL_DUMP_ON_TIMEOUT=1), then applies the handling mode
  // (may end the process); returns when the error should propagate as usual.
  void failed(const std::string& message);

  // A collective was issued: the poller watches it until it ends.
  std::shared_ptr<InFlight> issued(const CollectiveInfo& info, std::optional<uint64_t> trace_id);

 private:
  void poll_loop();
  void poll_once();
  [[noreturn]] void take_process_down(const std::string& message) const;
  // Whether the heartbeat stopped: nothing in flight for a heartbeat period
  // (reported once). The poller's own.
  bool heartbeat_stopped(bool in_flight, std::chrono::steady_clock::time_point now);
  // Dumps once when another rank set the store's dump signal.
  void check_dump_signal();

  const int rank_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;
  std::string abort_reason_;  // guarded by mutex_
  bool stopping_ = false;     // guarded by mutex_
  std::condition_variable wake_;
  const std::chrono::milliseconds dispatch_timeout_;
  const std::chrono::milliseconds exec_timeout_;
  const std::optional<std::chrono::seconds> heartbeat_timeout_;  // with TORCH_HCCL_ENABLE_MONITORING=1
  std::unique_ptr<DumpPipe> dump_pipe_;                // with monitoring, the world group's; the poller's own
  const bool world_;                                     // the world group's (status files, dump pipe and signal)
  const c10::intrusive_ptr<c10d::Store> signal_store_;  // null: no dump signal
  bool watches_signal_ = false;                         // the world group's, with monitoring and dumps on
  std::chrono::steady_clock::time_point last_signal_check_;  // the poller's own
  std::atomic<bool> dumped_{false};                     // this rank dumped for a failure or a signal
  std::chrono::steady_clock::time_point last_beat_;      // the poller's own: a collective last in flight, or the start
  bool reported_no_heartbeat_ = false;                   // the poller's own
  std::vector<std::shared_ptr<InFlight>> in_flight_;  // guarded by mutex_
  std::thread poller_;                                // started by the first issued()
};

// The watchdog's words for a transport that gave up at the deadline.
std::string timeout_message(const CollectiveInfo& info, std::chrono::milliseconds ran, const std::string& cause);

// Wraps a collective's stage 2: heartbeat, timeout text, handling mode.
template <typename Body>
auto watched(Body&& body, std::shared_ptr<InFlight> flight, std::shared_ptr<Watchdog> watchdog) {
  return [body = std::forward<Body>(body), flight = std::move(flight), watchdog = std::move(watchdog)]() mutable {
    const CollectiveInfo& info = flight->info;
    const auto start = std::chrono::steady_clock::now();
    flight->begin();
    try {
      body();
      flight->end(true);
    } catch (const std::exception& e) {
      flight->end(false);
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
