// aclnnGroupedMatmulV2 / V4: the grouped matmul of MoE experts, as
// MindSpeed's npu_gmm (--moe-grouped-gemm) and op-plugin's
// npu_grouped_matmul call it. Each group is one ATen matmul in float32,
// written in the output's dtype, with the math of vNPU's
// torch_npu.npu_grouped_matmul (torch_npu/op_plugin/moe.py) for V4's
// quantised forms (MindSpeed's npu_quant_gmm and npu_weight_quant_gmm):
// - A8W8: int8 x times int8 weight, accumulated exactly, then
//   (x @ w + bias) * scale (per column; int64 scales carry float32 bits)
//   * perTokenScale (per row of x); an int8 output is that requantised per
//   channel (rounded half to even, saturated; scale alone);
// - weight-only: an int8 weight (per column) or an int4 one (int32, eight
//   values along N each; per column or per group of k / G rows, a (G, N)
//   scale) dequantised first, (w + antiquantOffset) * antiquantScale in
//   x's dtype.
// What vNPU does not compute (offsetOptional, the activation-quantisation
// lists, quantised weight gradients) is refused at GetWorkspaceSize, naming
// the argument; so is what the kernel refuses (per-group scales for int8
// weights, per-token scales with an int8 output).
//
// groupType -1: x[i] @ weight[i] for every i (no split).
// groupType  0: x's rows (M) split into groups; group e @ weight[e].
// groupType  2: the contraction dimension split: x (H, M) column group e @
//               weight (M, N) row group e, one (H, N) result per group
//               (the weight gradient of a type-0 matmul).
// The group list holds cumulative ends (V2, and V4 with groupListType 0)
// or group sizes (V4, groupListType 1). Rows of a split-M output past the
// last group are written as zeros.
#include <functional>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_right_shift.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_grouped_matmul_v2.h"
#include "aclnnop/aclnn_grouped_mat_mul_all_reduce.h"
#include "aclnnop/aclnn_grouped_matmul_v4.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"
#include "csrc/opapi/aclnn_mc2.h"
#include "csrc/opapi/quant_scale.h"

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
              " is not supported on vNPU (pass NULL or an empty list).");
}

// The weights as one list of 2-D matrices: a single 3-D (E, K, N) weight is
// E matrices.
std::vector<at::Tensor> weight_matrices(const std::vector<at::Tensor>& weight) {
  if (weight.size() == 1 && weight[0].dim() == 3) return weight[0].unbind(0);
  for (const at::Tensor& w : weight) TORCH_CHECK(w.dim() == 2, "weight must be 2-D matrices or one 3-D tensor.");
  return weight;
}

// A per-expert list given as one tensor with a leading expert dimension
// (bias (E, N), scale (E, N), per-group antiquant scales (E, G, N), ...) as
// one tensor per expert.
std::vector<at::Tensor> per_expert(const std::vector<at::Tensor>& list, size_t experts) {
  if (list.size() == 1 && experts > 1 && list[0].dim() >= 2) return list[0].unbind(0);
  return list;
}

