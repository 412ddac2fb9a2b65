// aclnnMoeTokenPermute / Unpermute (+Grad): the MoE token dispatch and
// combine of MindSpeed's npu_moe_token_permute / unpermute, with the math of
// vNPU's torch_npu.npu_moe_token_permute / unpermute (op_plugin/moe.py),
// computed in float32 and written in the outputs' dtypes.
#include <ATen/TensorOperators.h>
#include <ATen/ops/argsort.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_moe_token_permute.h"
#include "aclnnop/aclnn_moe_token_permute_grad.h"
#include "aclnnop/aclnn_moe_token_unpermute.h"
#include "aclnnop/aclnn_moe_token_unpermute_grad.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"

namespace torch_npu {
namespace aclnn {
namespace {

void check_not_padded(bool padded_mode) {
  TORCH_CHECK(!padded_mode, "paddedMode true is not supported; only paddedMode false is.");
}

void check_index_dtype(const char* what, const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kInt || t.scalar_type() == at::kLong, what, " must be int32 or int64, but got ",
              t.scalar_type(), ".");
}

// Checks sortedIndices against the (tokens * topk) flat positions and the
// rows of permuted tokens it indexes.
void check_sorted(const at::Tensor& sorted, int64_t flat, int64_t rows) {
  check_index_dtype("sortedIndices", sorted);
  TORCH_CHECK(sorted.dim() == 1 && sorted.numel() == flat, "sortedIndices must be 1-d with ", flat,
              " elements (tokens * topk), but got shape ", sorted.sizes(), ".");
  TORCH_CHECK(rows <= flat, "the permuted tokens have ", rows, " rows, more than the ", flat, " sorted positions.");
}

// The first `rows` entries of sorted, as int64, checked against `flat`
// (when the operator runs: sortedIndices is device data).
at::Tensor leading_positions(const at::Tensor& sorted, int64_t rows, int64_t flat) {
  at::Tensor positions = sorted.narrow(0, 0, rows).to(at::kLong);
  if (rows > 0) {
    TORCH_CHECK(positions.min().item<int64_t>() >= 0 && positions.max().item<int64_t>() < flat,
                "sortedIndices holds a position outside [0, ", flat, ").");
  }
  return positions;
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::host_view;
using torch_npu::aclnn::launch;
using torch_npu::aclnn::optional_host_view;
using torch_npu::aclnn::prepare;

extern "C" {

aclnnStatus aclnnMoeTokenPermuteGetWorkspaceSize(const aclTensor* tokens, const aclTensor* indices,
                                                 int64_t numOutTokens, bool paddedMode, aclTensor* permuteTokensOut,
                                                 aclTensor* sortedIndicesOut, uint64_t* workspaceSize,
                                                 aclOpExecutor** executor) {
  return prepare("aclnnMoeTokenPermute", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor t = host_view("tokens", tokens), idx = host_view("indices", indices),
               out = host_view("permuteTokensOut", permuteTokensOut),
               sorted = host_view("sortedIndicesOut", sortedIndicesOut);
    torch_npu::aclnn::check_not_padded(paddedMode);
    torch_npu::aclnn::check_index_dtype("indices", idx);
    TORCH_CHECK(t.dim() == 2, "tokens must be 2-d, but got ", t.dim(), " dims.");
    TORCH_CHECK((idx.dim() == 1 || idx.dim() == 2) && idx.size(0) == t.size(0),
                "indices must be (tokens,) or (tokens, topk) with tokens = ", t.size(0), ", but got shape ",
                idx.sizes(), ".");
    const int64_t topk = idx.dim() == 2 ? idx.size(1) : 1;
    const int64_t flat = idx.numel();
    TORCH_CHECK(sorted.dim() == 1 && sorted.numel() == flat && sorted.scalar_type() == at::kInt,
                "sortedIndicesOut must be an int32 tensor of ", flat, " elements.");
    TORCH_CHECK(out.dim() == 2 && out.size(1) == t.size(1) && out.size(0) <= flat && out.size(0) == numOutTokens,
                "permuteTokensOut must be (numOutTokens = ", numOutTokens, ", ", t.size(1), ") with numOutTokens <= ",
                flat, ", but got shape ", out.sizes(), ".");
    TORCH_CHECK(out.scalar_type() == t.scalar_type(), "permuteTokensOut must have tokens' dtype.");
    return [t, idx, out, sorted, topk]() mutable {
      at::Tensor order = at::argsort(idx.reshape(-1), /*stable=*/true);
      sorted.copy_(order);
      out.copy_(t.index_select(0, order.narrow(0, 0, out.size(0)).div(topk, "floor")));
    };
  });
}

aclnnStatus aclnnMoeTokenPermute(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                 aclrtStream stream) {
  return launch("aclnnMoeTokenPermute", executor, stream);
}

aclnnStatus aclnnMoeTokenPermuteGradGetWorkspaceSize(const aclTensor* permutedOutputGrad,
                                                     const aclTensor* sortedIndices, int64_t numTopk, bool paddedMode,
                                                     aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor) {
  return prepare("aclnnMoeTokenPermuteGrad", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor g = host_view("permutedOutputGrad", permutedOutputGrad),
               sorted = host_view("sortedIndices", sortedIndices), o = host_view("out", out);
    torch_npu::aclnn::check_not_padded(paddedMode);
    TORCH_CHECK(numTopk >= 1, "numTopk must be at least 1, but got ", numTopk, ".");
    TORCH_CHECK(g.dim() == 2 && o.dim() == 2 && o.size(1) == g.size(1),
                "permutedOutputGrad and out must be 2-d with one hidden size.");
    const int64_t flat = o.size(0) * numTopk;
    torch_npu::aclnn::check_sorted(sorted, flat, g.size(0));
    return [g, sorted, o, numTopk, flat]() mutable {
      at::Tensor positions = torch_npu::aclnn::leading_positions(sorted, g.size(0), flat);
      at::Tensor per_choice = at::zeros({flat, g.size(1)}, g.options().dtype(at::kFloat));
      per_choice.index_copy_(0, positions, g.to(at::kFloat));
      o.copy_(per_choice.view({o.size(0), numTopk, g.size(1)}).sum(1));
    };
  });
}

aclnnStatus aclnnMoeTokenPermuteGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                     aclrtStream stream) {
  return launch("aclnnMoeTokenPermuteGrad", executor, stream);
}

aclnnStatus aclnnMoeTokenUnpermuteGetWorkspaceSize(const aclTensor* permutedTokens, const aclTensor* sortedIndices,
                                                   const aclTensor* probsOptional, bool paddedMode,
                                                   const aclIntArray* restoreShapeOptional, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnMoeTokenUnpermute", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor p = host_view("permutedTokens", permutedTokens), sorted = host_view("sortedIndices", sortedIndices),
               probs = optional_host_view("probsOptional", probsOptional), o = host_view("out", out);
    torch_npu::aclnn::check_not_padded(paddedMode);
    const int64_t topk = probs.defined() ? probs.size(-1) : 1;
    TORCH_CHECK(p.dim() == 2 && o.dim() == 2 && o.size(1) == p.size(1),
                "permutedTokens and out must be 2-d with one hidden size.");
    TORCH_CHECK(!probs.defined() || (probs.dim() == 2 && probs.size(0) == o.size(0)),
                "probsOptional must be (tokens = ", o.size(0), ", topk), but got shape ",
                probs.defined() ? probs.sizes() : at::IntArrayRef{}, ".");
    const int64_t flat = o.size(0) * topk;
    torch_npu::aclnn::check_sorted(sorted, flat, p.size(0));
    return [p, sorted, probs, o, topk, flat]() mutable {
      at::Tensor positions = torch_npu::aclnn::leading_positions(sorted, p.size(0), flat);
      at::Tensor per_choice = at::zeros({flat, p.size(1)}, p.options().dtype(at::kFloat));
      per_choice.index_copy_(0, positions, p.to(at::kFloat));
      at::Tensor choices = per_choice.view({o.size(0), topk, p.size(1)});
      if (probs.defined()) choices = choices * probs.to(at::kFloat).unsqueeze(-1);
      o.copy_(choices.sum(1));
    };
  });
}

