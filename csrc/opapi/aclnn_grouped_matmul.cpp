// aclnnGroupedMatmulV2 / V4: the grouped matmul of MoE experts, as
// MindSpeed's npu_gmm (--moe-grouped-gemm) and op-plugin's
// npu_grouped_matmul call it, for float inputs. Each group is one ATen
// matmul in float32, written in the output's dtype; the quantised variants
// (scale, offset, antiquant, per-token scale lists) are refused at
// GetWorkspaceSize, naming the list.
//
// groupType -1: x[i] @ weight[i] for every i (no split).
// groupType  0: x's rows (M) split into groups; group e @ weight[e].
// groupType  2: the contraction dimension split: x (H, M) column group e @
//               weight (M, N) row group e, one (H, N) result per group
//               (the weight gradient of a type-0 matmul).
// The group list holds cumulative ends (V2, and V4 with groupListType 0)
// or group sizes (V4, groupListType 1). Rows of a split-M output past the
// last group are written as zeros.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/stack.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_grouped_matmul_v2.h"
#include "aclnnop/aclnn_grouped_matmul_v4.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"

namespace torch_npu {
namespace aclnn {
namespace {

constexpr int64_t kNoSplit = -1;
constexpr int64_t kSplitM = 0;
constexpr int64_t kSplitK = 2;

std::vector<at::Tensor> list_views(const char* what, const aclTensorList* list) {
  std::vector<at::Tensor> out;
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->tensors.size(); ++i) {
    out.push_back(host_view((std::string(what) + "[" + std::to_string(i) + "]").c_str(), list->tensors[i]));
  }
  return out;
}

void check_absent(const char* what, const aclTensorList* list) {
  TORCH_CHECK(list == nullptr || list->tensors.empty(), what,
              " is not supported on vNPU: its grouped matmul computes float inputs only (pass NULL or an empty "
              "list).");
}

// The weights as one list of 2-D matrices: a single 3-D (E, K, N) weight is
// E matrices.
std::vector<at::Tensor> weight_matrices(const std::vector<at::Tensor>& weight) {
  if (weight.size() == 1 && weight[0].dim() == 3) return weight[0].unbind(0);
  for (const at::Tensor& w : weight) TORCH_CHECK(w.dim() == 2, "weight must be 2-D matrices or one 3-D tensor.");
  return weight;
}

std::vector<at::Tensor> bias_vectors(const std::vector<at::Tensor>& bias) {
  if (bias.size() == 1 && bias[0].dim() == 2) return bias[0].unbind(0);
  return bias;
}

at::Tensor activate(const at::Tensor& y, int64_t act_type) {
  switch (act_type) {
    case GMM_ACT_TYPE_NONE: return y;
    case GMM_ACT_TYPE_RELU: return at::relu(y);
    case GMM_ACT_TYPE_GELU_TANH: return at::gelu(y, "tanh");
    case GMM_ACT_TYPE_GELU_ERR_FUNC: return at::gelu(y);
    case GMM_ACT_TYPE_FAST_GELU: return y * at::sigmoid(y * 1.702);
    default: return at::silu(y);  // GMM_ACT_TYPE_SILU (check() refuses the rest)
  }
}

struct GroupedMatmul {
  std::vector<at::Tensor> x, weight, bias, out;
  int64_t split_item = 0, group_type = kNoSplit, act_type = GMM_ACT_TYPE_NONE;

  // Checks what does not depend on the group list's values.
  void check() const {
    TORCH_CHECK(!x.empty() && !weight.empty(), "x and weight must not be empty.");
    TORCH_CHECK(split_item >= 0 && split_item <= 3, "splitItem must be 0, 1, 2 or 3, but got ", split_item, ".");
    TORCH_CHECK(group_type == kNoSplit || group_type == kSplitM || group_type == kSplitK,
                "groupType must be -1, 0 or 2 on vNPU, but got ", group_type, ".");
    for (const at::Tensor& t : x) {
      TORCH_CHECK(at::isFloatingType(t.scalar_type()) && t.scalar_type() != at::kDouble,
                  "x must be float16, bfloat16 or float32, but got ", t.scalar_type(), ".");
    }
    if (group_type != kNoSplit) {
      TORCH_CHECK(x.size() == 1, "with groupType ", group_type, ", x must be one tensor, but got ", x.size(), ".");
      TORCH_CHECK(x[0].dim() == 2, "x must be 2-D, but got ", x[0].dim(), " dims.");
    }
    const bool single_out = split_item >= 2;
    if (single_out) TORCH_CHECK(out.size() == 1, "with splitItem ", split_item, ", out must be one tensor.");
    TORCH_CHECK(act_type >= GMM_ACT_TYPE_NONE && act_type <= GMM_ACT_TYPE_SILU,
                "actType must be 0 (none), 1 (relu), 2 (gelu tanh), 3 (gelu erf), 4 (fast gelu) or 5 (silu), but "
                "got ", act_type, ".");
  }

