// HelperTeam: a few long-lived threads that run parts of one kernel beside
// the stream worker that runs it (Note [GEMMs split by rows] in
// csrc/launch/gemm_rows.h says why a kernel would not use OpenMP's team).
//
// run(parts, fn) calls fn(0) on the caller and fn(1) .. fn(parts - 1) on
// helpers, and returns once every part has run; the first exception a part
// threw is rethrown on the caller, after all parts finished. A helper that
// finished spins briefly for the next job (a kernel's successor usually
// follows within microseconds), then sleeps on a condition variable.
//
// One job at a time: try_run() returns false, running nothing, when the
// team is busy with another caller's job (another stream's worker), so that
// caller can run its kernel another way; run() then runs all parts itself,
// in order. Parts may be fewer than helpers + 1; more are refused
// (std::invalid_argument).
//
// Thread-safety: run() may be called from any thread, any number at once.
// The team lives for the process (leak the object that owns it: helpers
// may still be parked in it at exit).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vnpu {

class HelperTeam {
 public:
  // `helpers` threads, each calling `on_start` once before its first part
  // (e.g. to make the libraries it calls single-threaded).
  HelperTeam(int helpers, std::function<void()> on_start);
  HelperTeam(const HelperTeam&) = delete;
  HelperTeam& operator=(const HelperTeam&) = delete;
  ~HelperTeam();  // stops and joins the helpers

  int helpers() const { return static_cast<int>(threads_.size()); }
  void run(int parts, const std::function<void(int)>& fn);
  bool try_run(int parts, const std::function<void(int)>& fn);

 private:
  void helper_loop(int index);
  void finish_part(std::exception_ptr error);

  std::function<void()> on_start_;
  std::vector<std::thread> threads_;

  std::mutex busy_;  // held by the caller whose job the team runs

  // The job, published by a new generation (release) and read by helpers
  // after they saw it (acquire).
  const std::function<void(int)>* job_ = nullptr;
  int parts_ = 0;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> remaining_{0};  // parts not yet finished, the caller's included
  std::exception_ptr first_error_;  // guarded by mutex_

  std::mutex mutex_;
  std::condition_variable wake_;  // helpers: a new generation, or stop
  std::condition_variable done_;  // caller: remaining_ reached 0
  bool stop_ = false;  // guarded by mutex_
};

}  // namespace vnpu
