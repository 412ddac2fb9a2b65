// Errors raised by the adaptor, in torch_npu's wording.
//
// torch_npu appends a suffix to its errors:
//   [ERROR] 2024-05-01-12:00:00 (PID:123, Device:0, RankID:-1) ERR00001 PTA invalid parameter
// TORCH_NPU_COMPACT_ERROR_OUTPUT=1 drops it. NPU_CHECK_* below build the
// message, pick the torch exception type, and add the suffix.
#pragma once

#include <c10/util/Exception.h>

#include <string>

#include <vnpu/error.h>

namespace torch_npu {

enum class SubModule { kPTA = 0, kOPS = 1, kDIST = 2, kGRAPH = 3, kPROF = 4 };

enum class ErrCode {
  kSuc = 0, kParam = 1, kType = 2, kValue = 3, kPtr = 4, kInternal = 5, kMemory = 6,
  kNotSupport = 7, kNotFound = 8, kUnavail = 9, kSysCall = 10, kTimeout = 11,
  kPermission = 12, kAcl = 100, kHccl = 200, kGe = 300,
};

// "\n[ERROR] <time> (PID:.., Device:.., RankID:..) ERR<sub><code> <SUB> <what>",
// or "" when TORCH_NPU_COMPACT_ERROR_OUTPUT is set.
std::string error_suffix(SubModule sub, ErrCode code);

// Converts a runtime error into the matching torch exception and throws it.
[[noreturn]] void throw_runtime_error(const vnpu::Error& error);

// The one boundary between the runtime and torch: runs `fn` and turns a
// vnpu::Error it throws into the matching torch exception (runtime status
// codes become exceptions only here). Returns what `fn` returns.
template <typename F>
auto with_torch_errors(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const vnpu::Error& e) {
    throw_runtime_error(e);
  }
}

// torch_npu's words for a host tensor where an npu one was expected.
inline constexpr const char* kExpectedNpuTensor =
    "Expected NPU tensor, please check whether the input tensor device is correct.";

// ATen's "Expected all tensors to be on the same device, but found ... npu:0
// and cpu!" in real torch_npu's wording, ATen's text kept in parentheses
// (other messages are returned as they are).
std::string npu_device_mismatch_message(const std::string& aten_message);

// Rethrows the exception in flight (from a catch block) with torch_npu's op
// suffix, "ERR01001 OPS invalid parameter", keeping its torch exception type;
// a host/npu device mismatch is reworded (npu_device_mismatch_message).
// Errors that already carry a suffix, and out-of-memory errors, pass
// unchanged.
[[noreturn]] void rethrow_as_op_parameter_error();

// Runs an op's argument checks (ATen's meta functions) the way op-plugin's
// checks report: a failing one raises with the OPS suffix real torch_npu's
// operators add ("div expected rounding_mode ...\n[ERROR] ... ERR01001 OPS
// invalid parameter"). Returns what `fn` returns.
template <typename F>
auto with_op_parameter_errors(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const c10::Error&) {
    rethrow_as_op_parameter_error();
  }
}

}  // namespace torch_npu

// User errors: the condition, the torch exception type, then message parts.
#define NPU_CHECK_WITH(error_t, code, cond, ...)                                   \
  TORCH_CHECK_WITH(error_t, cond, __VA_ARGS__,                                     \
                   ::torch_npu::error_suffix(::torch_npu::SubModule::kPTA, code))

#define NPU_CHECK(cond, ...) NPU_CHECK_WITH(Error, ::torch_npu::ErrCode::kParam, cond, __VA_ARGS__)
