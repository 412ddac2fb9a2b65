// ATB's matmul operations on the virtual NPU (infer_op_params.h):
// LinearParam, GroupedMatmulInplaceAddParam (MindSpeed's gradient-
// accumulation fusions) and LinearParallelParam (LCAL's matmul fused with a
// collective over an hccl group). Math by ATen's CPU kernels in float32 on
// views of the device memory.
#include <algorithm>
#include <string>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>

#include "atb/infer_op_params.h"
#include "csrc/core/comm_lease.h"
#include "csrc/opapi/atb_operation.h"

namespace atb {
namespace vnpu {
namespace {

// out = op(x) @ op(weight) [+ bias] [+ accum].
class LinearOperation : public EmulatedOperation {
 public:
  explicit LinearOperation(const infer::LinearParam& param) : EmulatedOperation("LinearOperation"), param_(param) {}

  uint32_t GetInputNum() const override { return 2 + (param_.hasBias ? 1 : 0) + (param_.enAccum ? 1 : 0); }
  uint32_t GetOutputNum() const override { return 1; }

  Status InferShape(const SVector<TensorDesc>& in, SVector<TensorDesc>& out) const override {
    if (in.size() != GetInputNum()) return ERROR_INVALID_TENSOR_NUM;
    const Dims& a = in[0].shape;
    const Dims& b = in[1].shape;
    if (a.dimNum != 2 || b.dimNum != 2) return ERROR_INVALID_TENSOR_DIM;
    TensorDesc result = param_.enAccum ? in[GetInputNum() - 1] : in[0];
    result.shape.dimNum = 2;
    result.shape.dims[0] = param_.transposeA ? a.dims[1] : a.dims[0];
    result.shape.dims[1] = param_.transposeB ? b.dims[0] : b.dims[1];
    if (param_.outDataType != ACL_DT_UNDEFINED) result.dtype = param_.outDataType;
    out.clear();
    out.push_back(result);
    return NO_ERROR;
  }

 protected:
  std::function<void()> prepare(const VariantPack& pack) const override {
    check_counts(pack, param_.hasBias ? (param_.enAccum ? "x, weight, bias, accum" : "x, weight, bias")
                                      : (param_.enAccum ? "x, weight, accum" : "x, weight"));
    at::Tensor x = host_view("x", pack.inTensors[0]), w = host_view("weight", pack.inTensors[1]);
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2, "x and weight must be 2-d, got ", x.dim(), " and ", w.dim(), " dims.");
    at::Tensor a = param_.transposeA ? x.t() : x, b = param_.transposeB ? w.t() : w;
    TORCH_CHECK(a.size(1) == b.size(0), "op(x) ", a.sizes(), " and op(weight) ", b.sizes(), " do not multiply.");
    at::Tensor bias = param_.hasBias ? host_view("bias", pack.inTensors[2]) : at::Tensor();
    at::Tensor accum = param_.enAccum ? host_view("accum", pack.inTensors[GetInputNum() - 1]) : at::Tensor();
    at::Tensor out = host_view("out", pack.outTensors[0]);
    TORCH_CHECK(out.dim() == 2 && out.size(0) == a.size(0) && out.size(1) == b.size(1), "out must be [", a.size(0),
                ", ", b.size(1), "], got ", out.sizes(), ".");
    TORCH_CHECK(!accum.defined() || accum.sizes() == out.sizes(), "accum must have out's shape ", out.sizes(), ".");
    return [a, b, bias, accum, out]() mutable {
      at::Tensor result = at::matmul(a.to(at::kFloat), b.to(at::kFloat));
      if (bias.defined()) result = result + bias.to(at::kFloat);
      if (accum.defined()) result = result + accum.to(at::kFloat);
      out.copy_(result);
    };
  }

 private:
  infer::LinearParam param_;
};

// grad[e] += op(x[rows of e]) @ op(weight[rows of e]) for the groups of rows
// the cumulative ends in groupList give.
class GroupedMatmulInplaceAddOperation : public EmulatedOperation {
 public:
  explicit GroupedMatmulInplaceAddOperation(const infer::GroupedMatmulInplaceAddParam& param)
      : EmulatedOperation("GroupedMatmulInplaceAddOperation"), param_(param) {}

  uint32_t GetInputNum() const override { return 4; }
  uint32_t GetOutputNum() const override { return 1; }

