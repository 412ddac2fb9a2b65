#include "vnpu/async_error.h"

#include <utility>

namespace vnpu {
namespace {

std::string describe(const AsyncError& error, int reported_on_stream) {
  std::string message = error.message();
  if (reported_on_stream != error.stream_index) {
    message += " (the task ran on stream " + std::to_string(error.stream_index) +
               "; this work waited on it through an event, so it depends on the failed result)";
  }
  return message;
}

}  // namespace

std::string AsyncError::message() const {
  return task + " failed on NPU " + std::to_string(device_index) + ": " + cause;
}

KernelError::KernelError(std::shared_ptr<const AsyncError> error, int reported_on_stream)
    : Error(ErrorCode::kKernelFailed, describe(*error, reported_on_stream)), error_(std::move(error)) {}

}  // namespace vnpu