// An int4 weight as the quantised operators take it (int32, eight signed
// int4 values along N each, low nibble first; torch_npu.npu_quantize packs
// them so) as int8 values.
at::Tensor unpack_int4(const at::Tensor& packed) {
  at::Tensor shifts = at::arange(0, 32, 4, packed.options().dtype(at::kInt));
  at::Tensor nibbles = at::bitwise_and(at::bitwise_right_shift(packed.unsqueeze(-1), shifts), 0xF);
  at::Tensor values = at::where(nibbles >= 8, nibbles - 16, nibbles).to(at::kChar);
  std::vector<int64_t> shape(packed.sizes().begin(), packed.sizes().end());
  shape.back() *= 8;
  return values.reshape(shape);
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
  // V4's quantisation lists (empty: not given); per_token_scale holds one
  // tensor per x (one (M,) tensor when x's rows are split).
  std::vector<at::Tensor> scale, per_token_scale, antiquant_scale, antiquant_offset;
  int64_t split_item = 0, group_type = kNoSplit, act_type = GMM_ACT_TYPE_NONE;

  bool a8w8() const { return !scale.empty() || !per_token_scale.empty(); }

  // Checks what does not depend on the group list's values.
  void check() const {
    TORCH_CHECK(!x.empty() && !weight.empty(), "x and weight must not be empty.");
    TORCH_CHECK(split_item >= 0 && split_item <= 3, "splitItem must be 0, 1, 2 or 3, but got ", split_item, ".");
    TORCH_CHECK(group_type == kNoSplit || group_type == kSplitM || group_type == kSplitK,
                "groupType must be -1, 0 or 2 on vNPU, but got ", group_type, ".");
    for (const at::Tensor& t : x) {
      if (a8w8()) {
        TORCH_CHECK(t.scalar_type() == at::kChar, "scaleOptional / perTokenScaleOptional dequantise int8 x times "
                    "int8 weight, but x is ", t.scalar_type(), ".");
      } else {
        TORCH_CHECK(at::isFloatingType(t.scalar_type()) && t.scalar_type() != at::kDouble,
                    "x must be float16, bfloat16 or float32, but got ", t.scalar_type(), ".");
      }
    }
    for (const at::Tensor& w : weight) {
      const bool int4 = w.scalar_type() == at::kInt && !antiquant_scale.empty();
      TORCH_CHECK(!a8w8() || w.scalar_type() == at::kChar, "the A8W8 grouped matmul takes int8 weights, but weight is ",
                  w.scalar_type(), ".");
      TORCH_CHECK(antiquant_scale.empty() || w.scalar_type() == at::kChar || int4, "antiquantScaleOptional "
                  "dequantises int8 weights or int4 ones (int32, eight values each), but weight is ", w.scalar_type(),
                  ".");
      TORCH_CHECK(a8w8() || !antiquant_scale.empty() || (w.scalar_type() != at::kChar && w.scalar_type() != at::kInt),
                  "an int8 or int4 (int32) weight needs scaleOptional (with int8 x) or antiquantScaleOptional.");
    }
    TORCH_CHECK(!(a8w8() && !antiquant_scale.empty()), "scaleOptional and antiquantScaleOptional cannot be given "
                "together.");
    TORCH_CHECK(antiquant_offset.empty() || !antiquant_scale.empty(), "antiquantOffsetOptional needs "
                "antiquantScaleOptional.");
    TORCH_CHECK(group_type != kSplitK || (!a8w8() && antiquant_scale.empty()),
                "the quantised grouped matmul with groupType 2 is not supported on vNPU.");
    if (a8w8()) {
      for (const at::Tensor& y : out) {
        TORCH_CHECK(y.scalar_type() == at::kHalf || y.scalar_type() == at::kBFloat16 || y.scalar_type() == at::kFloat ||
                    y.scalar_type() == at::kChar, "the A8W8 grouped matmul writes int8, float16, bfloat16 or float32, "
                    "but out is ", y.scalar_type(), ".");
        TORCH_CHECK(y.scalar_type() != at::kChar || (per_token_scale.empty() && !scale.empty()),
                    "an int8 output is requantised per channel by scaleOptional alone (perTokenScaleOptional takes a "
                    "float16 or bfloat16 output).");
      }
    }
    for (const at::Tensor& y : out) {
      TORCH_CHECK(a8w8() || y.scalar_type() != at::kChar, "an int8 output needs int8 x and weight with "
                  "scaleOptional (the A8W8 form).");
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

  // Writes products() into the outputs, as splitItem lays them out.
  void write(const std::vector<at::Tensor>& results) {
    const int64_t cols = results.empty() ? 0 : results[0].size(-1);
    int64_t rows_total = 0;
    for (const at::Tensor& r : results) rows_total += r.dim() == 2 ? r.size(0) : 0;
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

  // Group `index`'s product; its rows start at `row_begin` in the one x
  // (split M) or in x[index], where its per-token scales start.
  at::Tensor product(const at::Tensor& a, const at::Tensor& packed, size_t index, int64_t row_begin) const {
    const at::Tensor w = packed.scalar_type() == at::kInt ? unpack_int4(packed) : packed;
    TORCH_CHECK(a.size(-1) == w.size(0), "group ", index, ": x's inner size ", a.size(-1), " does not match weight ",
                w.sizes(), ".");
    const int64_t n = w.size(1);
    const bool int4 = packed.scalar_type() == at::kInt;
    at::Tensor y;
    if (a8w8()) {
      // The kernel dequantises its exact int32 accumulator in float32.
      y = exact_int8_matmul(a, w).to(at::kFloat);
    } else if (!antiquant_scale.empty()) {
      // Dequantised in x's dtype, rounded after each step, as the kernel (and op-plugin's and MindSpeed's goldens).
      const int64_t k = w.size(0);
      const at::ScalarType dtype = a.scalar_type();
      at::Tensor wf = w.to(dtype);
      if (!antiquant_offset.empty()) {
        wf = wf + antiquant_values("antiquantOffsetOptional", antiquant_offset, index, k, n, int4).to(dtype);
      }
      wf = wf * antiquant_values("antiquantScaleOptional", antiquant_scale, index, k, n, int4).to(dtype);
      y = at::matmul(a.to(at::kFloat), wf.to(at::kFloat));
    } else {
      y = at::matmul(a.to(at::kFloat), w.to(at::kFloat));
    }
    if (index < bias.size() && bias[index].defined()) y = y + bias[index].to(at::kFloat);
    if (!scale.empty()) y = y * scale_values(column_values("scaleOptional", scale, index, n));
    if (!per_token_scale.empty()) {
      const at::Tensor& tokens = per_token_scale[per_token_scale.size() == 1 ? 0 : index];
      TORCH_CHECK(tokens.numel() >= row_begin + a.size(0), "perTokenScaleOptional must hold one value per row of x ("
                  , row_begin + a.size(0), " at least), but has ", tokens.numel(), ".");
      y = y * tokens.reshape({-1}).narrow(0, row_begin, a.size(0)).to(at::kFloat).unsqueeze(1);
    }
    y = activate(y, act_type);
    return out[0].scalar_type() == at::kChar ? saturate_int8(y) : y;
  }

  // The tensor of a per-group list for group `index` (one tensor serves every group).
  static const at::Tensor& entry(const char* what, const std::vector<at::Tensor>& list, size_t index) {
    TORCH_CHECK(index < list.size() || list.size() == 1, what, " has ", list.size(), " tensors, none for group ",
                index, ".");
    return list[list.size() == 1 ? 0 : index];
  }

  // The (n,) values of a per-column list for group `index`, in its dtype.
  static at::Tensor column_values(const char* what, const std::vector<at::Tensor>& list, size_t index, int64_t n) {
    const at::Tensor& t = entry(what, list, index);
    TORCH_CHECK(t.numel() == n || t.numel() == 1, what, "[", index, "] of shape ", t.sizes(),
                " must hold one value per output column (", n, ").");
    return t.reshape({-1});
  }

  // An antiquant scale or offset for a (k, n) weight: one value per output
  // column, or, for int4 weights, a (G, n) tensor of one row per group of
  // k / G weight rows, spread over those rows.
  static at::Tensor antiquant_values(const char* what, const std::vector<at::Tensor>& list, size_t index, int64_t k,
                                     int64_t n, bool int4) {
    const at::Tensor& t = entry(what, list, index);
    if (t.numel() == n || t.numel() == 1) return t.reshape({-1});
    const bool per_group = t.dim() == 2 && t.size(1) == n && t.size(0) > 0 && k % t.size(0) == 0;
    TORCH_CHECK(per_group && int4, what, "[", index, "] of shape ", t.sizes(), " must hold one value per output "
                "column (", n, ")", int4 ? " or one row per group of weight rows, (G, n) with G dividing k = " +
                std::to_string(k) : std::string(" (per-group scales need int4 weights; int8 weights are per channel)"),
                ".");
    return t.repeat_interleave(k / t.size(0), 0);
  }

  // Each group's float32 result (before the output's dtype).
  std::vector<at::Tensor> products(const std::vector<int64_t>& ends) const {
    const std::vector<at::Tensor> w = weight_matrices(weight);
    std::vector<at::Tensor> results;
    if (group_type == kNoSplit) {
      TORCH_CHECK(x.size() == w.size(), "x and weight must have as many tensors, but got ", x.size(), " and ",
                  w.size(), ".");
      for (size_t i = 0; i < x.size(); ++i) results.push_back(product(x[i], w[i], i, 0));
      return results;
    }
    const at::Tensor& a = x[0];
    if (group_type == kSplitM) {
      const auto spans = groups(ends, a.size(0));
      TORCH_CHECK(spans.size() == w.size(), "the group list has ", spans.size(), " groups but weight has ", w.size(),
                  " matrices.");
      for (size_t e = 0; e < spans.size(); ++e) {
        results.push_back(
            product(a.narrow(0, spans[e].first, spans[e].second - spans[e].first), w[e], e, spans[e].first));
      }
      return results;
    }
    // Split K: weight is one (M, N) matrix whose rows pair with x's columns.
    TORCH_CHECK(w.size() == 1, "with groupType 2, weight must be one 2-D tensor.");
    const auto spans = groups(ends, a.size(1));
    for (size_t e = 0; e < spans.size(); ++e) {
      const int64_t begin = spans[e].first, length = spans[e].second - spans[e].first;
      results.push_back(product(a.narrow(1, begin, length), w[0].narrow(0, begin, length), e, 0));
    }
    return results;
  }

  void run(const std::vector<int64_t>& ends) { write(products(ends)); }

};

// The operator's float arguments, read and checked (both versions).
// `quantised` sets the quantisation lists (V4) before the check.
GroupedMatmul grouped_matmul(const aclTensorList* x, const aclTensorList* weight, const aclTensorList* bias,
                             const char* out_name, const aclTensorList* out, int64_t split_item, int64_t group_type,
                             int64_t act_type, const std::function<void(GroupedMatmul&, size_t)>& quantised = nullptr) {
  GroupedMatmul op;
  op.x = list_views("x", x);
  op.weight = list_views("weight", weight);
  const size_t experts = weight_matrices(op.weight).size();
  op.bias = per_expert(list_views("biasOptional", bias), experts);
  op.out = list_views(out_name, out);
  op.split_item = split_item;
  op.group_type = group_type;
  op.act_type = act_type;
  if (quantised) quantised(op, experts);
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
    check_absent("offsetOptional", offsetOptional);
    GroupedMatmul op =
        grouped_matmul(x, weight, biasOptional, "y", y, splitItem, groupType, GMM_ACT_TYPE_NONE, [&](GroupedMatmul& q, size_t experts) {
          q.scale = per_expert(list_views("scaleOptional", scaleOptional), experts);
          q.antiquant_scale = per_expert(list_views("antiquantScaleOptional", antiquantScaleOptional), experts);
          q.antiquant_offset = per_expert(list_views("antiquantOffsetOptional", antiquantOffsetOptional), experts);
        });
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
    check_absent("offsetOptional", offsetOptional);
    check_absent("activationInputOptional", activationInputOptional);
    check_absent("activationQuantScaleOptional", activationQuantScaleOptional);
    check_absent("activationQuantOffsetOptional", activationQuantOffsetOptional);
    check_absent("activationFeatureOutOptional", activationFeatureOutOptional);
    check_absent("dynQuantScaleOutOptional", dynQuantScaleOutOptional);
    GroupedMatmul op =
        grouped_matmul(x, weight, biasOptional, "out", out, splitItem, groupType, actType, [&](GroupedMatmul& q, size_t experts) {
          q.scale = per_expert(list_views("scaleOptional", scaleOptional), experts);
          q.per_token_scale = list_views("perTokenScaleOptional", perTokenScaleOptional);
          q.antiquant_scale = per_expert(list_views("antiquantScaleOptional", antiquantScaleOptional), experts);
          q.antiquant_offset = per_expert(list_views("antiquantOffsetOptional", antiquantOffsetOptional), experts);
        });
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

// The grouped matmul of every rank summed over an hccl group (an mc2
// operator, aclnn_mc2.h): y_i = allreduce(x_i @ weight_i) + bias_i, bias
// added once, as the operator documents it. splitItem 1 and 3 split the one
// x's rows by the group list's cumulative ends; 0 and 2 take one x per
// weight; 2 and 3 write one output.
aclnnStatus aclnnGroupedMatMulAllReduceGetWorkspaceSize(const aclTensorList* x, const aclTensorList* weight,
                                                        const aclTensorList* bias,
                                                        const aclIntArray* groupListOptional, int64_t splitItem,
                                                        const char* group, const char* reduceOp, int64_t commTurn,
                                                        int64_t streamMode, const aclTensorList* y,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnGroupedMatMulAllReduce", workspaceSize, executor, [&]() -> std::function<void()> {
    using namespace torch_npu::aclnn;
    const bool split_x = splitItem == 1 || splitItem == 3;
    auto op = std::make_shared<GroupedMatmul>(
        grouped_matmul(x, weight, nullptr, "y", y, splitItem, split_x ? kSplitM : kNoSplit, GMM_ACT_TYPE_NONE));
    for (const at::Tensor& t : op->x) {
      TORCH_CHECK(t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16,
                  "x must be float16 or bfloat16, but got ", t.scalar_type(), ".");
    }
    const std::vector<at::Tensor> biases = per_expert(list_views("bias", bias), weight_matrices(op->weight).size());
    std::vector<int64_t> ends = groupListOptional != nullptr ? groupListOptional->values : std::vector<int64_t>{};
    TORCH_CHECK(!split_x || !ends.empty(), "groupListOptional is required with splitItem ", splitItem, ".");
    std::shared_ptr<torch_npu::CommLease> lease = take_turn("aclnnGroupedMatMulAllReduce", group, reduceOp);
    return [op, biases, ends, lease]() mutable {
      TORCH_CHECK(lease != nullptr, "an mc2 executor runs once on vNPU (its collective turn is used).");
      lease->wait_turn();
      std::vector<at::Tensor> results = op->products(ends);
      for (at::Tensor& r : results) {
        r = r.contiguous();
        lease->allreduce_sum(r);
      }
      lease.reset();  // the group's turn is over
      for (size_t i = 0; i < results.size() && i < biases.size(); ++i) {
        if (biases[i].defined()) results[i] = results[i] + biases[i].to(at::kFloat);
      }
      op->write(results);
    };
  });
}

aclnnStatus aclnnGroupedMatMulAllReduce(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        aclrtStream stream) {
  return launch("aclnnGroupedMatMulAllReduce", executor, stream);
}

}  // extern "C"