aclnnStatus aclnnMoeTokenUnpermute(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   aclrtStream stream) {
  return launch("aclnnMoeTokenUnpermute", executor, stream);
}

aclnnStatus aclnnMoeTokenUnpermuteGradGetWorkspaceSize(const aclTensor* permutedTokens,
                                                       const aclTensor* unpermutedTokensGrad,
                                                       const aclTensor* sortedIndices, const aclTensor* probsOptional,
                                                       bool paddedMode, const aclIntArray* restoreShapeOptional,
                                                       aclTensor* permutedTokensGradOut, aclTensor* probsGradOut,
                                                       uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnMoeTokenUnpermuteGrad", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor p = host_view("permutedTokens", permutedTokens), g = host_view("unpermutedTokensGrad",
                                                                               unpermutedTokensGrad),
               sorted = host_view("sortedIndices", sortedIndices),
               probs = optional_host_view("probsOptional", probsOptional),
               dp = host_view("permutedTokensGradOut", permutedTokensGradOut),
               dprobs = optional_host_view("probsGradOut", probsGradOut);
    torch_npu::aclnn::check_not_padded(paddedMode);
    const int64_t topk = probs.defined() ? probs.size(-1) : 1;
    TORCH_CHECK(p.dim() == 2 && g.dim() == 2 && g.size(1) == p.size(1),
                "permutedTokens and unpermutedTokensGrad must be 2-d with one hidden size.");
    TORCH_CHECK(dp.sizes() == p.sizes(), "permutedTokensGradOut must have permutedTokens' shape.");
    TORCH_CHECK(!probs.defined() || (probs.dim() == 2 && probs.size(0) == g.size(0)),
                "probsOptional must be (tokens = ", g.size(0), ", topk).");
    const bool probs_grad = probs.defined() && dprobs.defined() && dprobs.numel() > 0;
    TORCH_CHECK(!probs_grad || dprobs.sizes() == probs.sizes(), "probsGradOut must have probsOptional's shape.");
    const int64_t flat = g.size(0) * topk;
    torch_npu::aclnn::check_sorted(sorted, flat, p.size(0));
    return [p, g, sorted, probs, dp, dprobs, topk, flat, probs_grad]() mutable {
      at::Tensor positions = torch_npu::aclnn::leading_positions(sorted, p.size(0), flat);
      // Row r of the permuted tokens went to position positions[r] = token * topk + k.
      at::Tensor token_grad = g.to(at::kFloat).index_select(0, positions.div(topk, "floor"));
      at::Tensor weighted = token_grad;
      if (probs.defined()) {
        weighted = token_grad * probs.to(at::kFloat).reshape(-1).index_select(0, positions).unsqueeze(-1);
      }
      dp.copy_(weighted);
      if (probs_grad) {
        at::Tensor per_choice = at::zeros({flat}, g.options().dtype(at::kFloat));
        per_choice.index_copy_(0, positions, (token_grad * p.to(at::kFloat)).sum(-1));
        dprobs.copy_(per_choice.view({g.size(0), topk}));
      }
    };
  });
}

aclnnStatus aclnnMoeTokenUnpermuteGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       aclrtStream stream) {
  return launch("aclnnMoeTokenUnpermuteGrad", executor, stream);
}

}  // extern "C"
