#include "csrc/core/npu_error.h"

#include <unistd.h>

#include <atomic>
#include <ctime>
#include <typeinfo>

#include "csrc/core/npu_device.h"
#include <vnpu/environment.h>

namespace torch_npu {
namespace {

const char* submodule_name(SubModule sub) {
  switch (sub) {
    case SubModule::kPTA: return "PTA";
    case SubModule::kOPS: return "OPS";
    case SubModule::kDIST: return "DIST";
    case SubModule::kGRAPH: return "GRAPH";
    case SubModule::kPROF: return "PROF";
  }
  return "PTA";
}

// The short descriptions torch_npu prints after the code.
const char* code_description(ErrCode code) {
  switch (code) {
    case ErrCode::kSuc: return "success";
    case ErrCode::kParam: return "invalid parameter";
    case ErrCode::kType: return "invalid type";
    case ErrCode::kValue: return "invalid value";
    case ErrCode::kPtr: return "invalid pointer";
    case ErrCode::kInternal: return "internal error";
    case ErrCode::kMemory: return "memory error";
    case ErrCode::kNotSupport: return "feature not supported";
    case ErrCode::kNotFound: return "resource not found";
    case ErrCode::kUnavail: return "resource unavailable";
    case ErrCode::kSysCall: return "system call failed";
    case ErrCode::kTimeout: return "timeout error";
    case ErrCode::kPermission: return "permission error";
    case ErrCode::kAcl: return "call acl api failed";
    case ErrCode::kHccl: return "call hccl api failed";
    case ErrCode::kGe: return "call ge api failed";
  }
  return "unknown error";
}

}  // namespace

std::string error_suffix(SubModule sub, ErrCode code) {
  if (vnpu::environment().compact_error_output) return "";
  char when[32];
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(when, sizeof(when), "%Y-%m-%d-%H:%M:%S", &local);
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer), "\n[ERROR] %s (PID:%d, Device:%d, RankID:%d) ERR%02d%03d %s %s",
                when, static_cast<int>(getpid()), static_cast<int>(current_device_or_minus_one()),
                /*RankID: no process group yet*/ -1, static_cast<int>(sub), static_cast<int>(code),
                submodule_name(sub), code_description(code));
  return buffer;
}

namespace {

template <typename E>
[[noreturn]] void throw_with_suffix(const E& e, const std::string& suffix) {
  throw E(c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, e.msg() + suffix);
}

}  // namespace

std::string npu_device_mismatch_message(const std::string& aten_message) {
  static const std::string kSameDevice = "Expected all tensors to be on the same device";
  if (aten_message.rfind(kSameDevice, 0) != 0 || aten_message.find("cpu") == std::string::npos) return aten_message;
  // "..., but found at least two devices, npu:0 and cpu!" keeps its detail.
  const std::size_t but = aten_message.find(", but ");
  const std::string detail = but == std::string::npos ? aten_message : aten_message.substr(but + 6);
  return kSameDevice + ". " + kExpectedNpuTensor + " (" + detail + ")";
}

void rethrow_as_op_parameter_error() {
  try {
    throw;
  } catch (const c10::OutOfMemoryError&) {
    throw;  // not a parameter problem
  } catch (const c10::Error& e) {
    if (e.msg().find("\n[ERROR] ") != std::string::npos) throw;  // already carries a suffix
    const std::string suffix = error_suffix(SubModule::kOPS, ErrCode::kParam);
    const std::string mixed = npu_device_mismatch_message(e.msg());
    if (mixed != e.msg()) throw c10::Error(c10::SourceLocation{__func__, __FILE__, __LINE__}, mixed + suffix);
    if (suffix.empty()) throw;  // TORCH_NPU_COMPACT_ERROR_OUTPUT
    // Most derived first: the Python exception type follows the C++ one.
    if (const auto* index = dynamic_cast<const c10::IndexError*>(&e)) throw_with_suffix(*index, suffix);
    if (const auto* value = dynamic_cast<const c10::ValueError*>(&e)) throw_with_suffix(*value, suffix);
    if (const auto* type = dynamic_cast<const c10::TypeError*>(&e)) throw_with_suffix(*type, suffix);
    if (const auto* not_impl = dynamic_cast<const c10::NotImplementedError*>(&e)) throw_with_suffix(*not_impl, suffix);
    if (const auto* linalg = dynamic_cast<const c10::LinAlgError*>(&e)) throw_with_suffix(*linalg, suffix);
    if (typeid(e) != typeid(c10::Error)) throw;  // another subclass: keep it as it is
    throw_with_suffix(e, suffix);
  }
}

void throw_runtime_error(const vnpu::Error& error) {
  switch (error.code()) {
    case vnpu::ErrorCode::kInvalidDevice:
      NPU_CHECK_WITH(Error, ErrCode::kParam, false, error.what());
    case vnpu::ErrorCode::kInvalidValue:
      NPU_CHECK_WITH(ValueError, ErrCode::kValue, false, error.what());
    case vnpu::ErrorCode::kOutOfMemory:
      NPU_CHECK_WITH(OutOfMemoryError, ErrCode::kMemory, false, error.what());
    case vnpu::ErrorCode::kNotSupported:
      NPU_CHECK_WITH(NotImplementedError, ErrCode::kNotSupport, false, error.what());
    case vnpu::ErrorCode::kKernelFailed: {
      // Raised at a sync point for a task that failed earlier on a stream
      // worker; torch.AcceleratorError in Python, like CUDA's async errors.
      std::string message = std::string(error.what()) +
          "\nSince the operator is called asynchronously, the stacktrace may be inaccurate. "
          "If you want to get the accurate stacktrace, please set the environment variable "
          "ASCEND_LAUNCH_BLOCKING=1." + error_suffix(SubModule::kPTA, ErrCode::kAcl);
      throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                  /*code=*/507015, std::move(message));
    }
    case vnpu::ErrorCode::kBadFork:
      check_not_forked();  // throws torch_npu's fork error
      break;
    case vnpu::ErrorCode::kStreamCapture:  // CUDA: "operation not permitted when stream is capturing"
      NPU_CHECK_WITH(Error, ErrCode::kAcl, false, error.what());
    case vnpu::ErrorCode::kAborted:  // a wait on an aborted stream (watchdog): a timeout
      NPU_CHECK_WITH(Error, ErrCode::kTimeout, false, error.what());
    case vnpu::ErrorCode::kInternal:
      break;
  }
  NPU_CHECK_WITH(Error, ErrCode::kInternal, false, error.what());
}

}  // namespace torch_npu