  Status InferShape(const SVector<TensorDesc>& in, SVector<TensorDesc>& out) const override {
    if (in.size() != GetInputNum()) return ERROR_INVALID_TENSOR_NUM;
    out.clear();
    out.push_back(in[3]);
    return NO_ERROR;
  }

 protected:
  std::function<void()> prepare(const VariantPack& pack) const override {
    check_counts(pack, "x, weight, groupList, grad");
    at::Tensor x = host_view("x", pack.inTensors[0]), w = host_view("weight", pack.inTensors[1]);
    at::Tensor group_list = host_view("groupList", pack.inTensors[2]);
    at::Tensor grad = host_view("grad", pack.inTensors[3]), out = host_view("out", pack.outTensors[0]);
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2, "x and weight must be 2-d, got ", x.dim(), " and ", w.dim(), " dims.");
    TORCH_CHECK(x.size(0) == w.size(0), "x ", x.sizes(), " and weight ", w.sizes(),
                " must have the same rows (the grouped dimension).");
    TORCH_CHECK(group_list.dim() == 1 && group_list.scalar_type() == at::kLong,
                "groupList must be a 1-d int64 tensor of cumulative group ends, got ", group_list.scalar_type(), " ",
                group_list.sizes(), ".");
    TORCH_CHECK(grad.scalar_type() == at::kFloat, "grad must be float32, got ", grad.scalar_type(), ".");
    TORCH_CHECK(out.data_ptr() == grad.data_ptr() && out.sizes() == grad.sizes(),
                "the output must be grad itself (the operation accumulates in place).");
    const int64_t groups = group_list.size(0);
    // op(x[r]) is (k, |r|) with transposeA, op(weight[r]) (|r|, n) without transposeB.
    const int64_t k = param_.transposeA ? x.size(1) : x.size(0);
    const int64_t n = param_.transposeB ? w.size(0) : w.size(1);
    TORCH_CHECK(param_.transposeA && !param_.transposeB,
                "vNPU's GroupedMatmulInplaceAdd groups the rows of x and weight: transposeA must be true and "
                "transposeB false (as MindSpeed sets them), got transposeA=", param_.transposeA,
                " transposeB=", param_.transposeB, ".");
    TORCH_CHECK(grad.numel() == groups * k * n, "grad must hold ", groups, " groups of [", k, ", ", n,
                "] (", groups * k * n, " elements), got ", grad.sizes(), ".");
    const int64_t rows = x.size(0);
    return [x, w, group_list, grad, groups, k, n, rows]() mutable {
      at::Tensor per_group = grad.view({groups, k, n});
      const int64_t* ends = group_list.data_ptr<int64_t>();
      int64_t begin = 0;
      for (int64_t e = 0; e < groups; ++e) {
        const int64_t end = ends[e];
        TORCH_CHECK(end >= begin && end <= rows, "groupList must be non-decreasing cumulative ends within the ", rows,
                    " rows, got ", end, " after ", begin, " at group ", e, ".");
        if (end > begin) {
          per_group[e].add_(at::matmul(x.narrow(0, begin, end - begin).t().to(at::kFloat),
                                       w.narrow(0, begin, end - begin).to(at::kFloat)));
        }
        begin = end;
      }
    };
  }

 private:
  infer::GroupedMatmulInplaceAddParam param_;
};

// out = x @ op(weight) [+ residual], with the collective of `type` around
// it, over the hccl process group that LCAL's communication domain names
// (lease_comm_domain): LINEAR_ALL_REDUCE sums the products, then adds the
// residual; LINEAR_REDUCE_SCATTER sums them and keeps this rank's block of
// rows; ALL_GATHER_LINEAR multiplies every rank's x, rank after rank (with
// keepIntermediate, also written out). Products in float32, communicated in
// float32 (x's dtype for the gather). Like the mc2 operators, Setup (on the
// host, in issue order) takes the group's collective turn and the task uses
// it (Note [Collectives inside a compute-stream task] in
// csrc/core/comm_lease.h). Over one rank every collective is the identity.
//
// ALL_GATHER_LINEAR_REDUCE_SCATTER is 2-D tensor parallelism (MindSpeed's
// tp_2d linears): the rankSize = agDim x rsDim ranks form a grid whose inner
// (consecutive-rank) dimension is the all-gather one when innerDimIsAg, the
// reduce-scatter one otherwise. x is gathered (along rows) over this rank's
// agDim ranks, multiplied, and the products are summed over its rsDim ranks,
// each keeping its block of rows: out has x's rows * agDim / rsDim. vNPU
// communicates over the whole domain group (two all-gathers, one turn) and
// picks the grid line's blocks: more traffic than the kernel's, same math.
class LinearParallelOperation : public EmulatedOperation {
  using P = infer::LinearParallelParam;

