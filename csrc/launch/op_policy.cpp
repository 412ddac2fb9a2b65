#include "csrc/launch/op_policy.h"

#include <c10/util/Exception.h>

#include <string>
#include <unordered_map>

namespace torch_npu {
namespace {

using R = OpResults;
using C = ShapeCheck;

// Hot ops whose arguments cannot be wrong in a way the CPU kernel would
// catch skip the dry run (fill_, zero_, the AMP helpers).
constexpr OpPolicy kPolicies[] = {
    // In-place ops without a structured kernel, whose CPU kernel only writes
    // element values. (masked_fill_.Tensor is not here: like CUDA it reads
    // the value tensor on the host, so it takes the synchronous path.)
    {"fill_.Scalar", R::kWritesArguments, -1, false},
    {"fill_.Tensor", R::kWritesArguments, -1, false},
    {"zero_", R::kWritesArguments, -1, false},
    {"uniform_", R::kWritesArguments},
    {"normal_", R::kWritesArguments},
    {"bernoulli_.float", R::kWritesArguments},
    {"bernoulli_.Tensor", R::kWritesArguments, -1, true, C::kBroadcastsToSelf, 1},
    {"random_", R::kWritesArguments},
    {"random_.from", R::kWritesArguments},
    {"random_.to", R::kWritesArguments},
    {"exponential_", R::kWritesArguments},
    {"geometric_", R::kWritesArguments},
    {"log_normal_", R::kWritesArguments},
    {"cauchy_", R::kWritesArguments},
    {"masked_fill_.Scalar", R::kWritesArguments, -1, true, C::kBroadcastsToSelf, 1},
    {"index_fill_.int_Scalar", R::kWritesArguments},
    {"index_fill_.int_Tensor", R::kWritesArguments},
    {"_index_put_impl_", R::kWritesArguments, -1, true, C::kIndexPutValues},
    {"put_", R::kWritesArguments},
    {"masked_scatter_", R::kWritesArguments, -1, true, C::kBroadcastsToSelf, 1},
    {"_amp_foreach_non_finite_check_and_unscale_", R::kWritesArguments, -1, false},
    {"_amp_update_scale_", R::kWritesArguments, -1, false},
    // torch.optim's fused=True steps: they write the parameters, gradients
    // and states they are given.
    {"_fused_adam_", R::kWritesArguments},
    {"_fused_adam_.tensor_lr", R::kWritesArguments},
    {"_fused_adamw_", R::kWritesArguments},
    {"_fused_adamw_.tensor_lr", R::kWritesArguments},
    {"_fused_sgd_", R::kWritesArguments},
    {"_fused_sgd_.tensor_lr", R::kWritesArguments},
    {"_fused_adagrad_", R::kWritesArguments},
    {"_fused_adagrad_.tensor_lr", R::kWritesArguments},
    // Element-wise out= ops that ATen implements without a meta function.
    {"abs.out", R::kBroadcastOut},
    {"logical_not.out", R::kBroadcastOut},
    {"logical_and.out", R::kBroadcastOut},
    {"logical_or.out", R::kBroadcastOut},
    {"logical_xor.out", R::kBroadcastOut},
    {"conj_physical.out", R::kBroadcastOut},
    {"where.self_out", R::kBroadcastOut},
    // Functional ops whose results are shaped like an argument.
    {"hardtanh", R::kLikeArgument, 0},
    {"hardtanh_backward", R::kLikeArgument, 0},
    {"log_sigmoid_forward", R::kLikeArgument, 0},
    {"log_sigmoid_backward", R::kLikeArgument, 0},
    {"_adaptive_avg_pool2d", R::kAdaptivePool},
    {"_adaptive_avg_pool2d_backward", R::kLikeArgument, 1},
    // Functional ops whose results' shapes follow from the arguments' shapes,
    // not their values: queued like the rest instead of draining the stream.
    {"max", R::kScalar},
    {"min", R::kScalar},
    {"median", R::kScalar},
    {"nanmedian", R::kScalar},
    {"prod", R::kScalar},
    {"trace", R::kScalar},
    {"bucketize.Scalar", R::kScalar},
    {"std.correction", R::kReduction, -1, true, C::kNone, -1, false},
    {"var.correction", R::kReduction, -1, true, C::kNone, -1, false},
    {"count_nonzero.dim_IntList", R::kReduction},
    {"mode", R::kReduction},
    {"roll", R::kLikeArgument, 0},
    {"take", R::kLikeArgument, 1},
    {"searchsorted.Tensor", R::kLikeArgument, 1},
    {"bucketize.Tensor", R::kLikeArgument, 0},
    {"nansum", R::kReduction},
    {"dot", R::kScalar},
    {"vdot", R::kScalar},
    {"floor_divide", R::kBroadcast},
    {"angle", R::kLikeArgument, 0},
    {"logit", R::kLikeArgument, 0},
    {"logit_", R::kWritesArguments},
    {"hardswish", R::kLikeArgument, 0},
    {"hardswish_", R::kWritesArguments},
    {"hardswish_backward", R::kLikeArgument, 1},
    {"mish_backward", R::kLikeArgument, 1},
    {"glu_backward", R::kLikeArgument, 1},
    {"reflection_pad2d_backward", R::kLikeArgument, 1},
    {"mse_loss", R::kLoss},
    {"smooth_l1_loss", R::kLoss},
    {"huber_loss", R::kLoss},
    {"binary_cross_entropy", R::kLoss},
    {"mse_loss_backward", R::kLikeArgument, 1},
    {"binary_cross_entropy_backward", R::kLikeArgument, 1},
    // Its arguments carry the real sizes (N, C, HxW), which one-element
    // stand-ins cannot match: no dry run; ATen's dtype rule in boxed_kernel.cpp.
    {"cholesky", R::kLikeArgument, 0},
    {"channel_shuffle", R::kLikeArgument, 0},
    {"native_channel_shuffle", R::kLikeArgument, 0},
    {"poisson", R::kLikeArgument, 0},
    {"binomial", R::kBroadcast},
    {"hardtanh_", R::kWritesArguments},
    {"embedding_renorm_", R::kWritesArguments},
    // Their shape constraints (channels divisible by r^2, padding below the
    // size) refuse one-element stand-ins: no dry run, self's dtype; a bad
    // call raises at its first launch, which runs on the caller.
    {"pixel_shuffle", R::kShapedLikeSelf, -1, false},
    {"pixel_unshuffle", R::kShapedLikeSelf, -1, false},
    {"reflection_pad2d", R::kShapedLikeSelf, -1, false},
    {"grid_sampler_2d", R::kShapedLikeSelf, -1, false},
    {"grid_sampler_2d_backward", R::kGridSampler2dBackward, -1, false},
    {"im2col", R::kShapedLikeSelf, -1, false},
    {"col2im", R::kShapedLikeSelf, -1, false},
    {"tril_indices", R::kTriangleIndices, -1, false},
    {"triu_indices", R::kTriangleIndices, -1, false},
    {"nll_loss2d_forward", R::kNllLoss2d},
    {"nll_loss2d_backward", R::kLikeArgument, 1},
    // Kernels larger than the one-element stand-ins: no dry run. (Its backward
    // is csrc/ops/pooling.cpp's: it widens a chip's int32 indices first.)
    {"max_pool3d_with_indices", R::kPool3dWithIndices, -1, false},
    {"native_group_norm", R::kGroupNorm, -1, false},
    {"native_group_norm_backward", R::kGroupNormBackward, -1, false},
    // Its Meta kernel (Python, ~10 us) sizes it: a histogram of `bins`.
    {"histc", R::kMetaShaped, -1, false},
};

// Results of functional ops take their dtypes from the dry run.
constexpr bool table_is_consistent() {
  for (const OpPolicy& p : kPolicies) {
    if ((p.results == R::kLikeArgument || p.results == R::kAdaptivePool || p.results == R::kScalar ||
         p.results == R::kReduction || p.results == R::kBroadcast || p.results == R::kLoss ||
         p.results == R::kNllLoss2d) && !p.dry_run) {
      return false;  // the dry run gives their dtypes
    }
    if (p.results == R::kMetaShaped && p.dry_run) return false;  // the Meta kernel is its check
    if (p.results == R::kLikeArgument && p.like < 0) return false;
    if (p.check == C::kBroadcastsToSelf && p.checked < 1) return false;
  }
  return true;
}
static_assert(table_is_consistent(), "an op policy is inconsistent (see op_policy.h)");

c10::OperatorName name_of(const OpPolicy& policy) {
  const std::string schema = policy.schema;
  const auto dot = schema.find('.');
  return c10::OperatorName("aten::" + schema.substr(0, dot),
                           dot == std::string::npos ? "" : schema.substr(dot + 1));
}

}  // namespace

c10::ArrayRef<OpPolicy> op_policies() { return kPolicies; }

const OpPolicy& policy_of(const c10::OperatorHandle& op) {
  // Keyed by the schema object, which lives as long as the operator: the
  // lookup hashes a pointer, not the op's name.
  static const auto by_name = [] {
    std::unordered_map<c10::OperatorName, const OpPolicy*> map;
    for (const OpPolicy& p : kPolicies) map.emplace(name_of(p), &p);
    return map;
  }();
  thread_local std::unordered_map<const c10::FunctionSchema*, const OpPolicy*> by_schema;
  const c10::FunctionSchema* schema = &op.schema();
  auto it = by_schema.find(schema);
  if (it != by_schema.end()) return *it->second;
  const auto found = by_name.find(op.operator_name());
  TORCH_INTERNAL_ASSERT(found != by_name.end(), "no op policy for ", op.operator_name());
  by_schema.emplace(schema, found->second);
  return *found->second;
}

}  // namespace torch_npu
