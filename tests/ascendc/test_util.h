// Small helpers shared by the Ascend C test drivers: checks that count failures, GM
// buffers registered with the host stub, and a deterministic random generator.
// Header-only on purpose: each driver is one translation unit plus host_stub.cpp.
#ifndef VNPU_TESTS_ASCENDC_TEST_UTIL_H
#define VNPU_TESTS_ASCENDC_TEST_UTIL_H

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>

#include "host_stub.h"

namespace test_util {

inline int& Failures() {
  static int failures = 0;
  return failures;
}

// Records a failure (does not stop the driver: later checks still run and report).
#define EXPECT_TRUE(cond, ...)                                                     \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
      std::fprintf(stderr, __VA_ARGS__);                                           \
      std::fprintf(stderr, "\n");                                                  \
      ++::test_util::Failures();                                                   \
    }                                                                              \
  } while (0)

// The driver's exit status: 0 when every check passed.
inline int Finish(const char* name) {
  if (Failures() == 0) {
    std::printf("%s: all checks passed\n", name);
    return 0;
  }
  std::printf("%s: %d check(s) FAILED\n", name, Failures());
  return 1;
}

// A buffer in "device" memory: registered with the stub as a GM allocation of exactly
// n elements, so that bounds checks see its real size.
template <typename T>
class GmBuffer {
 public:
  explicit GmBuffer(size_t n) : n_(n) {
    size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    data_ = static_cast<T*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes));
    std::memset(static_cast<void*>(data_), 0, bytes == 0 ? 64 : bytes);
    host_stub::RegisterGm(data_, n * sizeof(T));
  }
  ~GmBuffer() {
    host_stub::UnregisterGm(data_);
    std::free(data_);
  }
  GmBuffer(const GmBuffer&) = delete;
  GmBuffer& operator=(const GmBuffer&) = delete;

  T* data() { return data_; }
  uint8_t* gm() { return reinterpret_cast<uint8_t*>(data_); }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return data_[i]; }

 private:
  size_t n_;
  T* data_;
};

inline std::mt19937& Rng() {
  static std::mt19937 rng(20240601);
  return rng;
}
inline float Uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(Rng()); }

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The last task failed with a message containing every one of `parts`.
template <typename... Parts>
inline void ExpectTaskFailed(const char* what, Parts... parts) {
  std::string err = host_stub::LastTaskError();
  EXPECT_TRUE(!err.empty(), "%s: the task should have failed", what);
  for (const char* p : {parts...}) {
    EXPECT_TRUE(Contains(err, p), "%s: error message lacks '%s': %s", what, p, err.c_str());
  }
  if (!err.empty()) std::printf("  [%s] task error: %s\n", what, err.c_str());
}

inline void ExpectTaskOk(const char* what) {
  std::string err = host_stub::LastTaskError();
  EXPECT_TRUE(err.empty(), "%s: the task failed: %s", what, err.c_str());
}

// `fn` throws E with a message containing every one of `parts`.
template <typename E, typename... Parts>
inline void ExpectThrows(const char* what, const std::function<void()>& fn, Parts... parts) {
  try {
    fn();
    EXPECT_TRUE(false, "%s: no exception was thrown", what);
  } catch (const E& e) {
    for (const char* p : {parts...}) {
      EXPECT_TRUE(Contains(e.what(), p), "%s: exception message lacks '%s': %s", what, p, e.what());
    }
    std::printf("  [%s] threw: %s\n", what, e.what());
  }
}

inline double Seconds(const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace test_util

#endif  // VNPU_TESTS_ASCENDC_TEST_UTIL_H
