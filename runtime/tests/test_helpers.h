// Small helpers shared by the runtime tests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "vnpu/environment.h"
#include "vnpu/error.h"

namespace vnpu_test {

// Runs `fn` and returns the vnpu::Error it throws (fails the test if none).
template <typename Fn>
vnpu::Error expect_error(Fn fn) {
  try {
    fn();
  } catch (const vnpu::Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a vnpu::Error";
  return vnpu::Error(vnpu::ErrorCode::kInternal, "");
}

// A fake process environment for parse_environment(): tests fill `vars()`
// and pass `lookup`. Tests run sequentially within the binary.
inline std::map<std::string, std::string>& vars() {
  static std::map<std::string, std::string> v;
  return v;
}

inline const char* lookup(const char* name) {
  const auto it = vars().find(name);
  return it == vars().end() ? nullptr : it->second.c_str();
}

inline vnpu::Environment parse(const std::map<std::string, std::string>& v) {
  vars() = v;
  return vnpu::parse_environment(&lookup);
}

// A one-shot gate: tasks wait() until the test calls open().
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Polls `cond` until it holds or `timeout` passes; returns cond().
template <typename Cond>
bool eventually(Cond cond, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return cond();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace vnpu_test