  // The [begin, end) rows (or columns) of each group.
  std::vector<std::pair<int64_t, int64_t>> groups(const std::vector<int64_t>& ends, int64_t extent) const {
    std::vector<std::pair<int64_t, int64_t>> out;
    int64_t begin = 0;
    for (int64_t end : ends) {
      TORCH_CHECK(end >= begin && end <= extent, "the group list must be non-decreasing cumulative ends within ",
                  extent, ", but has ", end, " after ", begin, ".");
      out.emplace_back(begin, end);
      begin = end;
    }
    return out;
  }

  void write(std::vector<at::Tensor> results, int64_t rows_total, int64_t cols) {
    if (split_item >= 2) {
      at::Tensor y = out[0];
      if (group_type == kSplitK) {
        TORCH_CHECK(y.dim() == 3 && y.size(0) == static_cast<int64_t>(results.size()),
                    "out must be (groups, H, N) for groupType 2.");
        y.copy_(at::stack(results));
        return;
      }
      at::Tensor rows = at::cat(results);
      TORCH_CHECK(y.dim() == 2 && y.size(1) == cols && y.size(0) >= rows.size(0),
                  "out must be (", rows_total, ", ", cols, "), but got ", y.sizes(), ".");
      y.narrow(0, 0, rows.size(0)).copy_(rows);
      if (y.size(0) > rows.size(0)) y.narrow(0, rows.size(0), y.size(0) - rows.size(0)).zero_();
      return;
    }
    TORCH_CHECK(out.size() == results.size(), "out must hold one tensor per group (", results.size(), "), but has ",
                out.size(), ".");
    for (size_t i = 0; i < results.size(); ++i) {
      TORCH_CHECK(out[i].sizes() == results[i].sizes(), "out[", i, "] must be ", results[i].sizes(), ", but got ",
                  out[i].sizes(), ".");
      out[i].copy_(results[i]);
    }
  }

  at::Tensor product(const at::Tensor& a, const at::Tensor& w, size_t index) const {
    TORCH_CHECK(a.size(-1) == w.size(0), "group ", index, ": x's inner size ", a.size(-1), " does not match weight ",
                w.sizes(), ".");
    at::Tensor y = at::matmul(a.to(at::kFloat), w.to(at::kFloat));
    if (index < bias.size() && bias[index].defined()) y = y + bias[index].to(at::kFloat);
    return activate(y, act_type);
  }