 public:
  explicit LinearParallelOperation(const infer::LinearParallelParam& param)
      : EmulatedOperation("LinearParallelOperation"), param_(param) {}

  uint32_t GetInputNum() const override { return 2 + (param_.hasResidual ? 1 : 0); }
  uint32_t GetOutputNum() const override { return keeps_gathered_input() ? 2 : 1; }

  Status InferShape(const SVector<TensorDesc>& in, SVector<TensorDesc>& out) const override {
    if (in.size() != GetInputNum()) return ERROR_INVALID_TENSOR_NUM;
    if (in[0].shape.dimNum != 2 || in[1].shape.dimNum != 2) return ERROR_INVALID_TENSOR_DIM;
    TensorDesc result = in[0];
    result.shape.dims[0] = out_rows(in[0].shape.dims[0]);
    result.shape.dims[1] = param_.transWeight ? in[1].shape.dims[0] : in[1].shape.dims[1];
    if (param_.outDataType != ACL_DT_UNDEFINED) result.dtype = param_.outDataType;
    out.clear();
    out.push_back(result);
    if (keeps_gathered_input()) {
      TensorDesc gathered = in[0];
      gathered.shape.dims[0] *= param_.rankSize;
      out.push_back(gathered);
    }
    return NO_ERROR;
  }

  // Checks, then takes the group's turn when the operation communicates.
  Status Setup(const VariantPack& pack, uint64_t& workspaceSize, Context* context) override {
    const Status checked = EmulatedOperation::Setup(pack, workspaceSize, context);
    if (checked != NO_ERROR || !communicates()) return checked;
    try {
      int64_t domain = -1;
      try {
        domain = std::stoll(param_.commDomain);
      } catch (const std::exception&) {
      }
      TORCH_CHECK(domain >= 0, "commDomain \"", param_.commDomain, "\" must be a communication domain number "
                  "(LCAL's device // rankSize).");
      lease_ = torch_npu::lease_comm_domain(domain, param_.rank, param_.rankSize, name_);
      return NO_ERROR;
    } catch (const c10::Error& e) {
      report(std::string("Setup failed: ") + e.what_without_backtrace());
      return ERROR_INVALID_PARAM;
    }
  }

  Status Execute(const VariantPack& pack, uint8_t* workspace, uint64_t workspaceSize, Context* context) override {
    if (communicates() && lease_ == nullptr) {
      report("Execute failed: Setup must run first (it takes the group's collective turn), once per Execute.");
      return ERROR_INVALID_PARAM;
    }
    executing_ = std::move(lease_);  // prepare() hands it to the task
    const Status status = EmulatedOperation::Execute(pack, workspace, workspaceSize, context);
    executing_.reset();
    return status;
  }

