#include "vnpu/error.h"

namespace vnpu {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidValue:
      return "InvalidValue";
    case ErrorCode::kInvalidDevice:
      return "InvalidDevice";
    case ErrorCode::kOutOfMemory:
      return "OutOfMemory";
    case ErrorCode::kKernelFailed:
      return "KernelFailed";
    case ErrorCode::kNotSupported:
      return "NotSupported";
    case ErrorCode::kBadFork:
      return "BadFork";
    case ErrorCode::kAborted:
      return "Aborted";
    case ErrorCode::kStreamCapture:
      return "StreamCapture";
    case ErrorCode::kInternal:
      return "Internal";
  }
  // Only reachable through a cast of an out-of-range integer.
  return "Unknown";
}

void internal_assert_failed(const char* condition, const std::string& message, const char* file,
                            int line) {
  throw Error(ErrorCode::kInternal, std::string("vNPU internal error: ") + message + " (" +
                                        condition + " failed at " + file + ":" +
                                        std::to_string(line) + "); please report this bug");
}

}  // namespace vnpu
