// The communication-fused ("mc2") operators of the aclnn API: a matmul and
// a collective over an hccl process group named by its comm name, as
// MindSpeed's npu_mm_all_reduce_add_rms_norm(_) op builders call them. The
// math is vNPU's torch_npu.npu_mm_all_reduce_base followed by
// npu_add_rms_norm (torch_npu/op_plugin/mc2.py, norm.py): the partial
// products are reduced in float32 and rounded once. Three forms, by dtype:
// float x1 and x2; Quant (int8 x1 and x2, exact accumulation, + int32 bias,
// times dequantScale per column); WeightQuant (float x1, int8 x2
// dequantised first, (x2 + antiquantOffset) * antiquantScale per column or
// per group of antiquantGroupSize rows).
//
// GetWorkspaceSize (on the host, in issue order) takes the group's next
// collective turn; the operator's task waits for the group's earlier
// collectives and then communicates itself (Note [Collectives inside a
// compute-stream task] in csrc/core/comm_lease.h).
#include <string>

#include <ATen/TensorOperators.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/rsqrt.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_inplace_matmul_all_reduce_add_rms_norm.h"
#include "aclnnop/aclnn_inplace_quant_matmul_all_reduce_add_rms_norm.h"
#include "aclnnop/aclnn_inplace_weight_quant_matmul_all_reduce_add_rms_norm.h"
#include "aclnnop/aclnn_matmul_all_reduce_add_rms_norm.h"
#include "aclnnop/aclnn_quant_matmul_all_reduce_add_rms_norm.h"
#include "aclnnop/aclnn_weight_quant_matmul_all_reduce_add_rms_norm.h"
#include "csrc/core/comm_lease.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"
#include "csrc/opapi/aclnn_mc2.h"
#include "csrc/opapi/quant_scale.h"

namespace torch_npu {
namespace aclnn {

std::shared_ptr<CommLease> take_turn(const char* api, const char* group, const char* reduce_op) {
  TORCH_CHECK(group != nullptr && group[0] != '\0', "group must name an hccl communicator (get_hccl_comm_name).");
  TORCH_CHECK(reduce_op != nullptr && std::string(reduce_op) == "sum", "reduceOp must be \"sum\" (the only one "
              "supported), but got \"", reduce_op == nullptr ? "" : reduce_op, "\".");
  return lease_comm(group, api);
}

namespace {

// The checked arguments of MatmulAllReduceAddRmsNorm.
enum class Form { kFloat, kQuant, kWeightQuant };

struct MatmulAllReduceAddRmsNorm {
  Form form = Form::kFloat;
  at::Tensor x1, x2, bias, residual, gamma, y, norm_out;
  at::Tensor dequant_scale;                      // kQuant
  at::Tensor antiquant_scale, antiquant_offset;  // kWeightQuant
  int64_t antiquant_group_size = 0;
  double epsilon = 0;
  std::shared_ptr<CommLease> lease;

