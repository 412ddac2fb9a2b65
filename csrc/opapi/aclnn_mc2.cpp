// The communication-fused ("mc2") operators of the aclnn API: a matmul and
// a collective over an hccl process group named by its comm name, as
// MindSpeed's npu_mm_all_reduce_add_rms_norm(_) op builders call them. The
// math is vNPU's torch_npu.npu_mm_all_reduce_base followed by
// npu_add_rms_norm (torch_npu/op_plugin/mc2.py, norm.py): the partial
// products are reduced in float32 and rounded once.
//
// GetWorkspaceSize (on the host, in issue order) takes the group's next
// collective turn; the operator's task waits for the group's earlier
// collectives and then communicates itself (Note [Collectives inside a
// compute-stream task] in csrc/core/comm_lease.h).
#include <string>

#include <ATen/TensorOperators.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/rsqrt.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_inplace_matmul_all_reduce_add_rms_norm.h"
#include "aclnnop/aclnn_matmul_all_reduce_add_rms_norm.h"
#include "csrc/core/comm_lease.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"
#include "csrc/opapi/aclnn_mc2.h"
#include <vnpu/stream.h>

namespace torch_npu {
namespace aclnn {

std::shared_ptr<CommLease> take_turn(const char* api, const char* group, const char* reduce_op) {
  // Taking the group's turn orders the operator among the group's
  // collectives in issue order, which only the host thread knows.
  TORCH_CHECK(vnpu::Stream::running_on_this_thread() == nullptr, api, "GetWorkspaceSize must be called on the host "
              "thread, as op-plugin's EXEC_NPU_CMD and MindSpeed's ACLNN_CMD call it, not inside a stream task: vNPU "
              "orders the operator's collective among the group's others when it is prepared.");
  TORCH_CHECK(group != nullptr && group[0] != '\0', "group must name an hccl communicator (get_hccl_comm_name).");
  TORCH_CHECK(reduce_op != nullptr && std::string(reduce_op) == "sum", "reduceOp must be \"sum\" (the only one "
              "supported), but got \"", reduce_op == nullptr ? "" : reduce_op, "\".");
  return lease_comm(group, api);
}

namespace {

// The checked arguments of MatmulAllReduceAddRmsNorm.
struct MatmulAllReduceAddRmsNorm {
  at::Tensor x1, x2, bias, residual, gamma, y, norm_out;
  double epsilon = 0;
  std::shared_ptr<CommLease> lease;

  void check() const {
    TORCH_CHECK(x1.scalar_type() == at::kHalf || x1.scalar_type() == at::kBFloat16,
                "x1 must be float16 or bfloat16 (the quantised forms are aclnnQuantMatmulAllReduceAddRmsNorm and "
                "aclnnWeightQuantMatmulAllReduceAddRmsNorm, not supported on vNPU), but got ", x1.scalar_type(), ".");
    TORCH_CHECK(x2.scalar_type() == x1.scalar_type(), "x2 must have x1's dtype ", x1.scalar_type(), ", but got ",
                x2.scalar_type(), ".");
    TORCH_CHECK(x1.dim() == 2 || x1.dim() == 3, "x1 must be 2- or 3-dimensional, but got ", x1.sizes(), ".");
    TORCH_CHECK(x2.dim() == 2 && x2.size(0) == x1.size(-1), "x2 must be (", x1.size(-1), ", N), but got ",
                x2.sizes(), ".");
    std::vector<int64_t> shape(x1.sizes().begin(), x1.sizes().end());
    shape.back() = x2.size(1);
    const at::IntArrayRef out_shape(shape);
    TORCH_CHECK(residual.sizes() == out_shape && residual.scalar_type() == x1.scalar_type(), "residual must be ",
                x1.scalar_type(), " of shape ", out_shape, ", but got ", residual.scalar_type(), " ",
                residual.sizes(), ".");
    TORCH_CHECK(gamma.dim() == 1 && gamma.size(0) == x2.size(1), "gamma must be (", x2.size(1), "), but got ",
                gamma.sizes(), ".");
    TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == x2.size(1)), "bias must be (", x2.size(1),
                "), but got ", bias.sizes(), ".");
    TORCH_CHECK(y.sizes() == out_shape && norm_out.sizes() == out_shape, "y and normOut must have residual's shape ",
                out_shape, ".");
  }