 protected:
  std::function<void()> prepare(const VariantPack& pack) const override {
    TORCH_CHECK(param_.type >= P::LINEAR_ALL_REDUCE && param_.type < P::MAX, "type ", static_cast<int>(param_.type),
                " is not a LinearParallelParam::ParallelType.");
    TORCH_CHECK(param_.rankSize >= 1 && param_.rank >= 0 && param_.rank < param_.rankSize, "rank ", param_.rank,
                " must be in [0, rankSize ", param_.rankSize, ").");
    const P::TwoDimTPInfo& grid = param_.twoDimTPInfo;
    TORCH_CHECK(param_.type != P::ALL_GATHER_LINEAR_REDUCE_SCATTER || param_.rankSize == 1 ||
                    (grid.agDim >= 1 && grid.rsDim >= 1 && grid.agDim * grid.rsDim == param_.rankSize),
                "ALL_GATHER_LINEAR_REDUCE_SCATTER needs twoDimTPInfo.agDim x rsDim = rankSize (", param_.rankSize,
                "), but got ", grid.agDim, " x ", grid.rsDim, ".");
    TORCH_CHECK(param_.quantType == infer::QUANT_UNDEFINED,
                "quantType ", static_cast<int>(param_.quantType), " is not supported on vNPU (QUANT_UNDEFINED only).");
    check_counts(pack, param_.hasResidual ? "x, weight, residual" : "x, weight");
    at::Tensor x = host_view("x", pack.inTensors[0]), w = host_view("weight", pack.inTensors[1]);
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2, "x and weight must be 2-d, got ", x.dim(), " and ", w.dim(), " dims.");
    at::Tensor b = param_.transWeight ? w.t() : w;
    TORCH_CHECK(x.size(1) == b.size(0), "x ", x.sizes(), " and op(weight) ", b.sizes(), " do not multiply.");
    TORCH_CHECK(param_.type != P::LINEAR_REDUCE_SCATTER || x.size(0) % param_.rankSize == 0, "x's ", x.size(0),
                " rows must divide among the ", param_.rankSize, " ranks of LINEAR_REDUCE_SCATTER.");
    TORCH_CHECK(!communicates() || param_.type != P::ALL_GATHER_LINEAR_REDUCE_SCATTER ||
                    x.size(0) * grid.agDim % grid.rsDim == 0,
                "the ", x.size(0) * grid.agDim, " gathered rows of x must divide among the ", grid.rsDim,
                " ranks of the reduce-scatter.");
    at::Tensor residual = param_.hasResidual ? host_view("residual", pack.inTensors[2]) : at::Tensor();
    at::Tensor out = host_view("out", pack.outTensors[0]);
    const int64_t rows = out_rows(x.size(0));
    TORCH_CHECK(out.dim() == 2 && out.size(0) == rows && out.size(1) == b.size(1), "out must be [", rows, ", ",
                b.size(1), "], got ", out.sizes(), ".");
    TORCH_CHECK(!residual.defined() || residual.numel() == b.size(1) || residual.sizes() == out.sizes(),
                "residual must have out's shape ", out.sizes(), " or its ", b.size(1), " columns, got ",
                residual.sizes(), ".");
    at::Tensor gathered = keeps_gathered_input() ? host_view("the gathered input", pack.outTensors[1]) : at::Tensor();
    TORCH_CHECK(!gathered.defined() || (gathered.size(0) == x.size(0) * param_.rankSize && gathered.size(1) ==
                x.size(1)), "the gathered input must be [", x.size(0) * param_.rankSize, ", ", x.size(1), "], got ",
                gathered.sizes(), ".");
    std::shared_ptr<torch_npu::CommLease> lease = executing_;
    const P::ParallelType type = communicates() ? param_.type : P::PURE_LINEAR;
    const GridLines lines = grid_lines();
    return [x, b, residual, out, gathered, lease, type, lines]() mutable {
      if (type == P::ALL_GATHER_LINEAR_REDUCE_SCATTER) {
        at::Tensor result = gather_multiply_reduce_scatter(*lease, lines, x, b);
        lease.reset();  // the group's turn is over
        if (residual.defined()) result = result + residual.to(at::kFloat).reshape({-1, result.size(1)});
        out.copy_(result);
        return;
      }
      at::Tensor a = x;
      if (type == P::ALL_GATHER_LINEAR) {
        a = at::empty({x.size(0) * lease->size(), x.size(1)}, x.options());
        lease->wait_turn();
        lease->allgather(a, x.contiguous());
      }
      at::Tensor result = at::matmul(a.to(at::kFloat), b.to(at::kFloat)).contiguous();
      if (type == P::LINEAR_ALL_REDUCE) {
        lease->wait_turn();
        lease->allreduce_sum(result);
      } else if (type == P::LINEAR_REDUCE_SCATTER) {
        at::Tensor block = at::empty({result.size(0) / lease->size(), result.size(1)}, result.options());
        lease->wait_turn();
        lease->reduce_scatter_sum(block, result);
        result = block;
      }
      lease.reset();  // the group's turn is over
      if (residual.defined()) result = result + residual.to(at::kFloat).reshape({-1, result.size(1)});
      out.copy_(result);
      if (gathered.defined()) gathered.copy_(a);
    };
  }

