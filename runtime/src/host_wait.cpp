#include "vnpu/host_wait.h"

#include <atomic>

namespace vnpu {
namespace {

std::atomic<void* (*)()> g_enter{nullptr};
std::atomic<void (*)(void*)> g_leave{nullptr};
thread_local bool t_stream_worker = false;

}  // namespace

void set_host_wait_hooks(HostWaitHooks hooks) {
  // leave before enter: a waiter that sees enter also sees its leave.
  g_leave.store(hooks.leave, std::memory_order_release);
  g_enter.store(hooks.enter, std::memory_order_release);
}

HostWaitScope::HostWaitScope() {
  if (t_stream_worker) return;
  void* (*enter)() = g_enter.load(std::memory_order_acquire);
  if (enter == nullptr) return;
  leave_ = g_leave.load(std::memory_order_acquire);
  token_ = enter();
}

HostWaitScope::~HostWaitScope() {
  if (leave_ != nullptr) leave_(token_);
}

void mark_stream_worker_thread() { t_stream_worker = true; }
bool is_stream_worker_thread() { return t_stream_worker; }

}  // namespace vnpu