  void run(const std::vector<int64_t>& ends) {
    const std::vector<at::Tensor> w = weight_matrices(weight);
    std::vector<at::Tensor> results;
    if (group_type == kNoSplit) {
      TORCH_CHECK(x.size() == w.size(), "x and weight must have as many tensors, but got ", x.size(), " and ",
                  w.size(), ".");
      for (size_t i = 0; i < x.size(); ++i) results.push_back(product(x[i], w[i], i));
      int64_t rows = 0;
      for (const at::Tensor& r : results) rows += r.size(0);
      write(results, rows, results[0].size(-1));
      return;
    }
    const at::Tensor& a = x[0];
    if (group_type == kSplitM) {
      const auto spans = groups(ends, a.size(0));
      TORCH_CHECK(spans.size() == w.size(), "the group list has ", spans.size(), " groups but weight has ", w.size(),
                  " matrices.");
      for (size_t e = 0; e < spans.size(); ++e) {
        results.push_back(product(a.narrow(0, spans[e].first, spans[e].second - spans[e].first), w[e], e));
      }
      write(results, a.size(0), w[0].size(1));
      return;
    }
    // Split K: weight is one (M, N) matrix whose rows pair with x's columns.
    TORCH_CHECK(w.size() == 1, "with groupType 2, weight must be one 2-D tensor.");
    const auto spans = groups(ends, a.size(1));
    for (size_t e = 0; e < spans.size(); ++e) {
      const int64_t begin = spans[e].first, length = spans[e].second - spans[e].first;
      results.push_back(product(a.narrow(1, begin, length), w[0].narrow(0, begin, length), e));
    }
    write(results, a.size(0), w[0].size(1));
  }
};

// The operator's float arguments, read and checked (both versions).
GroupedMatmul grouped_matmul(const aclTensorList* x, const aclTensorList* weight, const aclTensorList* bias,
                             const char* out_name, const aclTensorList* out, int64_t split_item, int64_t group_type,
                             int64_t act_type) {
  GroupedMatmul op;
  op.x = list_views("x", x);
  op.weight = list_views("weight", weight);
  op.bias = bias_vectors(list_views("biasOptional", bias));
  op.out = list_views(out_name, out);
  op.split_item = split_item;
  op.group_type = group_type;
  op.act_type = act_type;
  op.check();
  return op;
}

std::vector<int64_t> cumulative(std::vector<int64_t> values, int64_t list_type) {
  TORCH_CHECK(list_type == 0 || list_type == 1, "groupListType must be 0 (cumulative ends) or 1 (group sizes), but "
              "got ", list_type, ".");
  if (list_type == 1) {
    for (size_t i = 1; i < values.size(); ++i) values[i] += values[i - 1];
  }
  return values;
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::launch;
using torch_npu::aclnn::optional_host_view;
using torch_npu::aclnn::prepare;

extern "C" {

aclnnStatus aclnnGroupedMatmulV2GetWorkspaceSize(
    const aclTensorList* x, const aclTensorList* weight, const aclTensorList* biasOptional,
    const aclTensorList* scaleOptional, const aclTensorList* offsetOptional,
    const aclTensorList* antiquantScaleOptional, const aclTensorList* antiquantOffsetOptional,
    const aclIntArray* groupListOptional, int64_t splitItem, int64_t groupType, const aclTensorList* y,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnGroupedMatmulV2", workspaceSize, executor, [&]() -> std::function<void()> {
    using namespace torch_npu::aclnn;
    check_absent("scaleOptional", scaleOptional);
    check_absent("offsetOptional", offsetOptional);
    check_absent("antiquantScaleOptional", antiquantScaleOptional);
    check_absent("antiquantOffsetOptional", antiquantOffsetOptional);
    GroupedMatmul op = grouped_matmul(x, weight, biasOptional, "y", y, splitItem, groupType, GMM_ACT_TYPE_NONE);
    std::vector<int64_t> ends = groupListOptional != nullptr ? groupListOptional->values : std::vector<int64_t>{};
    TORCH_CHECK(groupType == kNoSplit || !ends.empty(), "groupListOptional is required with groupType ", groupType,
                ".");
    return [op, ends]() mutable { op.run(ends); };
  });
}

aclnnStatus aclnnGroupedMatmulV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                 aclrtStream stream) {
  return launch("aclnnGroupedMatmulV2", executor, stream);
}

aclnnStatus aclnnGroupedMatmulV4GetWorkspaceSize(
    const aclTensorList* x, const aclTensorList* weight, const aclTensorList* biasOptional,
    const aclTensorList* scaleOptional, const aclTensorList* offsetOptional,
    const aclTensorList* antiquantScaleOptional, const aclTensorList* antiquantOffsetOptional,
    const aclTensorList* perTokenScaleOptional, const aclTensor* groupListOptional,
    const aclTensorList* activationInputOptional, const aclTensorList* activationQuantScaleOptional,
    const aclTensorList* activationQuantOffsetOptional, int64_t splitItem, int64_t groupType, int64_t groupListType,
    int64_t actType, aclTensorList* out, aclTensorList* activationFeatureOutOptional,
    aclTensorList* dynQuantScaleOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnGroupedMatmulV4", workspaceSize, executor, [&]() -> std::function<void()> {
    using namespace torch_npu::aclnn;
    check_absent("scaleOptional", scaleOptional);
    check_absent("offsetOptional", offsetOptional);
    check_absent("antiquantScaleOptional", antiquantScaleOptional);
    check_absent("antiquantOffsetOptional", antiquantOffsetOptional);
    check_absent("perTokenScaleOptional", perTokenScaleOptional);
    check_absent("activationInputOptional", activationInputOptional);
    check_absent("activationQuantScaleOptional", activationQuantScaleOptional);
    check_absent("activationQuantOffsetOptional", activationQuantOffsetOptional);
    check_absent("activationFeatureOutOptional", activationFeatureOutOptional);
    check_absent("dynQuantScaleOutOptional", dynQuantScaleOutOptional);
    GroupedMatmul op = grouped_matmul(x, weight, biasOptional, "out", out, splitItem, groupType, actType);
    at::Tensor group_list = optional_host_view("groupListOptional", groupListOptional);
    TORCH_CHECK(groupType == kNoSplit || group_list.defined(), "groupListOptional is required with groupType ",
                groupType, ".");
    if (group_list.defined()) {
      TORCH_CHECK(group_list.dim() == 1 && !at::isFloatingType(group_list.scalar_type()),
                  "groupListOptional must be a 1-D integer tensor, but got ", group_list.scalar_type(), " ",
                  group_list.sizes(), ".");
    }
    cumulative({}, groupListType);  // checks groupListType
    return [op, group_list, groupListType]() mutable {
      std::vector<int64_t> values;
      if (group_list.defined()) {
        at::Tensor as_long = group_list.to(at::kLong).contiguous();
        values.assign(as_long.data_ptr<int64_t>(), as_long.data_ptr<int64_t>() + as_long.numel());
      }
      op.run(cumulative(values, groupListType));
    };
  });
}

aclnnStatus aclnnGroupedMatmulV4(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                 aclrtStream stream) {
  return launch("aclnnGroupedMatmulV4", executor, stream);
}

}  // extern "C"
