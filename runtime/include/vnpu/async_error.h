// AsyncError: what a failed task leaves behind on its stream.
//
// A task that throws on a stream worker cannot raise at its call site (the
// caller moved on long ago). The stream keeps an AsyncError instead, and the
// next synchronisation point that depends on the failed work throws a
// KernelError carrying it (see Note [Asynchronous errors] in stream.h).
//
// AsyncError is immutable once made and shared (std::shared_ptr<const>):
// the failing stream, event markers recorded after the failure and streams
// that waited on those events all hold the same record.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vnpu/error.h"

namespace vnpu {

struct AsyncError {
  ErrorCode cause_code = ErrorCode::kKernelFailed;  // code of the vnpu::Error the task threw;
                                                     // kKernelFailed for any other exception
  std::string task;    // name of the failed task (an op name)
  std::string cause;   // the exception's message
  int device_index = 0;
  int stream_index = 0;
  std::uint64_t seq = 0;  // sequence number of the failed task on its stream

  // "<task> failed on NPU <device>: <cause>"
  std::string message() const;
};

// Thrown at a synchronisation point: code() is always kKernelFailed, the
// message names the failed task and its cause, detail() has the rest.
class KernelError : public Error {
 public:
  // `reported_on_stream`: the stream whose sync point reports the error; when
  // it is not the stream the task ran on, the message says how it got here.
  KernelError(std::shared_ptr<const AsyncError> error, int reported_on_stream);

  const AsyncError& detail() const noexcept { return *error_; }
  const std::shared_ptr<const AsyncError>& shared() const noexcept { return error_; }

 private:
  std::shared_ptr<const AsyncError> error_;
};

}  // namespace vnpu
