// The aclnn operators Ascend code calls that vNPU does not implement
// (aclnn_not_supported.def). Each exists in libopapi.so's reach, so a dlsym
// lookup finds it and the call fails with "<name> is not supported on vNPU"
// for aclGetRecentErrMsg(), instead of the caller's generic "not in
// libopapi.so". Both phases are defined without parameters: on x86-64 and
// AArch64 the caller passes and cleans up its arguments, so a function that
// reads none of them can be called through any signature.
#include <string>

#include "aclnn/aclnn_base.h"
#include "csrc/api/acl_status.h"

namespace torch_npu {
namespace aclnn {
namespace {

aclnnStatus not_supported(const char* api) {
  return acl::fail(ACLNN_ERR_RUNTIME_ERROR,
                   std::string(api) +
                       " is not supported on vNPU: vNPU implements the aclnn operators listed in docs/aclnn.md; "
                       "call the torch_npu operator of the same math instead, or file the operator you need");
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

#define VNPU_ACLNN_NOT_SUPPORTED(name)                                                                    \
  extern "C" __attribute__((visibility("default"))) aclnnStatus name##GetWorkspaceSize() {               \
    return torch_npu::aclnn::not_supported(#name);                                                        \
  }                                                                                                       \
  extern "C" __attribute__((visibility("default"))) aclnnStatus name() {                                  \
    return torch_npu::aclnn::not_supported(#name);                                                        \
  }
#include "csrc/opapi/aclnn_not_supported.def"
#undef VNPU_ACLNN_NOT_SUPPORTED
