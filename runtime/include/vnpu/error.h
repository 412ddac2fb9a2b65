// Errors raised by the virtual NPU runtime.
//
// The runtime reports every failure as a vnpu::Error carrying an ErrorCode, so
// the adaptor layer (csrc/) can map it to the right torch exception type and to
// torch_npu's error-code suffix without parsing messages.
#pragma once

#include <stdexcept>
#include <string>

namespace vnpu {

enum class ErrorCode {
  kInvalidValue,    // a bad argument or environment value (user error)
  kInvalidDevice,   // a device index outside [0, device_count)
  kOutOfMemory,     // device capacity exhausted
  kKernelFailed,    // a task threw on a stream worker (sticky async error)
  kNotSupported,    // a feature the virtual device does not have
  kBadFork,         // a stream of the parent used in a forked child
  kAborted,         // a wait on a stream that was aborted (watchdog timeout)
  kStreamCapture,   // an operation a stream cannot do while it captures a graph
  kInternal,        // a broken invariant inside the runtime
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// Internal invariants: a failure is a bug in vNPU, never a user error.
// Throws Error(kInternal) naming the broken condition and where it broke.
#define VNPU_ASSERT(cond, message)                                                     \
  do {                                                                                 \
    if (!(cond)) ::vnpu::internal_assert_failed(#cond, message, __FILE__, __LINE__);   \
  } while (false)

[[noreturn]] void internal_assert_failed(const char* condition, const std::string& message,
                                         const char* file, int line);

}  // namespace vnpu
