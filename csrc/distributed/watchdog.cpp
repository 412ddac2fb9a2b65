#include "csrc/distributed/watchdog.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>

#include <vnpu/environment.h>
#include <vnpu/log.h>

namespace torch_npu {
namespace {

std::atomic<int64_t> g_dispatch_ms_for_testing{0};
std::atomic<int64_t> g_exec_ms_for_testing{0};

// The job-store key a rank whose collective failed sets to its rank
// (torch_npu's EXCEPTION_DUMP): the other ranks' world groups dump on it.
constexpr const char* kDumpSignalKey = "exception_dump";

// torch_npu's ProcessGroupHCCL reports these whatever the log levels.
void log_warning(const std::string& message) {
  vnpu::log::write_always(vnpu::log::Level::kWarning, "ProcessGroupHCCL.cpp", message);
}
void log_error(const std::string& message) {
  vnpu::log::write_always(vnpu::log::Level::kError, "ProcessGroupHCCL.cpp", message);
}

bool tears_down() {
  const vnpu::Environment& env = vnpu::environment();
  return !env.hccl_blocking_wait && (env.hccl_async_error_handling == 1 || env.hccl_async_error_handling == 3);
}

}  // namespace

std::chrono::milliseconds dispatch_timeout() {
  if (const int64_t ms = g_dispatch_ms_for_testing.load()) return std::chrono::milliseconds(ms);
  // torch_npu: HCCL_EXEC_TIMEOUT - 30 s when that lies in (120, 600) s, else 600 s.
  std::uint64_t seconds = 600;
  const std::uint64_t exec = vnpu::environment().hccl_exec_timeout_s.value_or(0);
  if (exec > 0 && exec < 600 + 30 && exec > 120 + 30) seconds = exec - 30;
  return std::chrono::seconds(seconds);
}

std::chrono::milliseconds exec_dump_timeout() {
  if (const int64_t ms = g_exec_ms_for_testing.load()) return std::chrono::milliseconds(ms);
  std::int64_t exec = static_cast<std::int64_t>(vnpu::environment().hccl_exec_timeout_s.value_or(0));
  if (exec <= 0) exec = static_cast<std::int64_t>(kDefaultHcclExecTimeoutS);
  return std::chrono::seconds(std::max<std::int64_t>(60, exec - 60));
}

void set_watchdog_limits_for_testing(int64_t dispatch_ms, int64_t exec_ms) {
  g_dispatch_ms_for_testing.store(std::max<int64_t>(0, dispatch_ms));
  g_exec_ms_for_testing.store(std::max<int64_t>(0, exec_ms));
}

Watchdog::Watchdog(int rank, bool world, c10::intrusive_ptr<c10d::Store> signal_store)
    : rank_(rank),
      dispatch_timeout_(dispatch_timeout()),
      exec_timeout_(exec_dump_timeout()),
      heartbeat_timeout_(vnpu::environment().hccl_enable_monitoring
                             ? std::optional<std::chrono::seconds>(vnpu::environment().hccl_heartbeat_timeout_s)
                             : std::nullopt),
      world_(world),
      signal_store_(std::move(signal_store)),
      last_beat_(std::chrono::steady_clock::now()) {
  if (vnpu::environment().hccl_async_error_handling_old_name) {
    TORCH_WARN_ONCE("Environment variable HCCL_ASYNC_ERROR_HANDLING is deprecated; use "
                    "TORCH_HCCL_ASYNC_ERROR_HANDLING instead");
  }
  if (world && heartbeat_timeout_) {
    dump_pipe_ = std::make_unique<DumpPipe>(rank);
    if (!dump_pipe_->active()) dump_pipe_.reset();
    const auto& env = vnpu::environment();
    watches_signal_ = signal_store_ && env.hccl_dump_on_timeout && env.hccl_trace_buffer_size > 0;
    if (dump_pipe_ || watches_signal_) {
      std::lock_guard<std::mutex> lock(mutex_);
      poller_ = std::thread([this] { poll_loop(); });
    }
  }
}

Watchdog::~Watchdog() {
  if (world_ && StatusSave::enabled()) StatusSave::instance().write(/*end=*/true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (poller_.joinable()) poller_.join();
}

std::shared_ptr<InFlight> Watchdog::issued(const CollectiveInfo& info, std::optional<uint64_t> trace_id) {
  auto flight = std::make_shared<InFlight>();
  flight->info = info;
  flight->trace_id = trace_id;
  flight->issued = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_.push_back(flight);
  if (!poller_.joinable()) poller_ = std::thread([this] { poll_loop(); });
  return flight;
}

void Watchdog::poll_loop() {
  // Often enough for the limits (tests shorten them), at most once a second.
  std::chrono::milliseconds shortest = std::min(dispatch_timeout_, exec_timeout_);
  if (heartbeat_timeout_) shortest = std::min<std::chrono::milliseconds>(shortest, *heartbeat_timeout_);
  const auto period = std::clamp<std::chrono::milliseconds>(shortest / 4,
                                                            std::chrono::milliseconds(10), std::chrono::seconds(1));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [&] { return stopping_; })) {
    lock.unlock();
    poll_once();
    lock.lock();
  }
}

