// c10_npu::option::OptionsManager: the switches torch_npu reads from the
// environment, as far as extensions use them (the log level of npu_log.h).
#pragma once

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace c10_npu {
namespace option {

class OptionsManager {
 public:
  // True when messages of `level` are logged: level >= ASCEND_GLOBAL_LOG_LEVEL
  // (default 3, errors only; 4 logs nothing).
  C10_NPU_API static bool isACLGlobalLogOn(aclLogLevel level);
};

}  // namespace option
}  // namespace c10_npu
