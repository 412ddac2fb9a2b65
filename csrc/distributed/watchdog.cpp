#include "csrc/distributed/watchdog.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>

#include <vnpu/environment.h>

namespace torch_npu {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool tears_down() {
  const vnpu::Environment& env = vnpu::environment();
  return !env.hccl_blocking_wait && (env.hccl_async_error_handling == 1 || env.hccl_async_error_handling == 3);
}

}  // namespace

Watchdog::Watchdog(int rank) : rank_(rank) {
  if (vnpu::environment().hccl_async_error_handling_old_name) {
    TORCH_WARN_ONCE("Environment variable HCCL_ASYNC_ERROR_HANDLING is deprecated; use "
                    "TORCH_HCCL_ASYNC_ERROR_HANDLING instead");
  }
  if (vnpu::environment().hccl_enable_monitoring) monitor_ = std::thread([this] { monitor_loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (monitor_.joinable()) monitor_.join();
}

void Watchdog::check_not_aborted() const {
  if (!aborted_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(false, "[Rank ", rank_, "] ProcessGroupHCCL was aborted after a collective failed "
              "(TORCH_HCCL_ASYNC_ERROR_HANDLING=2); create a new process group to go on. The failure: ",
              abort_reason_);
}

void Watchdog::started() { running_since_ns_.store(now_ns(), std::memory_order_release); }

void Watchdog::finished() { running_since_ns_.store(0, std::memory_order_release); }

void Watchdog::failed(const std::string& message) {
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

void Watchdog::monitor_loop() {
  const auto limit = std::chrono::seconds(vnpu::environment().hccl_heartbeat_timeout_s);
  const auto period = std::min<std::chrono::milliseconds>(std::chrono::seconds(1), limit / 4);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [&] { return stopping_; })) {
    const int64_t since = running_since_ns_.load(std::memory_order_acquire);
    if (since == 0 || std::chrono::nanoseconds(now_ns() - since) < limit) continue;
    lock.unlock();
    take_process_down("[Rank " + std::to_string(rank_) + "] Heartbeat monitor timed out! Process will be "
                      "terminated after dumping debug info. A collective has been running for more than " +
                      std::to_string(limit.count()) + " seconds (TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC) without "
                      "finishing: a peer that stopped calling collectives, or a hang in the transport.");
  }
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