void Watchdog::poll_once() {
  std::vector<std::shared_ptr<InFlight>> flights;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    flights = in_flight_;
  }
  const auto now = std::chrono::steady_clock::now();
  bool dump = false;
  for (const auto& flight : flights) {
    const int state = flight->state.load(std::memory_order_acquire);
    const auto age = now - flight->issued;
    auto work = [&] {  // built only for a warning: most polls print none
      return "Process group work " + c10d::opTypeToString(flight->info.type) + ", seq_num " +
             std::to_string(flight->info.seq);
    };
    if (state == 0 && !flight->dispatch_reported && age > dispatch_timeout_) {
      log_warning(work() + " dispatch timeout. ");
      flight->dispatch_reported = true;
    } else if (state > 0 && flight->dispatch_reported) {
      log_warning(work() + " dispatch success. This warning log can be ignored.");
      flight->dispatch_reported = false;
    }
    if (state < 2 && !flight->exec_checked && age > exec_timeout_) {
      flight->exec_checked = true;
      dump = true;
    }
  }
  if (heartbeat_timeout_ && world_) dump |= heartbeat_stopped(!flights.empty(), now);
  if (dump && vnpu::environment().hccl_dump_on_timeout) dump_debug_info(rank_, std::chrono::seconds(3));
  // Asked through the pipe: best effort, in the background; the job goes on.
  if (dump_pipe_ && dump_pipe_->should_dump()) dump_debug_info(rank_, std::chrono::milliseconds(0));
  if (world_ && StatusSave::enabled() && StatusSave::instance().due()) StatusSave::instance().write(/*end=*/false);
  if (watches_signal_ && !dumped_.load() &&
      now - last_signal_check_ >= std::chrono::milliseconds(vnpu::environment().hccl_coord_check_ms)) {
    last_signal_check_ = now;
    check_dump_signal();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                  [](const std::shared_ptr<InFlight>& f) {
                                    return f->state.load(std::memory_order_acquire) == 2 && !f->dispatch_reported;
                                  }),
                   in_flight_.end());
}

