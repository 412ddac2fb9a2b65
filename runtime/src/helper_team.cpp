#include "vnpu/helper_team.h"

#include "spin.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

namespace vnpu {
namespace {

using detail::spin_until;

// How long a helper, or a caller waiting for its helpers, spins before it
// sleeps: about the gap between two GEMMs a stream worker runs back to
// back, and short next to the kernels worth splitting (a 256x256 GEMM half
// takes ~150 us on one core).
constexpr std::chrono::microseconds kSpinTime{50};

}  // namespace

HelperTeam::HelperTeam(int helpers, std::function<void()> on_start) : on_start_(std::move(on_start)) {
  threads_.reserve(helpers > 0 ? helpers : 0);
  for (int i = 0; i < helpers; ++i) threads_.emplace_back([this, i] { helper_loop(i + 1); });
}

HelperTeam::~HelperTeam() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void HelperTeam::run(int parts, const std::function<void(int)>& fn) {
  if (!try_run(parts, fn)) {
    for (int part = 0; part < parts; ++part) fn(part);
  }
}

bool HelperTeam::try_run(int parts, const std::function<void(int)>& fn) {
  if (parts < 1 || parts > helpers() + 1) {
    throw std::invalid_argument("HelperTeam::run: " + std::to_string(parts) + " parts for a team of " +
                                std::to_string(helpers()) + " helpers and the caller");
  }
  if (parts == 1) {
    fn(0);
    return true;
  }
  std::unique_lock<std::mutex> team(busy_, std::try_to_lock);
  if (!team.owns_lock()) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    parts_ = parts;
    first_error_ = nullptr;
    remaining_.store(parts, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  std::exception_ptr mine;
  try {
    fn(0);
  } catch (...) {
    mine = std::current_exception();
  }
  finish_part(mine);
  if (!spin_until(kSpinTime, [&] { return remaining_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return remaining_.load(std::memory_order_acquire) == 0; });
  }
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error = std::exchange(first_error_, nullptr);
    job_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
  return true;
}

void HelperTeam::finish_part(std::exception_ptr error) {
  if (error) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!first_error_) first_error_ = error;
  }
  if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // Under the mutex: the caller checks remaining_ under it before it waits.
    std::lock_guard<std::mutex> lock(mutex_);
    done_.notify_one();
  }
}

void HelperTeam::helper_loop(int index) {
  if (on_start_) on_start_();
  std::uint64_t seen = 0;
  for (;;) {
    auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(kSpinTime, fresh)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || fresh(); });
      if (stop_) return;
    }
    const std::function<void(int)>* job;
    int parts;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen = generation_.load(std::memory_order_acquire);
      job = job_;
      parts = parts_;
    }
    if (job == nullptr || index >= parts) continue;  // not needed for this job
    std::exception_ptr error;
    try {
      (*job)(index);
    } catch (...) {
      error = std::current_exception();
    }
    finish_part(error);
  }
}

}  // namespace vnpu
