#include "csrc/api/acl_status.h"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

#include "csrc/core/npu_error.h"
#include "torch_npu/csrc/core/npu/NPUException.h"

namespace torch_npu {
namespace acl {
namespace {

thread_local std::string t_recent_message;

}  // namespace

aclError fail(aclError status, const std::string& message) {
  t_recent_message = message;
  return status;
}

const char* recent_message() { return t_recent_message.c_str(); }

aclError status_of(const vnpu::Error& error) {
  switch (error.code()) {
    case vnpu::ErrorCode::kInvalidValue:
      return ACL_ERROR_RT_PARAM_INVALID;
    case vnpu::ErrorCode::kInvalidDevice:
      return ACL_ERROR_RT_INVALID_DEVICEID;
    case vnpu::ErrorCode::kOutOfMemory:
      return ACL_ERROR_RT_MEMORY_ALLOCATION;
    case vnpu::ErrorCode::kKernelFailed:
      return ACL_ERROR_RT_AICORE_EXCEPTION;
    case vnpu::ErrorCode::kNotSupported:
      return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    case vnpu::ErrorCode::kAborted:
      return ACL_ERROR_RT_STREAM_ABORT;
    case vnpu::ErrorCode::kStreamCapture:
      return ACL_ERROR_RT_STREAM_CAPTURED;
    default:
      return ACL_ERROR_RT_INTERNAL_ERROR;
  }
}

}  // namespace acl
}  // namespace torch_npu

extern "C" ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg(void) { return torch_npu::acl::recent_message(); }

namespace c10_npu {
namespace detail {

bool check_extension_torch_version(const char* built_with) noexcept {
  if (built_with != nullptr && std::strcmp(built_with, TORCH_VERSION) == 0) return true;
  static std::mutex mutex;
  static std::set<std::string> reported;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string other = built_with == nullptr ? "(unknown)" : built_with;
  if (reported.insert(other).second) {
    std::fprintf(stderr,
                 "[torch_npu] a C++ extension was built against torch %s, but this process runs torch %s (the torch "
                 "torch_npu was built with). Its calls into torch may fail or crash: rebuild the extension against "
                 "the installed torch (python setup.py build_ext --inplace, or clear the JIT build directory).\n",
                 other.c_str(), TORCH_VERSION);
  }
  return false;
}

}  // namespace detail

std::string formatErrorCode(SubModule submodule, ErrCode error_code) {
  return torch_npu::error_suffix(static_cast<torch_npu::SubModule>(submodule),
                                 static_cast<torch_npu::ErrCode>(error_code));
}

const char* c10_npu_get_error_message() { return torch_npu::acl::recent_message(); }

}  // namespace c10_npu
