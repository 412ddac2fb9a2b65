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
    case ErrorCode::kInternal:
      return "Internal";
  }
  // Only reachable through a cast of an out-of-range integer.
  return "Unknown";
}

}  // namespace vnpu
