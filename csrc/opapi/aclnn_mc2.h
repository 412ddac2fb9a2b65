// What the communicating (mc2) aclnn operators share (aclnn_mc2.cpp,
// aclnn_grouped_matmul.cpp).
#pragma once

#include <memory>

#include "csrc/core/comm_lease.h"

namespace torch_npu {
namespace aclnn {

// In an mc2 operator's GetWorkspaceSize: checks that reduceOp is "sum",
// then takes the next collective turn of the hccl group named `group`
// (lease_comm, which refuses a call inside a stream task) (Note [Collectives inside a compute-stream
// task] in csrc/core/comm_lease.h). Call it last, once the other arguments
// are checked. Raises (c10::Error) naming what is wrong.
std::shared_ptr<CommLease> take_turn(const char* api, const char* group, const char* reduce_op);

}  // namespace aclnn
}  // namespace torch_npu
