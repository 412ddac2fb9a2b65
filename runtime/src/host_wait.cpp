#include "vnpu/host_wait.h"

#include <atomic>

namespace vnpu {
namespace {

std::atomic<void* (*)()> g_enter{nullptr};
std::atomic<void (*)(void*)> g_leave{nullptr};
thread_local bool t_stream_worker = false;
std::atomic<int> g_blocked_host_threads{0};

}  // namespace

void set_host_wait_hooks(HostWaitHooks hooks) {
  // leave before enter: a waiter that sees enter also sees its leave.
  g_leave.store(hooks.leave, std::memory_order_release);
  g_enter.store(hooks.enter, std::memory_order_release);
}

HostWaitScope::HostWaitScope() {
  if (t_stream_worker) return;
  counted_ = true;
  g_blocked_host_threads.fetch_add(1, std::memory_order_relaxed);
  void* (*enter)() = g_enter.load(std::memory_order_acquire);
  if (enter == nullptr) return;
  leave_ = g_leave.load(std::memory_order_acquire);
  token_ = enter();
}

HostWaitScope::~HostWaitScope() {
  // Counted as busy again before re-acquiring the GIL: it is about to run.
  if (counted_) g_blocked_host_threads.fetch_sub(1, std::memory_order_relaxed);
  if (leave_ != nullptr) leave_(token_);
}

int blocked_host_threads() { return g_blocked_host_threads.load(std::memory_order_relaxed); }

void mark_stream_worker_thread() { t_stream_worker = true; }
bool is_stream_worker_thread() { return t_stream_worker; }

}  // namespace vnpu
