#include "vnpu/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <utility>

namespace vnpu {
namespace {

std::atomic<TraceHook> g_trace_hook{nullptr};
thread_local std::uint64_t t_correlation_id = 0;
thread_local int t_block_dim = 0;

}  // namespace

const char* task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::kKernel: return "kernel";
    case TaskKind::kCopy: return "copy";
    case TaskKind::kMarker: return "marker";
    case TaskKind::kWait: return "wait";
    case TaskKind::kHost: return "host";
    case TaskKind::kGraph: return "graph";
  }
  return "unknown";
}

void set_trace_hook(TraceHook hook) { g_trace_hook.store(hook, std::memory_order_release); }
TraceHook trace_hook() { return g_trace_hook.load(std::memory_order_acquire); }

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int32_t this_thread_system_id() {
  thread_local const auto id = static_cast<std::int32_t>(syscall(SYS_gettid));
  return id;
}

void set_running_task_block_dim(int threads) { t_block_dim = threads > t_block_dim ? threads : t_block_dim; }
int exchange_running_task_block_dim(int value) { return std::exchange(t_block_dim, value); }

void set_correlation_id(std::uint64_t id) { t_correlation_id = id; }
std::uint64_t correlation_id() { return t_correlation_id; }

}  // namespace vnpu
