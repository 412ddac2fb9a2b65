#include "process_fence.h"

#include <atomic>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace vnpu::detail {
namespace {

#if defined(__linux__) && defined(SYS_membarrier)
long membarrier(int command) { return syscall(SYS_membarrier, command, 0, 0); }

// 0: not asked yet (in this process), 1: available, -1: not available.
std::atomic<int> g_state{0};
void forget_in_child() { g_state.store(0, std::memory_order_relaxed); }
[[maybe_unused]] const int g_atfork_registered = pthread_atfork(nullptr, nullptr, &forget_in_child);

int query_and_register() {
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return -1;
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 ? 1 : -1;
}
#endif

}  // namespace

bool process_wide_fence_available() noexcept {
#if defined(__linux__) && defined(SYS_membarrier)
  int state = g_state.load(std::memory_order_acquire);
  if (state == 0) {
    state = query_and_register();
    g_state.store(state, std::memory_order_release);
  }
  return state == 1;
#else
  return false;
#endif
}

bool process_wide_fence() noexcept {
#if defined(__linux__) && defined(SYS_membarrier)
  return membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
#else
  return false;
#endif
}

}  // namespace vnpu::detail
