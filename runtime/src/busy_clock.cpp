#include "vnpu/busy_clock.h"

#include "vnpu/trace.h"

namespace vnpu {

BusyClock::BusyClock() : created_ns_(steady_now_ns()) {}

void BusyClock::begin() {
  const std::int64_t now = steady_now_ns();
  std::lock_guard<std::mutex> lock(mutex_);
  if (active_++ == 0) since_ns_ = now;
}

void BusyClock::end() {
  const std::int64_t now = steady_now_ns();
  std::lock_guard<std::mutex> lock(mutex_);
  if (active_ > 0 && --active_ == 0) total_ns_ += now - since_ns_;
}

std::int64_t BusyClock::busy_ns() const {
  const std::int64_t now = steady_now_ns();
  std::lock_guard<std::mutex> lock(mutex_);
  return total_ns_ + (active_ > 0 ? now - since_ns_ : 0);
}

}  // namespace vnpu