// Note [The heartbeat beats while collectives are in flight]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Real torch_npu's watchdog thread counts a heartbeat for each in-flight
// work it examines, and its monitor (TORCH_HCCL_ENABLE_MONITORING=1) checks
// every TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC that the count moved. A rank
// waiting in a long collective therefore has a heartbeat; a rank with
// nothing in flight for that long has none, and its world group logs it and,
// with TORCH_HCCL_DUMP_ON_TIMEOUT=1, dumps the flight recorder's trace and
// the Python stacks, then goes on (the dump counts as a beat, so an idle rank
// dumps at most once per two periods). The monitor never ends the process:
// a collective that hangs is ended by its own timeout. vNPU has no watchdog
// thread that could hang in a driver call, so "no heartbeat" is exactly "no
// collective in flight for a period".
bool Watchdog::heartbeat_stopped(bool in_flight, std::chrono::steady_clock::time_point now) {
  if (in_flight) {
    last_beat_ = now;
    return false;
  }
  if (now - last_beat_ < *heartbeat_timeout_) return false;
  last_beat_ = now;
  if (!reported_no_heartbeat_) {
    reported_no_heartbeat_ = true;
    log_error("[Rank " + std::to_string(rank_) + "] First PG on this rank that detected no heartbeat of its "
              "watchdog.");
  }
  return true;
}

void Watchdog::check_not_aborted() const {
  if (!aborted_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(false, "[Rank ", rank_, "] ProcessGroupHCCL was aborted after a collective failed "
              "(TORCH_HCCL_ASYNC_ERROR_HANDLING=2); create a new process group to go on. The failure: ",
              abort_reason_);
}

void Watchdog::check_dump_signal() {
  try {
    if (!signal_store_->check({kDumpSignalKey})) return;
    const std::vector<uint8_t> value = signal_store_->get(kDumpSignalKey);
    int from = -1;
    if (value.size() == sizeof(from)) std::memcpy(&from, value.data(), sizeof(from));
    log_error("[Rank " + std::to_string(rank_) + "] Received a global dump signal from rank " +
              std::to_string(from) + ", and will start to dump the debug info.");
  } catch (const std::exception& e) {
    log_error("[Rank " + std::to_string(rank_) + "] Failed to get the exception dump flag from the global store. " +
              e.what());
    return;
  }
  if (!dumped_.exchange(true)) dump_debug_info(rank_, std::chrono::milliseconds(0));
}

void Watchdog::failed(const std::string& message) {
  if (StatusSave::enabled()) StatusSave::instance().write(/*end=*/false, message);
  // As torch_npu's dumpOnException: any failed collective (timed out, a peer
  // gone, a mismatch) dumps the trace first, and tells the other ranks to.
  if (vnpu::environment().hccl_dump_on_timeout) {
    if (signal_store_) {
      try {
        const int rank = rank_;
        const auto* bytes = reinterpret_cast<const uint8_t*>(&rank);
        signal_store_->set(kDumpSignalKey, std::vector<uint8_t>(bytes, bytes + sizeof(rank)));
      } catch (const std::exception& e) {
        log_error("[Rank " + std::to_string(rank_) + "] Failed to set the exception dump signal in the store. " +
                  e.what());
      }
    }
    dumped_.store(true);
    dump_debug_info(rank_, std::chrono::seconds(10));
  }
  if (tears_down()) take_process_down(message);
  if (vnpu::environment().hccl_async_error_handling == 2) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abort_reason_.empty()) abort_reason_ = message;
    aborted_.store(true, std::memory_order_release);
  }
}

void Watchdog::take_process_down(const std::string& message) const {
  std::fprintf(stderr, "%s\n[Rank %d] To avoid data inconsistency, we are taking the entire process down.\n",
               message.c_str(), rank_);
  std::fflush(stderr);
  std::abort();
}

std::string timeout_message(const CollectiveInfo& info, std::chrono::milliseconds ran, const std::string& cause) {
  return "[Rank " + std::to_string(info.rank) + "] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=" +
         std::to_string(info.seq) + ", OpType=" + c10d::opTypeToString(info.type) +
         ", NumelIn=" + std::to_string(info.numel_in) + ", NumelOut=" + std::to_string(info.numel_out) +
         ", Timeout(ms)=" + std::to_string(info.timeout_ms) + ") ran for " + std::to_string(ran.count()) +
         " milliseconds before timing out. Some HCCL operations have failed or timed out. Due to the asynchronous "
         "nature of ASCEND kernels, subsequent NPU operations might run on corrupted/incomplete data. (" + cause + ")";
}

}  // namespace torch_npu
