// How vNPU runs an aclnn operator's two phases.
//
// aclnnXxxGetWorkspaceSize checks the arguments on the caller and packs the
// work into an aclOpExecutor: a closure over CPU views of the tensors (the
// aclTensor objects may be destroyed as soon as it returns). vNPU needs no
// workspace, so the size is 0. aclnnXxx then runs the closure in stream
// order: inline when the calling thread is already running a task of a
// stream (an extension's OpCommand::RunOpApi / SetCustomHandler function,
// the way torch_npu's EXEC_NPU_CMD and MindSpeed's ACLNN_CMD call it), and
// otherwise queued as one kernel task on `stream` (NULL: the current
// device's default stream), as CANN launches it.
//
// Errors: a bad argument makes GetWorkspaceSize return ACLNN_ERR_PARAM_* with
// the reason for aclGetRecentErrMsg(); a failure while running is the
// operator's status when inline, and a kernel failure of the stream (seen at
// the next synchronizing call) when queued.
#pragma once

#include <functional>

#include "aclnn/aclnn_base.h"

struct aclOpExecutor {
  const char* api;  // the operator's name, a string literal
  std::function<void()> run;
  bool repeatable = false;
};

namespace torch_npu {
namespace aclnn {

// GetWorkspaceSize: `build` checks the arguments (TORCH_CHECK) and returns
// the closure to run.
aclnnStatus prepare(const char* api, uint64_t* workspace_size, aclOpExecutor** executor,
                    const std::function<std::function<void()>()>& build);

// aclnnXxx: runs or queues the executor's closure (above).
aclnnStatus launch(const char* api, aclOpExecutor* executor, aclrtStream stream);

}  // namespace aclnn
}  // namespace torch_npu
