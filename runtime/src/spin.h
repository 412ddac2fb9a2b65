// Brief spinning before a thread blocks (stream workers, host waiters, the
// helper team): a wait that ends within microseconds never pays for a futex
// round trip. Internal to the runtime.
#pragma once

#include <chrono>
#include <thread>

namespace vnpu::detail {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::this_thread::yield();
#endif
}

// Spins until `ready()` holds or `spin_time` has passed; returns ready().
template <typename Ready>
bool spin_until(std::chrono::microseconds spin_time, Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + spin_time;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    cpu_relax();
    // Reading the clock costs more than a pause; do it now and then.
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

// spin_until(), reading `ready()` less often as the wait goes on: between
// two reads it pauses 1, 2, 4, ... up to `max_pauses` times. For a flag
// another thread writes (Note [A worker that polls less often]).
template <typename Ready>
bool spin_until_with_backoff(std::chrono::microseconds spin_time, unsigned max_pauses, Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + spin_time;
  unsigned pauses = 1, since_clock = 0;
  for (;;) {
    if (ready()) return true;
    for (unsigned i = 0; i < pauses; ++i) cpu_relax();
    since_clock += pauses;
    if (pauses < max_pauses) pauses *= 2;
    // Reading the clock costs more than a pause; do it now and then.
    if (since_clock >= 64) {
      since_clock = 0;
      if (std::chrono::steady_clock::now() >= deadline) return ready();
    }
  }
}

}  // namespace vnpu::detail
