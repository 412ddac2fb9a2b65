// The two phases of an aclnn operator (aclnn_executor.h).
#include "csrc/opapi/aclnn_executor.h"

#include <memory>
#include <new>
#include <string>

#include <c10/util/Exception.h>

#include "csrc/api/acl_status.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include <vnpu/error.h>
#include <vnpu/stream.h>

namespace torch_npu {
namespace aclnn {

aclnnStatus prepare(const char* api, uint64_t* workspace_size, aclOpExecutor** executor,
                    const std::function<std::function<void()>()>& build) {
  const std::string where = std::string(api) + "GetWorkspaceSize";
  if (workspace_size == nullptr || executor == nullptr) {
    return acl::fail(ACLNN_ERR_PARAM_NULLPTR, where + ": workspaceSize and executor must not be nullptr.");
  }
  try {
    std::function<void()> run = build();
    *executor = new aclOpExecutor{api, std::move(run)};
    *workspace_size = 0;
    return ACLNN_SUCCESS;
  } catch (const c10::Error& e) {
    return acl::fail(ACLNN_ERR_PARAM_INVALID, where + " failed: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return acl::fail(ACLNN_ERR_INNER, where + " failed: " + e.what());
  }
}

aclnnStatus launch(const char* api, aclOpExecutor* executor, aclrtStream stream) {
  if (executor == nullptr) return acl::fail(ACLNN_ERR_PARAM_NULLPTR, std::string(api) + ": executor is nullptr.");
  // A one-shot executor is consumed by this call, whatever happens.
  std::shared_ptr<aclOpExecutor> owned;
  if (!executor->repeatable) owned.reset(executor);
  std::function<void()> run = executor->run;

  if (vnpu::Stream::running_on_this_thread() != nullptr) {
    try {
      run();
      return ACLNN_SUCCESS;
    } catch (const c10::Error& e) {
      return acl::fail(ACLNN_ERR_RUNTIME_ERROR, std::string(api) + " failed: " + e.what_without_backtrace());
    } catch (const std::exception& e) {
      return acl::fail(ACLNN_ERR_RUNTIME_ERROR, std::string(api) + " failed: " + e.what());
    }
  }
  return acl::acl_call(api, [&]() -> aclnnStatus {
    std::optional<c10::Stream> target =
        stream == nullptr ? std::optional<c10::Stream>(default_stream(current_device())) : stream_of_handle(stream);
    if (!target) {
      return acl::fail(ACLNN_ERR_PARAM_INVALID, std::string(api) +
                                                    ": the stream is not a stream of the virtual NPU (destroyed, "
                                                    "or never created by aclrtCreateStream or torch)");
    }
    runtime_stream(*target).enqueue(vnpu::TaskKind::kKernel, api, [run = std::move(run), api] {
      try {
        run();
      } catch (const c10::Error& e) {
        throw vnpu::Error(vnpu::ErrorCode::kKernelFailed, std::string(api) + " failed: " + e.what_without_backtrace());
      }
    });
    return ACLNN_SUCCESS;
  });
}

}  // namespace aclnn
}  // namespace torch_npu

extern "C" {

aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor) {
  if (executor == nullptr) {
    return torch_npu::acl::fail(ACLNN_ERR_PARAM_NULLPTR, "aclSetAclOpExecutorRepeatable: executor is nullptr.");
  }
  executor->repeatable = true;
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  delete executor;
  return ACLNN_SUCCESS;
}

}  // extern "C"