 private:
  // This rank's lines of the 2-D grid: the ranks of its all-gather, in
  // order, and the ranks of its reduce-scatter with its place among them.
  struct GridLines {
    std::vector<int64_t> ag_ranks, rs_ranks;
    int64_t rs_place = 0;
  };

  GridLines grid_lines() const {
    GridLines lines;
    if (param_.type != P::ALL_GATHER_LINEAR_REDUCE_SCATTER || !communicates()) return lines;
    const int64_t ag = param_.twoDimTPInfo.agDim, rs = param_.twoDimTPInfo.rsDim, rank = param_.rank;
    const bool inner_ag = param_.twoDimTPInfo.innerDimIsAg != 0;
    // innerDimIsAg: rank = rs_place * agDim + ag_place; otherwise rank = ag_place * rsDim + rs_place.
    const int64_t ag_place = inner_ag ? rank % ag : rank / rs;
    lines.rs_place = inner_ag ? rank / ag : rank % rs;
    for (int64_t i = 0; i < ag; ++i) lines.ag_ranks.push_back(inner_ag ? lines.rs_place * ag + i : i * rs + lines.rs_place);
    for (int64_t j = 0; j < rs; ++j) lines.rs_ranks.push_back(inner_ag ? j * ag + ag_place : ag_place * rs + j);
    return lines;
  }

  static at::Tensor gather_multiply_reduce_scatter(torch_npu::CommLease& lease, const GridLines& lines,
                                                   const at::Tensor& x, const at::Tensor& b) {
    const int64_t ranks = lease.size();
    at::Tensor every_x = at::empty({ranks * x.size(0), x.size(1)}, x.options());
    lease.wait_turn();
    lease.allgather(every_x, x.contiguous());
    std::vector<at::Tensor> blocks;
    for (int64_t r : lines.ag_ranks) blocks.push_back(every_x.narrow(0, r * x.size(0), x.size(0)));
    at::Tensor product = at::matmul(at::cat(blocks).to(at::kFloat), b.to(at::kFloat)).contiguous();
    at::Tensor every_product = at::empty({ranks * product.size(0), product.size(1)}, product.options());
    lease.allgather(every_product, product);
    at::Tensor sum = at::zeros_like(product);
    for (int64_t r : lines.rs_ranks) sum.add_(every_product.narrow(0, r * product.size(0), product.size(0)));
    const int64_t rows = product.size(0) / static_cast<int64_t>(lines.rs_ranks.size());
    return sum.narrow(0, lines.rs_place * rows, rows);
  }

  bool keeps_gathered_input() const { return param_.keepIntermediate && param_.type == P::ALL_GATHER_LINEAR; }
  bool communicates() const { return param_.rankSize > 1 && param_.type != P::PURE_LINEAR; }
  int64_t out_rows(int64_t x_rows) const {
    if (param_.type == P::ALL_GATHER_LINEAR) return x_rows * param_.rankSize;
    if (param_.type == P::LINEAR_REDUCE_SCATTER) return x_rows / param_.rankSize;
    if (param_.type == P::ALL_GATHER_LINEAR_REDUCE_SCATTER && param_.rankSize > 1) {
      return x_rows * param_.twoDimTPInfo.agDim / std::max<int64_t>(param_.twoDimTPInfo.rsDim, 1);
    }
    return x_rows;
  }

  infer::LinearParallelParam param_;
  std::shared_ptr<torch_npu::CommLease> lease_;      // taken by Setup, for the next Execute
  std::shared_ptr<torch_npu::CommLease> executing_;  // the lease, during Execute
};

}  // namespace
}  // namespace vnpu

// Explicit specializations do not take the primary template's visibility.
template <>
__attribute__((visibility("default"))) Status CreateOperation(const infer::LinearParam& opParam,
                                                               Operation** operation) {
  return vnpu::create<vnpu::LinearOperation>(opParam, operation);
}

template <>
__attribute__((visibility("default"))) Status CreateOperation(const infer::GroupedMatmulInplaceAddParam& opParam,
                                                               Operation** operation) {
  return vnpu::create<vnpu::GroupedMatmulInplaceAddOperation>(opParam, operation);
}

template <>
__attribute__((visibility("default"))) Status CreateOperation(const infer::LinearParallelParam& opParam,
                                                               Operation** operation) {
  return vnpu::create<vnpu::LinearParallelOperation>(opParam, operation);
}

}  // namespace atb
