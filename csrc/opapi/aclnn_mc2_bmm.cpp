// The expert-parallel mc2 pair: batch matmuls fused with an all-to-all over
// the expert-parallel (ep) group and an all-gather or reduce-scatter over the
// tensor-parallel (tp) group, as MindSpeed's npu_alltoall_allgather_bmm and
// npu_bmm_reducescatter_alltoall op builders call them (its MoE layer with
// --moe-bmm-mc2). Each operator takes both groups' next collective turns
// when it is prepared, ep's first (Note [Collectives inside a
// compute-stream task] in csrc/core/comm_lease.h): every rank takes them in
// that order, so two operators never wait for each other's groups.
//
// Layouts (ep, tp the group sizes; E experts, C tokens per expert):
// - AlltoAllAllGatherBatchMatMul: x (E, C, H/tp) for xShardType 0, (E, C/tp,
//   H) for 1. All-to-all: expert block r goes to ep rank r; the received
//   blocks are stacked along C in ep-rank order: (E/ep, ep*C, .). All-gather:
//   the tp ranks' results side by side along H (0), or interleaved along C
//   (1: ep outer, tp inner, (E/ep, ep, tp, C/tp, H)). Then @ weight (E/ep, H,
//   M/tp), + bias, then the activation (GELU in its erf form, as MindSpeed's
//   own golden computes it).
//   These are the layouts of MindSpeed's tests of the pair (their goldens
//   spell them out with unfused collectives).
// - BatchMatMulReduceScatterAlltoAll: the inverse layout. x @ weight
//   (E/ep, ep*C, H) is reduce-scattered over tp along H (yShardType 0) or
//   along C (1, rows as (ep, tp, C/tp)), + bias, then C block r goes to ep
//   rank r, and the received
//   blocks are stacked along E in ep-rank order: (E, C, H/tp) or (E, C/tp, H).
//
// The math is float32 rounded to x's dtype once, except that the second
// operator's per-rank products are rounded before the tp ranks' sum, as the
// kernel (and MindSpeed's golden) does; the all-to-all and all-gather of the
// first operator move x's values unchanged.
#include <memory>
#include <string>

#include <ATen/TensorOperators.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_all_to_all_all_gather_batch_mat_mul.h"
#include "aclnnop/aclnn_batch_mat_mul_reduce_scatter_all_to_all.h"
#include "csrc/core/comm_lease.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"