  void check() const {
    const at::ScalarType out_dtype = residual.scalar_type();
    TORCH_CHECK(out_dtype == at::kHalf || out_dtype == at::kBFloat16, "residual must be float16 or bfloat16, but "
                "got ", out_dtype, ".");
    if (form == Form::kQuant) {
      TORCH_CHECK(x1.scalar_type() == at::kChar && x2.scalar_type() == at::kChar, "x1 and x2 must be int8, but got ",
                  x1.scalar_type(), " and ", x2.scalar_type(), ".");
      TORCH_CHECK(dequant_scale.defined() && (dequant_scale.numel() == 1 || dequant_scale.numel() == x2.size(1)),
                  "dequantScale must hold 1 or ", x2.size(1), " values (one per column of x2).");
      TORCH_CHECK(!bias.defined() || bias.scalar_type() == at::kInt, "with int8 inputs bias must be int32, but got ",
                  bias.scalar_type(), ".");
    } else {
      TORCH_CHECK(x1.scalar_type() == out_dtype, "x1 must have residual's dtype ", out_dtype, ", but got ",
                  x1.scalar_type(), ".");
      TORCH_CHECK(x2.scalar_type() == (form == Form::kWeightQuant ? at::kChar : x1.scalar_type()), "x2 must be ",
                  form == Form::kWeightQuant ? at::kChar : x1.scalar_type(), ", but got ", x2.scalar_type(), ".");
    }
    if (form == Form::kWeightQuant) {
      const int64_t k = x2.size(0), n = x2.size(1);
      TORCH_CHECK(antiquant_scale.defined(), "antiquantScale is required with int8 x2.");
      if (antiquant_group_size > 0) {
        const int64_t groups = (k + antiquant_group_size - 1) / antiquant_group_size;
        TORCH_CHECK(antiquant_scale.dim() == 2 && antiquant_scale.size(0) == groups && antiquant_scale.size(1) == n,
                    "with antiquantGroupSize ", antiquant_group_size, ", antiquantScale must be (", groups, ", ", n,
                    "), but got ", antiquant_scale.sizes(), ".");
      } else {
        TORCH_CHECK(antiquant_scale.numel() == 1 || antiquant_scale.numel() == n, "antiquantScale must hold 1 or ",
                    n, " values, but got ", antiquant_scale.sizes(), ".");
      }
      TORCH_CHECK(!antiquant_offset.defined() || antiquant_offset.sizes() == antiquant_scale.sizes(),
                  "antiquantOffset must have antiquantScale's shape ", antiquant_scale.sizes(), ".");
    }
    TORCH_CHECK(x1.dim() == 2 || x1.dim() == 3, "x1 must be 2- or 3-dimensional, but got ", x1.sizes(), ".");
    TORCH_CHECK(x2.dim() == 2 && x2.size(0) == x1.size(-1), "x2 must be (", x1.size(-1), ", N), but got ",
                x2.sizes(), ".");
    std::vector<int64_t> shape(x1.sizes().begin(), x1.sizes().end());
    shape.back() = x2.size(1);
    const at::IntArrayRef out_shape(shape);
    TORCH_CHECK(residual.sizes() == out_shape, "residual must have shape ", out_shape, ", but got ",
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
    const at::ScalarType out_dtype = residual.scalar_type();
    at::Tensor partial = this->partial().contiguous();
    lease->allreduce_sum(partial);
    lease.reset();  // the group's turn is over: its communication stream goes on
    const at::Tensor mm = partial.to(out_dtype).view(residual.sizes());
    const at::Tensor sum = (mm.to(at::kFloat) + residual.to(at::kFloat)).to(out_dtype);
    const at::Tensor s = sum.to(at::kFloat);
    const at::Tensor rstd = at::rsqrt(at::mean(s * s, {-1}, /*keepdim=*/true) + epsilon);
    norm_out.copy_(s * rstd * gamma.to(at::kFloat).view({n}));
    y.copy_(sum);
  }

  // This rank's float32 product before the all-reduce.
  at::Tensor partial() const {
    const at::Tensor a = x1.reshape({-1, x1.size(-1)});
    if (form == Form::kQuant) {
      // The int32 accumulator (exact) is dequantised in float32.
      at::Tensor acc = exact_int8_matmul(a, x2).to(at::kFloat);
      if (bias.defined()) acc = acc + bias.to(at::kFloat);
      return acc * scale_values(dequant_scale).reshape({1, -1});
    }
    at::Tensor w = x2.to(at::kFloat);
    if (form == Form::kWeightQuant) {
      // (x2 + offset) * scale per column, or per group of antiquant_group_size rows.
      auto expand = [&](const at::Tensor& p) {
        const at::Tensor f = p.to(at::kFloat);
        if (antiquant_group_size <= 0) return f.reshape({1, -1});
        return f.repeat_interleave(antiquant_group_size, 0).narrow(0, 0, x2.size(0));
      };
      if (antiquant_offset.defined()) w = w + expand(antiquant_offset);
      w = w * expand(antiquant_scale);  // kept in float32, as npu_mm_all_reduce_base does
    }
    at::Tensor result = at::matmul(a.to(at::kFloat), w);
    if (bias.defined()) result = result + bias.to(at::kFloat);
    return result;
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

using torch_npu::aclnn::Form;
using torch_npu::aclnn::host_view;
using torch_npu::aclnn::launch;
using torch_npu::aclnn::MatmulAllReduceAddRmsNorm;
using torch_npu::aclnn::optional_host_view;
using torch_npu::aclnn::prepare_mc2;

namespace {

// The arguments every form has; y is residual itself when `y` is NULL (the
// in-place forms).
MatmulAllReduceAddRmsNorm read_common(Form form, const aclTensor* x1, const aclTensor* x2, const aclTensor* bias,
                                      const aclTensor* residual, const aclTensor* gamma, double epsilon,
                                      const aclTensor* y, const aclTensor* normOut) {
  MatmulAllReduceAddRmsNorm op;
  op.form = form;
  op.x1 = host_view("x1", x1);
  op.x2 = host_view("x2", x2);
  op.bias = optional_host_view("bias", bias);
  op.residual = host_view("residual", residual);
  op.gamma = host_view("gamma", gamma);
  op.y = y == nullptr ? op.residual : host_view("y", y);
  op.norm_out = host_view("normOut", normOut);
  op.epsilon = epsilon;
  return op;
}

MatmulAllReduceAddRmsNorm with_dequant(MatmulAllReduceAddRmsNorm op, const aclTensor* dequantScale) {
  op.dequant_scale = host_view("dequantScale", dequantScale);
  return op;
}

MatmulAllReduceAddRmsNorm with_antiquant(MatmulAllReduceAddRmsNorm op, const aclTensor* antiquantScale,
                                         const aclTensor* antiquantOffset, int64_t antiquantGroupSize) {
  op.antiquant_scale = host_view("antiquantScale", antiquantScale);
  op.antiquant_offset = optional_host_view("antiquantOffset", antiquantOffset);
  op.antiquant_group_size = antiquantGroupSize;
  return op;
}

}  // namespace

extern "C" {

aclnnStatus aclnnMatmulAllReduceAddRmsNormGetWorkspaceSize(const aclTensor* x1, const aclTensor* x2,
                                                           const aclTensor* bias, const aclTensor* residual,
                                                           const aclTensor* gamma, double epsilon, const char* group,
                                                           const char* reduceOp, int64_t commTurn, int64_t streamMode,
                                                           const aclTensor* y, const aclTensor* normOut,
                                                           uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare_mc2("aclnnMatmulAllReduceAddRmsNorm", group, reduceOp, workspaceSize, executor, [&] {
    return read_common(Form::kFloat, x1, x2, bias, residual, gamma, epsilon, y, normOut);
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
    return read_common(Form::kFloat, x1, x2, bias, residual, gamma, epsilon, nullptr, normOut);
  });
}

aclnnStatus aclnnInplaceMatmulAllReduceAddRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                  aclrtStream stream) {
  return launch("aclnnInplaceMatmulAllReduceAddRmsNorm", executor, stream);
}

aclnnStatus aclnnQuantMatmulAllReduceAddRmsNormGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* bias, const aclTensor* dequantScale,
    const aclTensor* residual, const aclTensor* gamma, double epsilon, const char* group, const char* reduceOp,
    int64_t commTurn, int64_t streamMode, const aclTensor* y, const aclTensor* normOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepare_mc2("aclnnQuantMatmulAllReduceAddRmsNorm", group, reduceOp, workspaceSize, executor, [&] {
    return with_dequant(read_common(Form::kQuant, x1, x2, bias, residual, gamma, epsilon, y, normOut), dequantScale);
  });
}

aclnnStatus aclnnQuantMatmulAllReduceAddRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                aclrtStream stream) {
  return launch("aclnnQuantMatmulAllReduceAddRmsNorm", executor, stream);
}

aclnnStatus aclnnInplaceQuantMatmulAllReduceAddRmsNormGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* bias, const aclTensor* dequantScale,
    aclTensor* residual, const aclTensor* gamma, double epsilon, const char* group, const char* reduceOp,
    int64_t commTurn, int64_t streamMode, const aclTensor* normOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepare_mc2("aclnnInplaceQuantMatmulAllReduceAddRmsNorm", group, reduceOp, workspaceSize, executor, [&] {
    return with_dequant(read_common(Form::kQuant, x1, x2, bias, residual, gamma, epsilon, nullptr, normOut),
                        dequantScale);
  });
}

aclnnStatus aclnnInplaceQuantMatmulAllReduceAddRmsNorm(void* workspace, uint64_t workspaceSize,
                                                       aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnInplaceQuantMatmulAllReduceAddRmsNorm", executor, stream);
}

aclnnStatus aclnnWeightQuantMatmulAllReduceAddRmsNormGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* bias, const aclTensor* antiquantScale,
    const aclTensor* antiquantOffset, const aclTensor* residual, const aclTensor* gamma, double epsilon,
    const char* group, const char* reduceOp, int64_t commTurn, int64_t streamMode, int64_t antiquantGroupSize,
    const aclTensor* y, const aclTensor* normOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare_mc2("aclnnWeightQuantMatmulAllReduceAddRmsNorm", group, reduceOp, workspaceSize, executor, [&] {
    return with_antiquant(read_common(Form::kWeightQuant, x1, x2, bias, residual, gamma, epsilon, y, normOut),
                          antiquantScale, antiquantOffset, antiquantGroupSize);
  });
}

aclnnStatus aclnnWeightQuantMatmulAllReduceAddRmsNorm(void* workspace, uint64_t workspaceSize,
                                                      aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnWeightQuantMatmulAllReduceAddRmsNorm", executor, stream);
}

aclnnStatus aclnnInplaceWeightQuantMatmulAllReduceAddRmsNormGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* bias, const aclTensor* antiquantScale,
    const aclTensor* antiquantOffset, aclTensor* residual, const aclTensor* gamma, double epsilon,
    const char* group, const char* reduceOp, int64_t commTurn, int64_t streamMode, int64_t antiquantGroupSize,
    const aclTensor* normOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare_mc2("aclnnInplaceWeightQuantMatmulAllReduceAddRmsNorm", group, reduceOp, workspaceSize, executor,
                     [&] {
                       return with_antiquant(read_common(Form::kWeightQuant, x1, x2, bias, residual, gamma, epsilon,
                                                         nullptr, normOut),
                                             antiquantScale, antiquantOffset, antiquantGroupSize);
                     });
}

aclnnStatus aclnnInplaceWeightQuantMatmulAllReduceAddRmsNorm(void* workspace, uint64_t workspaceSize,
                                                             aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnInplaceWeightQuantMatmulAllReduceAddRmsNorm", executor, stream);
}

}  // extern "C"
