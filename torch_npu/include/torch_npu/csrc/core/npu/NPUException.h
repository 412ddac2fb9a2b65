// Error checks for ACL status codes (NPU_CHECK_ERROR) and torch_npu's error
// code suffixes (PTA_ERROR), as real torch_npu's NPUException.h has them.
#pragma once

#include <string>

#include <c10/util/Exception.h>

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"

// The submodules and codes of torch_npu's "ERR<submodule><code>" suffixes.
enum class SubModule { PTA = 0, OPS = 1, DIST = 2, GRAPH = 3, PROF = 4 };
enum class ErrCode {
  SUC = 0,
  PARAM = 1,
  TYPE = 2,
  VALUE = 3,
  PTR = 4,
  INTERNAL = 5,
  MEMORY = 6,
  NOT_SUPPORT = 7,
  NOT_FOUND = 8,
  UNAVAIL = 9,
  SYSCALL = 10,
  TIMEOUT = 11,
  PERMISSION = 12,
  ACL = 100,
  HCCL = 200,
  GE = 300
};

namespace c10_npu {
// "\n[ERROR] <time> (PID:<pid>, Device:<d>, RankID:<r>) ERR<sm><code> <SM> <text>"
C10_NPU_API std::string formatErrorCode(SubModule submodule, ErrCode error_code);
// The message of the last failed ACL call on this thread ("" when none).
C10_NPU_API const char* c10_npu_get_error_message();
}  // namespace c10_npu

#define PTA_ERROR(error) c10_npu::formatErrorCode(SubModule::PTA, error)
#define OPS_ERROR(error) c10_npu::formatErrorCode(SubModule::OPS, error)
#define DIST_ERROR(error) c10_npu::formatErrorCode(SubModule::DIST, error)
#define GRAPH_ERROR(error) c10_npu::formatErrorCode(SubModule::GRAPH, error)
#define PROF_ERROR(error) c10_npu::formatErrorCode(SubModule::PROF, error)

// Raises a c10::Error naming the call and its ACL status unless it succeeded.
#define NPU_CHECK_ERROR(err_code, ...)                                                                        \
  do {                                                                                                        \
    const auto npu_check_error_status_ = (err_code);                                                          \
    TORCH_CHECK(npu_check_error_status_ == ACL_ERROR_NONE, __func__, ":", __FILE__, ":", __LINE__,            \
                " NPU function error: ", #err_code, ", error code is ", npu_check_error_status_,             \
                PTA_ERROR(ErrCode::ACL), "\n", c10_npu::c10_npu_get_error_message());                         \
  } while (0)

#define NPU_CHECK_SUPPORTED_OR_ERROR(err_code, ...) NPU_CHECK_ERROR(err_code)

// Warns instead of raising (for calls whose failure is not fatal).
#define NPU_CHECK_WARN(err_code)                                                                              \
  do {                                                                                                        \
    const auto npu_check_warn_status_ = (err_code);                                                           \
    if (npu_check_warn_status_ != ACL_ERROR_NONE) {                                                           \
      TORCH_NPU_WARN("NPU warning, error code is ", npu_check_warn_status_, "\n",                              \
                     c10_npu::c10_npu_get_error_message());                                                   \
    }                                                                                                         \
  } while (0)

#define TORCH_NPU_WARN(...) TORCH_WARN(__VA_ARGS__)
#define TORCH_NPU_WARN_ONCE(...) TORCH_WARN_ONCE(__VA_ARGS__)