namespace torch_npu {
namespace aclnn {
namespace {

enum BmmActivation : int64_t { kBmmNone = 0, kBmmGelu = 1, kBmmSilu = 2, kBmmRelu = 3, kBmmFastGelu = 4 };

// The two groups' turns, ep's first, with their sizes checked against the caller's.
struct EpTpTurns {
  std::shared_ptr<CommLease> ep, tp;
};

EpTpTurns take_ep_tp_turns(const char* api, const char* group_ep, const char* group_tp, int64_t ep_size,
                           int64_t tp_size) {
  TORCH_CHECK(group_ep != nullptr && group_ep[0] != '\0' && group_tp != nullptr && group_tp[0] != '\0',
              "groupEp and groupTp must name hccl communicators (get_hccl_comm_name).");
  TORCH_CHECK(std::string(group_ep) != group_tp, "groupEp and groupTp must be different groups, but both are \"",
              group_ep, "\".");
  EpTpTurns g;
  g.ep = lease_comm(group_ep, api);
  TORCH_CHECK(g.ep->size() == ep_size, "epWorldSize is ", ep_size, " but group \"", group_ep, "\" has ",
              g.ep->size(), " ranks.");
  g.tp = lease_comm(group_tp, api);
  TORCH_CHECK(g.tp->size() == tp_size, "tpWorldSize is ", tp_size, " but group \"", group_tp, "\" has ",
              g.tp->size(), " ranks.");
  return g;
}

void check_bmm_inputs(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t ep, int64_t tp,
                  int64_t shard_type, const char* shard_name) {
  TORCH_CHECK(x.dim() == 3 && weight.dim() == 3, "x and weight must be 3-dimensional, but got ", x.sizes(), " and ",
              weight.sizes(), ".");
  TORCH_CHECK(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16, "x must be float16 or bfloat16, "
              "but got ", x.scalar_type(), ".");
  TORCH_CHECK(weight.scalar_type() == x.scalar_type(), "weight must have x's dtype ", x.scalar_type(), ", but got ",
              weight.scalar_type(), ".");
  TORCH_CHECK(ep > 0 && tp > 0, "epWorldSize and tpWorldSize must be positive, but got ", ep, " and ", tp, ".");
  TORCH_CHECK(shard_type == 0 || shard_type == 1, shard_name, " must be 0 (shard H) or 1 (shard C), but got ",
              shard_type, ".");
  if (bias.defined()) {
    const auto want = x.scalar_type() == at::kHalf ? at::kHalf : at::kFloat;
    TORCH_CHECK(bias.scalar_type() == want, "biasOptional must be ", want, " for ", x.scalar_type(), " x, but got ",
                bias.scalar_type(), ".");
  }
}

// bias (E/ep, N) or (E/ep, 1, N) as (E/ep, 1, N) float32.
at::Tensor bmm_bias(const at::Tensor& bias, int64_t experts, int64_t n) {
  if (!bias.defined()) return bias;
  const bool fits = (bias.dim() == 2 && bias.size(0) == experts && bias.size(1) == n) ||
                    (bias.dim() == 3 && bias.size(0) == experts && bias.size(1) == 1 && bias.size(2) == n);
  TORCH_CHECK(fits, "biasOptional must be (", experts, ", ", n, ") or (", experts, ", 1, ", n, "), but got ",
              bias.sizes(), ".");
  return bias.reshape({experts, 1, n}).to(at::kFloat);
}

void check_bmm_output(const char* name, const at::Tensor& out, at::IntArrayRef shape, const at::Tensor& x) {
  TORCH_CHECK(out.sizes() == shape && out.scalar_type() == x.scalar_type(), name, " must be ", x.scalar_type(), " ",
              shape, ", but got ", out.scalar_type(), " ", out.sizes(), ".");
}

at::Tensor bmm_activation(const at::Tensor& y, int64_t act) {
  switch (act) {
    case kBmmGelu: return at::gelu(y);
    case kBmmSilu: return at::silu(y);
    case kBmmRelu: return at::relu(y);
    case kBmmFastGelu: return y * at::sigmoid(y * 1.702);
    default: return y;
  }
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::host_view;
using torch_npu::aclnn::launch;
using torch_npu::aclnn::optional_host_view;
using torch_npu::aclnn::prepare;

extern "C" {

aclnnStatus aclnnAlltoAllAllGatherBatchMatMulGetWorkspaceSize(
    const aclTensor* x, const aclTensor* weight, const aclTensor* biasOptional, const char* groupEp,
    const char* groupTp, int64_t epWorldSize, int64_t tpWorldSize, int64_t xShardType, int64_t actType,
    aclTensor* y1Out, aclTensor* y2OutOptional, aclTensor* y3OutOptional, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  const char* api = "aclnnAlltoAllAllGatherBatchMatMul";
  return prepare(api, workspaceSize, executor, [&]() -> std::function<void()> {
    using namespace torch_npu::aclnn;
    at::Tensor xv = host_view("x", x), w = host_view("weight", weight), b = optional_host_view("biasOptional",
                                                                                                   biasOptional);
    const int64_t ep = epWorldSize, tp = tpWorldSize;
    check_bmm_inputs(xv, w, b, ep, tp, xShardType, "xShardType");
    TORCH_CHECK(actType >= kBmmNone && actType <= kBmmFastGelu, "actType must be 0 (none), 1 (GELU), 2 (SiLU), "
                "3 (ReLU) or 4 (FastGELU), but got ", actType, ".");
    const int64_t e = xv.size(0), experts = w.size(0);
    TORCH_CHECK(e == experts * ep, "x has ", e, " experts, but weight has ", experts, " per rank and epWorldSize is ",
                ep, " (x's E must be weight's E/ep times ep).");
    const int64_t rows = xShardType == 0 ? ep * xv.size(1) : ep * tp * xv.size(1);
    const int64_t k = xShardType == 0 ? xv.size(2) * tp : xv.size(2);
    TORCH_CHECK(w.size(1) == k, "weight's K ", w.size(1), " must be x's gathered hidden size ", k, ".");
    const int64_t n = w.size(2);
    at::Tensor bias = bmm_bias(b, experts, n);
    at::Tensor y1 = host_view("y1Out", y1Out), y2 = optional_host_view("y2OutOptional", y2OutOptional),
               y3 = optional_host_view("y3OutOptional", y3OutOptional);
    check_bmm_output("y1Out", y1, {experts, rows, n}, xv);
    if (y2.defined() && y2.numel() > 0) check_bmm_output("y2OutOptional", y2, {experts, rows, k}, xv);
    if (y3.defined() && y3.numel() > 0) check_bmm_output("y3OutOptional", y3, {experts, rows, n}, xv);
    // Last: only a valid call takes the turns.
    auto groups = std::make_shared<EpTpTurns>(take_ep_tp_turns(api, groupEp, groupTp, ep, tp));
    const int64_t shard = xShardType, act = actType;
    return [xv, w, bias, y1, y2, y3, groups, ep, tp, experts, shard, act]() {
      TORCH_CHECK(groups->ep != nullptr, "an mc2 executor runs once on vNPU (its collective turns are used).");
      const int64_t c = xv.size(1), h = xv.size(2);
      // All-to-all over ep: expert block r to ep rank r; received (ep, E/ep, C, h).
      at::Tensor received = at::empty({ep, experts, c, h}, xv.options());
      groups->ep->wait_turn();
      groups->ep->alltoall(received, xv.contiguous());
      groups->ep.reset();
      at::Tensor local = received.permute({1, 0, 2, 3}).reshape({experts, ep * c, h});
      // All-gather over tp: (tp, E/ep, ep*C, h), side by side along H or stacked along C.
      at::Tensor gathered = at::empty({tp, experts, ep * c, h}, xv.options());
      groups->tp->wait_turn();
      groups->tp->allgather(gathered, local.contiguous());
      groups->tp.reset();
      at::Tensor full = shard == 0 ? gathered.permute({1, 2, 0, 3}).reshape({experts, ep * c, tp * h})
                                   : gathered.view({tp, experts, ep, c, h}).permute({1, 2, 0, 3, 4})
                                         .reshape({experts, ep * tp * c, h});
      at::Tensor product = at::bmm(full.to(at::kFloat), w.to(at::kFloat));
      if (bias.defined()) product = product + bias;
      if (y2.defined() && y2.numel() > 0) y2.copy_(full);
      if (y3.defined() && y3.numel() > 0) y3.copy_(product);
      y1.copy_(bmm_activation(product, act));
    };
  });
}

aclnnStatus aclnnAlltoAllAllGatherBatchMatMul(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                              aclrtStream stream) {
  return launch("aclnnAlltoAllAllGatherBatchMatMul", executor, stream);
}

aclnnStatus aclnnBatchMatMulReduceScatterAlltoAllGetWorkspaceSize(
    const aclTensor* x, const aclTensor* weight, const aclTensor* biasOptional, const char* groupEp,
    const char* groupTp, int64_t epWorldSize, int64_t tpWorldSize, int64_t yShardType, aclTensor* out,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* api = "aclnnBatchMatMulReduceScatterAlltoAll";
  return prepare(api, workspaceSize, executor, [&]() -> std::function<void()> {
    using namespace torch_npu::aclnn;
    at::Tensor xv = host_view("x", x), w = host_view("weight", weight), b = optional_host_view("biasOptional",
                                                                                                   biasOptional);
    const int64_t ep = epWorldSize, tp = tpWorldSize;
    check_bmm_inputs(xv, w, b, ep, tp, yShardType, "yShardType");
    const int64_t experts = xv.size(0), rows = xv.size(1), h = w.size(2);
    TORCH_CHECK(w.size(0) == experts && w.size(1) == xv.size(2), "weight must be (", experts, ", ", xv.size(2),
                ", H) for x ", xv.sizes(), ", but got ", w.sizes(), ".");
    const int64_t parts = yShardType == 0 ? ep : ep * tp;
    TORCH_CHECK(rows % parts == 0, "x's C axis ", rows, " must divide by ", yShardType == 0 ? "ep" : "ep * tp",
                " (", parts, ").");
    TORCH_CHECK(yShardType == 1 || h % tp == 0, "weight's H ", h, " must divide by tpWorldSize ", tp, ".");
    const int64_t c = rows / parts, out_h = yShardType == 0 ? h / tp : h;
    at::Tensor bias = bmm_bias(b, experts, out_h);
    at::Tensor y = host_view("out", out);
    check_bmm_output("out", y, {experts * ep, c, out_h}, xv);
    // Last: only a valid call takes the turns.
    auto groups = std::make_shared<EpTpTurns>(take_ep_tp_turns(api, groupEp, groupTp, ep, tp));
    const int64_t shard = yShardType;
    return [xv, w, bias, y, groups, ep, tp, experts, rows, h, c, out_h, shard]() {
      TORCH_CHECK(groups->ep != nullptr, "an mc2 executor runs once on vNPU (its collective turns are used).");
      // (E/ep, rows, H), rounded to x's dtype as each rank's matmul output
      // is before the reduce-scatter adds the ranks' (MindSpeed's golden: a
      // bmm, then _reduce_scatter_base, to bfloat16's 0.002 tolerance).
      at::Tensor product = at::bmm(xv.to(at::kFloat), w.to(at::kFloat)).to(xv.scalar_type()).to(at::kFloat);
      // Reduce-scatter over tp: block t (of H, or of C with tp outer) to tp rank t.
      at::Tensor blocks = shard == 0 ? product.view({experts, rows, tp, out_h}).permute({2, 0, 1, 3})
                                     : product.view({experts, ep, tp, c, h}).permute({2, 0, 1, 3, 4});
      const int64_t mine_rows = shard == 0 ? rows : rows / tp;
      at::Tensor mine = at::empty({experts, mine_rows, out_h}, product.options());
      groups->ep->wait_turn();  // the turns in the order they were taken
      groups->tp->wait_turn();
      groups->tp->reduce_scatter_sum(mine, blocks.contiguous());
      groups->tp.reset();
      if (bias.defined()) mine = mine + bias;
      // All-to-all over ep: C block r to ep rank r; received blocks stacked along E.
      at::Tensor outgoing = mine.view({experts, ep, c, out_h}).permute({1, 0, 2, 3}).contiguous();
      at::Tensor received = at::empty({ep, experts, c, out_h}, product.options());
      groups->ep->alltoall(received, outgoing);
      groups->ep.reset();
      y.copy_(received.reshape({ep * experts, c, out_h}));
    };
  });
}

aclnnStatus aclnnBatchMatMulReduceScatterAlltoAll(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                  aclrtStream stream) {
  return launch("aclnnBatchMatMulReduceScatterAlltoAll", executor, stream);
}

}  // extern "C"