  void run() {
    lease->wait_turn();
    const int64_t n = x2.size(1);
    at::Tensor partial = at::matmul(x1.reshape({-1, x1.size(-1)}).to(at::kFloat), x2.to(at::kFloat));
    if (bias.defined()) partial = partial + bias.to(at::kFloat);
    partial = partial.contiguous();
    lease->allreduce_sum(partial);
    lease.reset();  // the group's turn is over: its communication stream goes on
    const at::Tensor mm = partial.to(x1.scalar_type()).view(residual.sizes());
    const at::Tensor sum = (mm.to(at::kFloat) + residual.to(at::kFloat)).to(x1.scalar_type());
    const at::Tensor s = sum.to(at::kFloat);
    const at::Tensor rstd = at::rsqrt(at::mean(s * s, {-1}, /*keepdim=*/true) + epsilon);
    norm_out.copy_(s * rstd * gamma.to(at::kFloat).view({n}));
    y.copy_(sum);
  }
};

// GetWorkspaceSize of both forms: `read` makes the argument views.
aclnnStatus prepare_mc2(const char* api, const char* group, const char* reduce_op, uint64_t* workspace_size,
                        aclOpExecutor** executor, const std::function<MatmulAllReduceAddRmsNorm()>& read) {
  return prepare(api, workspace_size, executor, [&]() -> std::function<void()> {
    auto op = std::make_shared<MatmulAllReduceAddRmsNorm>(read());
    op->check();
    op->lease = take_turn(api, group, reduce_op);  // last: the turn is taken only for a valid call
    // A one-shot executor: the turn is the group's once. Destroying the
    // executor unrun releases it.
    return [op]() {
      TORCH_CHECK(op->lease != nullptr, "an mc2 executor runs once on vNPU (its collective turn is used).");
      op->run();
    };
  });
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::host_view;
using torch_npu::aclnn::launch;
using torch_npu::aclnn::MatmulAllReduceAddRmsNorm;
using torch_npu::aclnn::optional_host_view;
using torch_npu::aclnn::prepare_mc2;

extern "C" {

aclnnStatus aclnnMatmulAllReduceAddRmsNormGetWorkspaceSize(const aclTensor* x1, const aclTensor* x2,
                                                           const aclTensor* bias, const aclTensor* residual,
                                                           const aclTensor* gamma, double epsilon, const char* group,
                                                           const char* reduceOp, int64_t commTurn, int64_t streamMode,
                                                           const aclTensor* y, const aclTensor* normOut,
                                                           uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare_mc2("aclnnMatmulAllReduceAddRmsNorm", group, reduceOp, workspaceSize, executor, [&] {
    MatmulAllReduceAddRmsNorm op;
    op.x1 = host_view("x1", x1);
    op.x2 = host_view("x2", x2);
    op.bias = optional_host_view("bias", bias);
    op.residual = host_view("residual", residual);
    op.gamma = host_view("gamma", gamma);
    op.y = host_view("y", y);
    op.norm_out = host_view("normOut", normOut);
    op.epsilon = epsilon;
    return op;
  });
}

aclnnStatus aclnnMatmulAllReduceAddRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                           aclrtStream stream) {
  return launch("aclnnMatmulAllReduceAddRmsNorm", executor, stream);
}

aclnnStatus aclnnInplaceMatmulAllReduceAddRmsNormGetWorkspaceSize(const aclTensor* x1, const aclTensor* x2,
                                                                  const aclTensor* bias, aclTensor* residual,
                                                                  const aclTensor* gamma, double epsilon,
                                                                  const char* group, const char* reduceOp,
                                                                  int64_t commTurn, int64_t streamMode,
                                                                  const aclTensor* normOut, uint64_t* workspaceSize,
                                                                  aclOpExecutor** executor) {
  return prepare_mc2("aclnnInplaceMatmulAllReduceAddRmsNorm", group, reduceOp, workspaceSize, executor, [&] {
    MatmulAllReduceAddRmsNorm op;
    op.x1 = host_view("x1", x1);
    op.x2 = host_view("x2", x2);
    op.bias = optional_host_view("bias", bias);
    op.residual = host_view("residual", residual);
    op.gamma = host_view("gamma", gamma);
    op.y = op.residual;  // in place
    op.norm_out = host_view("normOut", normOut);
    op.epsilon = epsilon;
    return op;
  });
}

aclnnStatus aclnnInplaceMatmulAllReduceAddRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                  aclrtStream stream) {
  return launch("aclnnInplaceMatmulAllReduceAddRmsNorm", executor, stream);
}

}  // extern "C"
